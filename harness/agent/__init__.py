"""The node agent: the stdlib-only parts of kvgate (load generator, KV emulator) bundled as one
zipapp that runs with a node's bare ``python3 -I -S``.

* ``bundle.build_zipapp(dest_dir) -> Path``: a reproducible ``kvgate-agent.pyz`` (fixed
  timestamps and order: its sha256 depends only on the sources).
* ``deploy.ensure_agent(executor, workdir) -> str``: copy it to a node unless the same bytes are
  already there; returns its remote path (content-addressed, so a running agent is never replaced).
* ``remote``: start ``load run`` detached on a node, poll it, pull its records incrementally by
  byte offset, reattach after a disconnect or a controller restart.
* ``main.main(argv)``: the zipapp's entry point (``load ...``, ``sim ...``, ``read-range``, ``version``).

Stdlib only.
"""

"""Entry point of the agent zipapp: ``python3 -I -S kvgate-agent.pyz COMMAND ...``.

* ``load ...``: ``harness.load.cli.main``
* ``soak ...``: ``harness.load.soak.main`` (sustained load in windows, watchdog, node health)
* ``soak-watch ...``: ``harness.load.soakwatch.main`` (the engine node's watchdog during a soak
  whose load runs on another node)
* ``sim ...``: ``harness.sim.cli.main`` (when the emulator is bundled)
* ``read-range PATH OFFSET MAX_BYTES``: write bytes ``[OFFSET, OFFSET + MAX_BYTES)`` of PATH to
  stdout (the controller pulls records incrementally with it)
* ``version``: the kvgate version and the agent's Python
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Optional

USAGE = "usage: kvgate-agent.pyz {load,soak,soak-watch,sim,read-range,version} ..."


def _read_range(argv: Sequence[str]) -> int:
    if len(argv) != 3:
        print("usage: kvgate-agent.pyz read-range PATH OFFSET MAX_BYTES", file=sys.stderr)
        return 2
    path, offset, limit = argv[0], int(argv[1]), int(argv[2])
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            data = fh.read(limit)
    except FileNotFoundError:
        return 3  # not written yet: the caller treats it as empty
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr if not args else sys.stdout)
        return 2 if not args else 0
    cmd, rest = args[0], args[1:]
    if cmd == "load":
        from harness.load.cli import main as load_main

        return load_main(rest)
    if cmd == "soak":
        from harness.load.soak import main as soak_main

        return soak_main(rest)
    if cmd == "soak-watch":
        from harness.load.soakwatch import main as watch_main

        return watch_main(rest)
    if cmd == "sim":
        try:
            from harness.sim.cli import main as sim_main
        except ImportError as exc:
            print(f"kvgate-agent: the KV emulator is not in this agent ({exc})", file=sys.stderr)
            return 2
        return sim_main(rest)
    if cmd == "read-range":
        return _read_range(rest)
    if cmd == "version":
        from harness import __version__

        print(f"kvgate-agent {__version__} python {sys.version.split()[0]}")
        return 0
    print(f"kvgate-agent: unknown command {cmd!r}\n{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())

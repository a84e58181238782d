"""G1, arrival: the node facts and checks of a campaign's first gate (``arrival.run_g1``).

May import: ``harness.pipelines.shared`` and the layers below pipelines; not the other gate
packages, ``nightly``, ``cliff`` or ``gaterun``."""

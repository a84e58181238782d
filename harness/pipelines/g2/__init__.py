"""G2, single-node baseline (``baseline.run_g2``): the storage probes, the sweep with repetitions
and cold restore on the baseline arm.

May import: ``harness.pipelines.shared`` and the layers below pipelines; not the other gate
packages, ``nightly``, ``cliff`` or ``gaterun``."""

"""G3, candidate vs baseline (``compare.run_g3``): the candidate arm under the baseline's workload,
compared per concurrency, SLO capacity gain, and output identity (``identity``).

May import: ``harness.pipelines.shared`` and the layers below pipelines; not the other gate
packages (the per-arm steps it shares with G2 are ``shared.armsteps``), ``nightly``, ``cliff`` or
``gaterun``."""

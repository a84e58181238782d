"""The capacity-cliff sweep (``run``, ``kvgate cliff``): where each KV tier fills, and what it costs.

May import: ``harness.pipelines.shared`` and the layers below pipelines; not the gate packages,
``nightly`` or ``gaterun``."""

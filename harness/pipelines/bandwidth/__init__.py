"""The bandwidth sweep (``run``, ``kvgate bandwidth-sweep``): G3 at provisioned read rates of the
candidate's tier, and the least bandwidth at which it still passes.

May import: ``harness.pipelines.gaterun``, ``g1``, ``g3``, ``shared`` and the layers below pipelines;
nothing in pipelines imports it."""

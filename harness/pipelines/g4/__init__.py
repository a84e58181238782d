"""G4, the soak (``soak.run_g4``): the detached soak actors on the nodes (``soakactors``), pulling
their files while they run (``soakrun``), the soak's measured figures (``soakdata``) and the checks
on what the node agent wrote (``soakverify``).

May import: ``harness.pipelines.shared`` and the layers below pipelines; not the other gate
packages, ``nightly``, ``cliff`` or ``gaterun``."""

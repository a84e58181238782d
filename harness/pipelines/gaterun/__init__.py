"""One gate run end to end (``runner.run_gate``): validate the inputs, check the G2 baseline a G3
compares with (``baselinecheck``), open the campaign, run the gate's pipeline (``g1``..``g4``),
mark what is NOT_APPLICABLE (``applicability``), fingerprint the run (``fingerprint``), evaluate,
write ``result.json`` and the reports; and the demo (``demo``: G1 -> G4 on this machine).

May import: the gate packages ``g1``..``g4``, ``shared``, and the layers below pipelines.
Never imports ``nightly`` or ``cliff``."""

"""The steps more than one pipeline runs: the gate run context (``context``), engine instances and
the load agent (``instances``, ``agentload``), a load point and the arm sweep (``loadpoint``,
``sweep``, ``sweepdata``), cold restore and its probes (``coldrestore``, ``restoreprobe``,
``drain``), full-storage handling (``enospc``), the storage probes steps (``probesteps``, and the
per-arm ``armsteps`` of G2 and G3), tier hits (``tierhits``) and SLO capacity (``slo``,
``sloconfirm``).

May import: harness layers below pipelines (estimate, report, store, gates, engines, ...).
Never imports ``harness.pipelines.gaterun``, ``g1``..``g4``, ``nightly`` or ``cliff``."""

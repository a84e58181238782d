"""The nightly regression run (``run``) and the run history it feeds and reads: result files to
history records (``historyrecords``, also ``kvgate history import``) and change detection over a
stored series (``historyanalysis``).

May import: ``harness.pipelines.shared`` and the layers below pipelines; not the gate packages,
``cliff`` or ``gaterun``."""

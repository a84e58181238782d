"""The records every layer above shares: a gate check's outcome (``outcome``: ``Verdict``,
``Message``, ``Interval``, ``Observation``, ``CheckResult``) and the result file made of them
(``result``: ``GateResult``, ``SCHEMA_VERSION``).

They are data only (pydantic models, no behaviour beyond composing a message), so the gate engine
that writes them, the store that keeps them and the reports that read them all import them from here,
and the store never reaches up into the gates (an import-linter contract in pyproject.toml).
This package imports nothing from ``harness``.
"""

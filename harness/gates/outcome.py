"""What evaluating a gate check produces; the models live in ``harness.records.outcome`` (shared by
the gate engine, the store and the reports) and are re-exported here for the gate engine's code."""

from __future__ import annotations

from harness.records.outcome import CheckResult, Interval, Message, Observation, Verdict, compose

__all__ = ["CheckResult", "Interval", "Message", "Observation", "Verdict", "compose"]

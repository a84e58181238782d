"""The result file of a gate (``reports/<campaign>/<gate>/result.json``), schema version 1.

This is the contract between the gate engine (which writes it) and the reports (which are
rendered from it alone). Result files carry ``schema_version`` from day one; a reader refuses a
version it does not know instead of guessing.
"""

from __future__ import annotations

import enum
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1


class Verdict(str, enum.Enum):
    PASS = "PASS"
    FAIL = "FAIL"
    INCONCLUSIVE = "INCONCLUSIVE"
    NOT_RUN = "NOT_RUN"  # the metric was not measured: counts as not passed
    ERROR = "ERROR"  # evaluating the check raised: counts as failed, with the reason
    # Nothing to check: the inventory or profile states no expectation for it (a CPU node has no
    # accelerators to match; a recompute arm has no storage target). Shown in every report with its
    # reason; it never passes a gate on its own (a gate needs at least one applicable blocker).
    NOT_APPLICABLE = "NOT_APPLICABLE"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Interval(_Model):
    low: float
    high: float
    confidence: float = Field(description="e.g. 0.95")
    method: str = Field(default="bootstrap-percentile", description="How it was computed")
    resamples: Optional[int] = None


class Observation(_Model):
    """One evaluated instance of a check (a check on 'compare.ttft_p50_reduction.*' has one per
    concurrency)."""

    path: str = Field(description="Concrete metric path, e.g. compare.ttft_p50_reduction.c16")
    measured: Optional[float] = Field(default=None, description="Point estimate in base units")
    measured_text: str = Field(default="", description="Human text, e.g. '27.3%', 'MI308X x8, 192 GB'")
    expected_text: str = Field(default="", description="What was expected, e.g. '>= 25%'")
    interval: Optional[Interval] = None
    n_samples: Optional[int] = None
    needed_samples: Optional[int] = Field(default=None, description="For INCONCLUSIVE: a likely deciding size")
    min_samples: Optional[int] = Field(default=None, description="Interval checks: the fewest samples (repetitions "
                                       "for grouped samples) an interval is computed from")
    power: Optional[float] = Field(default=None, description="Interval checks: the achieved power, the chance an "
                                   "interval this wide around the estimate clears the threshold")
    verdict: Verdict
    reason: str = ""
    evidence: list[str] = Field(default_factory=list, description="Paths relative to the gate directory")
    caused_by_fault: bool = Field(default=False, description="The value only records an infrastructure fault "
                                  "(e.g. a node that did not answer): a FAIL here is not measured evidence")


class CheckResult(_Model):
    id: str
    description: str
    metric: str
    comparator: str
    threshold: Optional[str] = None
    threshold_value: Optional[float] = None
    unit_kind: str = "count"
    severity: Literal["blocker", "advisory"]
    statistic: Literal["point", "interval"]
    confidence: Optional[float] = None
    override_reason: Optional[str] = Field(default=None, description="Set when a profile changed the threshold")
    verdict: Verdict
    reason: str = ""
    observations: list[Observation] = Field(default_factory=list)


class GateResult(_Model):
    schema_version: int = SCHEMA_VERSION
    gate: str
    title: str
    campaign: str
    verdict: Verdict = Field(description="PASS only when every blocker check passed")
    exit_code: int
    verdict_reason: str = Field(default="", description="Why the gate got its verdict (harness.gates.verdict)")
    started_at: str
    finished_at: str
    kvgate_version: str
    git_commit: Optional[str] = None
    operator: Optional[str] = None
    inventory: dict[str, Any] = Field(default_factory=dict, description="cluster, nodes, platforms")
    profile: dict[str, Any] = Field(default_factory=dict, description="name, model, engine, arms")
    emulated: bool = Field(default=False, description="Compute was emulated (kvgate sim)")
    checks: list[CheckResult] = Field(default_factory=list)
    measurements: dict[str, Any] = Field(default_factory=dict, description="Measured values for charts/tables")
    faults: list[str] = Field(default_factory=list, description="Infrastructure faults recorded as evidence")
    fingerprint: Optional[dict[str, Any]] = Field(
        default=None, description="Workload fingerprint {digest, fields} (harness.gates.fingerprint); G2: the "
        "baseline arm, G3: the candidate arm")
    baseline: Optional[dict[str, Any]] = Field(
        default=None, description="G3: the G2 baseline used {where, digest, accepted_mismatches}")
    notes: list[str] = Field(default_factory=list)

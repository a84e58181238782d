"""What evaluating a gate check produces: a verdict per check and per observation, with the measured
value, its interval and the reason. Written into ``result.json`` (``harness.store.schema.GateResult``,
which re-exports these names); here so the gate engine imports them without reaching up to the store."""

from __future__ import annotations

import enum
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field


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
    power_repetitions: Optional[int] = Field(default=None, description="Interval checks: repetitions (samples "
                                             "per group) that would give 80% power at the measured spread")
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

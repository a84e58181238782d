"""Gate files (gates/G1.yaml .. G4.yaml): the checks of each gate and their thresholds."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, ValidationInfo, field_validator, model_validator

from harness.catalog import metric_info
from harness.config.common import StrictModel
from harness.units import UnitKind, UnitParseError, parse_quantity

Comparator = Literal[">=", ">", "<=", "<", "==", "!=", "is_true", "is_false"]
GateId = Literal["G1", "G2", "G3", "G4"]
IDENTITY_METRIC = "compare.output_divergence"


class Statistic(StrictModel):
    """How a measured value is turned into a verdict."""

    kind: Literal["point", "interval"] = Field(
        default="point",
        description="point: compare the estimate itself (labelled so); interval: the whole bootstrap "
        "confidence interval must clear the threshold to pass",
    )
    confidence: float = Field(default=0.95, gt=0.5, lt=1.0, description="Confidence level of the interval")
    resamples: int = Field(default=2000, ge=200, le=100000, description="Bootstrap resamples")


class Check(StrictModel):
    """One check of a gate."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_]*$", description="Check id, unique within the gate")
    description: str = Field(min_length=1, description="What the check establishes, for the report")
    metric: str = Field(description="Dotted path into the measured results; '*' matches each item")
    comparator: Comparator = Field(description="How measured compares to threshold")
    threshold: Optional[str] = Field(default=None, description="Threshold with its unit, e.g. '25%', '5 GB/s'")
    severity: Literal["blocker", "advisory"] = Field(default="blocker", description="blocker decides the gate")
    statistic: Statistic = Field(default_factory=Statistic)
    compared_tokens: Optional[int] = Field(
        default=None, ge=1, le=4096,
        description="Output identity checks (metric compare.output_divergence.*) only: compare the first N "
        "tokens of each measured output (default 16: the greedy prefix that batch-variant GPU kernels "
        "still reproduce)")

    @field_validator("threshold")
    @classmethod
    def _threshold_unit(cls, v: Optional[str], info: ValidationInfo) -> Optional[str]:
        if v is None:
            return v
        metric = info.data.get("metric")
        m = metric_info(metric) if isinstance(metric, str) else None
        try:
            parse_quantity(v, m.kind if m else None)
        except UnitParseError as exc:
            raise ValueError(str(exc)) from None
        return v

    @model_validator(mode="after")
    def _threshold_needed(self) -> Check:
        if self.comparator in ("is_true", "is_false"):
            if self.threshold is not None:
                raise ValueError(f"comparator {self.comparator} takes no threshold")
        elif self.threshold is None:
            raise ValueError(f"comparator {self.comparator!r} needs a threshold")
        if self.compared_tokens is not None and not self.metric.startswith(IDENTITY_METRIC):
            raise ValueError(f"compared_tokens applies only to a check on {IDENTITY_METRIC}.*, not {self.metric!r}")
        return self

    @property
    def threshold_value(self) -> float | None:
        if self.threshold is None:
            return None
        info = metric_info(self.metric)
        return parse_quantity(self.threshold, info.kind if info else None).value

    @property
    def unit_kind(self) -> UnitKind:
        info = metric_info(self.metric)
        return info.kind if info else UnitKind.COUNT


class GateSpec(StrictModel):
    """A gate: its prerequisites and checks."""

    id: GateId = Field(description="G1..G4")
    title: str = Field(description="Gate title")
    description: str = Field(default="", description="What passing this gate establishes")
    prerequisites: list[GateId] = Field(default_factory=list, description="Gates that must have passed first")
    checks: list[Check] = Field(min_length=1, description="The checks")

    @field_validator("checks")
    @classmethod
    def _unique(cls, v: list[Check]) -> list[Check]:
        ids = [c.id for c in v]
        dup = sorted({i for i in ids if ids.count(i) > 1})
        if dup:
            raise ValueError(f"check ids used twice: {', '.join(dup)}")
        return v

    def check(self, check_id: str) -> Check:
        for c in self.checks:
            if c.id == check_id:
                return c
        raise KeyError(f"gate {self.id} has no check {check_id!r}; known: {', '.join(c.id for c in self.checks)}")

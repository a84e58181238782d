"""What evaluating a gate check produces: a verdict per check and per observation, with the measured
value, its interval and the reason. The gate engine writes them, the result file
(``harness.records.result.GateResult``) is made of them, the store keeps them and the reports read
them: so they live below all four (``harness.gates.outcome`` and ``harness.store.schema`` re-export
them for the code that reads them from there)."""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from typing import Literal, Optional, Union

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


class Message(_Model):
    """A sentence as a catalog message id (its English wording, with ``%(name)s`` placeholders)
    and its parameters (numbers and units already formatted, ids, or ``text``: words recorded as
    data), so a report composes it in its own language (``harness.report.i18n``)."""

    id: str
    params: dict[str, Union[str, Message]] = Field(default_factory=dict)

    def text(self, gettext: Callable[[str], str] = str) -> str:
        """This sentence in one language (``gettext``: the identity for English); a parameter that
        is a message is composed first."""
        if not self.params:
            return gettext(self.id)
        return gettext(self.id) % {k: v.text(gettext) if isinstance(v, Message) else v
                                   for k, v in self.params.items()}


def compose(messages: Sequence[Message], gettext: Callable[[str], str] = str, sep: str = "; ") -> str:
    """The messages in one language, joined by ``sep``."""
    return sep.join(m.text(gettext) for m in messages)


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
    reason_msgs: list[Message] = Field(default_factory=list, description="``reason`` as catalog messages, "
                                       "when the gate engine composed it")
    measured_msgs: list[Message] = Field(default_factory=list, description="``measured_text`` as catalog "
                                         "messages, when the gate engine composed it")
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
    reason_msgs: list[Message] = Field(default_factory=list, description="``reason`` as catalog messages")
    observations: list[Observation] = Field(default_factory=list)

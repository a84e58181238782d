"""The G4 soak section as a document: what a reader needs from a 72-hour soak on a few pages,
whatever its number of windows.

- the **drift table**: every soak check decided on an interval (TTFT and throughput drift, per
  instance, read-bandwidth retention), one row per observation with its estimate, interval,
  threshold and verdict;
- the **period table**: the windows summarised in at most ``MAX_PERIODS`` equal runs of
  consecutive windows (requests and failures summed, TTFT p50 and throughput as the median of the
  windows, TTFT p99 as the worst window), so 864 five-minute windows print as 12 rows; the
  per-window table stays in the HTML (screen only) and in ``evidence/soak/windows.jsonl``.

Read from ``result.json`` alone (``measurements.soak`` and the checks), like every report part.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

from harness.report.view import fmt_interval, obs_label, obs_measured, obs_reason
from harness.store.schema import CheckResult, Verdict

MAX_PERIODS = 12


@dataclass
class DriftRow:
    check: str
    label: str
    measured: str
    interval: str
    expected: str
    verdict: Verdict
    reason: str


@dataclass
class PeriodRow:
    windows: str  # "1-72"
    end_s: str
    requests: str
    failed: str
    ttft_p50_ms: str
    ttft_p99_ms: str
    throughput: str
    hit_rate: str


def drift_rows(checks: Sequence[CheckResult]) -> list[DriftRow]:
    """The soak checks decided on an interval, one row per observation (a check that found no
    value shows its verdict and reason, so a NOT_RUN drift is on the page too)."""
    rows = []
    for c in checks:
        if c.statistic != "interval" or not c.metric.startswith("soak."):
            continue
        for o in c.observations:
            label = obs_label(c, o)
            rows.append(DriftRow(c.id, "" if label == o.path else label, obs_measured(o, c.unit_kind),
                                 fmt_interval(o.interval, c.unit_kind, confidence=False),
                                 o.expected_text or c.threshold or "", o.verdict, obs_reason(o)))
    return rows


def _num(v: Any) -> Optional[float]:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(float(v)):
        return None
    return float(v)


def _median(values: list[Optional[float]]) -> Optional[float]:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def _f(v: Optional[float], pattern: str = "%.1f") -> str:
    return "-" if v is None else pattern % v


def _period(chunk: Sequence[Mapping[str, Any]]) -> PeriodRow:
    first, last = chunk[0].get("index"), chunk[-1].get("index")
    p99 = [v for v in (_num(w.get("ttft_p99_ms")) for w in chunk) if v is not None]
    hits = _median([_num(w.get("hit_rate")) for w in chunk])
    return PeriodRow(
        windows=str(first) if first == last else f"{first}-{last}",
        end_s=_f(_num(chunk[-1].get("t_s")), "%.0f"),
        requests=str(sum(int(_num(w.get("requests")) or 0) for w in chunk)),
        failed=str(sum(int(_num(w.get("failed")) or 0) for w in chunk)),
        ttft_p50_ms=_f(_median([_num(w.get("ttft_p50_ms")) for w in chunk])),
        ttft_p99_ms=_f(max(p99) if p99 else None),
        throughput=_f(_median([_num(w.get("throughput_tok_s")) for w in chunk])),
        hit_rate="-" if hits is None else f"{hits * 100:.1f}%")


def period_rows(windows: Sequence[Any], most: int = MAX_PERIODS) -> list[PeriodRow]:
    """The windows in at most ``most`` runs of consecutive windows of (nearly) equal length."""
    wins = [w for w in windows if isinstance(w, Mapping)]
    if not wins:
        return []
    size = math.ceil(len(wins) / most)
    return [_period(wins[i:i + size]) for i in range(0, len(wins), size)]


def soak_periods(measurements: Mapping[str, Any]) -> list[PeriodRow]:
    soak = measurements.get("soak")
    windows = soak.get("windows") if isinstance(soak, Mapping) else None
    return period_rows(windows if isinstance(windows, list) else [])

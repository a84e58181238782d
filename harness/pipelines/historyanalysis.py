"""Change detection over stored series: for each metric of a series, its latest run against the
runs before it (window rank test + minimum effect) and the confirmed change points over the last
``span`` runs. The same rules as the nightly (``harness.gates.regression``), applied to what the
history already holds (``make bench-history`` times it over every series)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Optional

from harness.exitcodes import ExitCode
from harness.gates.regression import ChangePoint, WindowComparison, change_points, compare_to_window, min_effect_for
from harness.store.historydb import HistoryDB

__all__ = ["SeriesAnalysis", "analyze_series"]


@dataclass
class SeriesAnalysis:
    series: str
    runs: int
    latest: dict[str, WindowComparison] = field(default_factory=dict)
    change_points: dict[str, list[ChangePoint]] = field(default_factory=dict)


def analyze_series(db: HistoryDB, series: str, *, window: int = 10, span: int = 365,
                   min_effect: Optional[Mapping[str, float]] = None) -> SeriesAnalysis:
    # samples only where the window test needs them (the latest run and its window, with slack for
    # runs skipped after an infrastructure fault); change points read the medians
    runs, table = db.metric_series(series, limit=span, samples_for_last=3 * (window + 1))
    usable = [i for i, r in enumerate(runs) if r.exit_code != int(ExitCode.INFRA_FAULT)]
    out = SeriesAnalysis(series, len(runs))
    if not usable:
        return out
    last, before = usable[-1], usable[:-1][-window:]
    for name, values in table.items():
        first = next(m for m in values if m is not None)
        effect = min_effect_for(name, min_effect)
        cur = values[last]
        win = [values[i] for i in before]
        out.latest[name] = compare_to_window(
            name, (cur.samples or [cur.median]) if cur is not None else [],
            [(m.samples or [m.median]) if m is not None else [] for m in win],
            better=first.better, min_effect=effect, detail=False)
        medians = [values[i].median if values[i] is not None else None for i in usable]  # type: ignore[union-attr]
        cps = change_points(medians, better=first.better, min_effect=effect) if len(medians) >= 6 else []
        for cp in cps:
            cp.index = usable[cp.index]
        out.change_points[name] = cps
    return out

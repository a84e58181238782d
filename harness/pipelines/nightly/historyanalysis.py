"""Change detection over stored series: for each metric of a series, its latest run against the
runs before it (window rank test + minimum effect) and the confirmed change points over the whole
series (or its last ``span`` runs). The same rules as the nightly (``harness.gates.regression``),
applied to what the history already holds (``make bench-history`` times it over every series).

The series is read in bulk (:meth:`HistoryDB.series_table`: one query for the runs, one for all
their metric rows, medians as arrays); samples are read only for the latest run and its window,
the only place the rank test needs them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from harness.exitcodes import ExitCode
from harness.gates.regression import ChangePoint, WindowComparison, change_points, compare_to_window, min_effect_for
from harness.store.historydb import HistoryDB, MetricRecord

__all__ = ["SeriesAnalysis", "analyze_series"]


@dataclass
class SeriesAnalysis:
    series: str
    runs: int
    latest: dict[str, WindowComparison] = field(default_factory=dict)
    change_points: dict[str, list[ChangePoint]] = field(default_factory=dict)


def analyze_series(db: HistoryDB, series: str, *, window: int = 10, span: Optional[int] = None,
                   min_effect: Optional[Mapping[str, float]] = None) -> SeriesAnalysis:
    """``span`` None: change points over every run of the series."""
    table = db.series_table(series, limit=span, bounds=False)
    runs = table.runs
    usable = np.asarray([i for i, r in enumerate(runs) if r.exit_code != int(ExitCode.INFRA_FAULT)], dtype=np.int64)
    out = SeriesAnalysis(series, len(runs))
    if not len(usable):
        return out
    last, before = int(usable[-1]), [int(i) for i in usable[:-1][-window:]]
    # samples only where the window test needs them: the latest run and its window
    sampled = [runs[i] for i in [*before, last]]
    db.attach_metrics(sampled)
    by_run: dict[int, dict[str, MetricRecord]] = {r.id: {m.name: m for m in r.metrics} for r in sampled}

    def samples(i: int, name: str) -> list[float]:
        m = by_run[runs[i].id].get(name)
        if m is None or m.median is None:
            return []
        return m.samples or [m.median]

    for k, name in enumerate(table.names):
        effect = min_effect_for(name, min_effect)
        better = table.better[name]
        out.latest[name] = compare_to_window(name, samples(last, name), [samples(i, name) for i in before],
                                             better=better, min_effect=effect, detail=False)
        medians = table.median[k, usable].tolist()
        cps = change_points(medians, better=better, min_effect=effect) \
            if int(np.isfinite(table.median[k, usable]).sum()) >= 6 else []
        for cp in cps:
            cp.index = int(usable[cp.index])
        out.change_points[name] = cps
    return out

"""analyze_series: the nightly's rules over stored series; runs with an infrastructure fault are
never part of a window or a change point."""

from __future__ import annotations

import random
from pathlib import Path

from harness.gates.regression import Status
from harness.pipelines.nightly.historyanalysis import analyze_series
from harness.store.historydb import HistoryDB, MetricRecord, RunRecord


def _add(db: HistoryDB, i: int, centre: float, *, exit_code: int = 0, rng: random.Random) -> None:
    xs = [rng.gauss(centre, 1.0) for _ in range(5)]
    db.add_run(RunRecord(run_key=f"r{i}", series="s" * 64, kind="nightly", started_at=f"2026-03-01T00:{i:02d}:00Z",
                         campaign=f"n{i}", exit_code=exit_code, metrics=[
                             MetricRecord(name="candidate.c2.ttft_p50_ms", better="lower", unit="ms", n=5,
                                          median=sorted(xs)[2], low=min(xs), high=max(xs), samples=xs)]))


def test_latest_regression_and_faulted_runs_left_out(tmp_path: Path) -> None:
    rng = random.Random(1)
    with HistoryDB(f"sqlite:///{tmp_path / 'h.sqlite'}") as db:
        for i in range(20):
            _add(db, i, 100.0, rng=rng)
        _add(db, 20, 300.0, exit_code=4, rng=rng)  # a night whose node failed: never a reference
        _add(db, 21, 100.0, rng=rng)
        a = analyze_series(db, "s" * 64)
        c = a.latest["candidate.c2.ttft_p50_ms"]
        assert c.status is Status.NO_CHANGE and c.window_runs == 10
        assert a.change_points["candidate.c2.ttft_p50_ms"] == []
        for i in range(22, 30):
            _add(db, i, 115.0, rng=rng)
        a = analyze_series(db, "s" * 64)
        (cp,) = a.change_points["candidate.c2.ttft_p50_ms"]
        assert cp.status is Status.REGRESSION and cp.index == 22  # the first run at the new level
        _add(db, 30, 140.0, rng=rng)
        c = analyze_series(db, "s" * 64).latest["candidate.c2.ttft_p50_ms"]
        assert c.status is Status.REGRESSION and c.effect_low is not None and c.effect_low > 0

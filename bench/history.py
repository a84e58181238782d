"""Benchmark: the results history at 10,000 runs x 50 metrics in SQLite.

Builds a fresh SQLite history (in a temporary folder) of 10,000 nightly runs, each with 50 metrics
of 5 samples, with a few real level shifts planted. Two layouts, side by side:

* A: 20 series (workload fingerprints) x 500 nights;
* B: 1 series x 10,000 nights.

Then times, for each layout, change detection over every series (the latest run of each metric
against its window of 10, plus change points over the last 365 runs) and the trend page render of
one series (50 charts). Targets: change detection <= 10 s, trend page <= 3 s. Prints the figures;
asserts nothing (a benchmark, not a test), but says when a target is missed.
"""

from __future__ import annotations

import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import sqlalchemy as sa  # noqa: E402

from harness.pipelines.historyanalysis import analyze_series  # noqa: E402
from harness.report.trend import render_trend_html  # noqa: E402
from harness.store.historydb import HistoryDB, MetricRecord, RunRecord, runs_table  # noqa: E402

RUNS = 10_000
METRICS = 50
SAMPLES = 5
DETECT_TARGET_S = 10.0
TREND_TARGET_S = 3.0


def _runs(series_count: int, rng: random.Random) -> list[RunRecord]:
    per = RUNS // series_count
    out = []
    for s in range(series_count):
        series = f"{s:02d}" + "a" * 62
        shift_at = rng.randrange(per // 3, per - 20)
        for i in range(per):
            metrics = []
            for k in range(METRICS):
                better = "lower" if k % 2 == 0 else "higher"
                centre = 100.0 * (1 + k / 10)
                if k % 7 == 0 and i >= shift_at:  # a planted 15% change on some metrics
                    centre *= 1.15
                xs = [rng.gauss(centre, centre * 0.02) for _ in range(SAMPLES)]
                metrics.append(MetricRecord(name=f"m{k:02d}.ttft_p50_ms" if better == "lower" else
                                            f"m{k:02d}.output_throughput", unit="ms" if better == "lower" else "tok/s",
                                            better=better, n=SAMPLES, median=sorted(xs)[SAMPLES // 2], low=min(xs),
                                            high=max(xs), samples=xs))
            day = i
            out.append(RunRecord(run_key=f"{series[:2]}-{i}", series=series, kind="nightly",
                                 started_at=f"{2000 + day // 365:04d}-{(day % 365) // 31 + 1:02d}-"
                                            f"{(day % 365) % 28 + 1:02d}T{(day % 24):02d}:{i % 60:02d}:00Z",
                                 campaign=f"nightly-{s}-{i}", git_commit=f"{i:040x}", nodes=["n1"], metrics=metrics))
    return out


def _layout(name: str, series_count: int, tmp: Path) -> dict[str, float]:
    rng = random.Random(series_count)
    url = f"sqlite:///{tmp / f'{name}.sqlite'}"
    t0 = time.perf_counter()
    if series_count == 1 and (tmp / "A.sqlite").exists():
        # the same 10,000 runs as layout A, made one series (writing them again takes minutes)
        shutil.copy(tmp / "A.sqlite", tmp / f"{name}.sqlite")
        with HistoryDB(url) as db, db.engine.begin() as conn:
            conn.execute(sa.update(runs_table).values(series="b" * 64))
    with HistoryDB(url) as db:
        if series_count != 1 or not (tmp / "A.sqlite").exists():
            runs = _runs(series_count, rng)
            for start in range(0, len(runs), 1000):
                db.add_runs(runs[start:start + 1000])
        load_s = time.perf_counter() - t0
        n_runs, n_metrics = db.count()
        t0, c0 = time.perf_counter(), time.process_time()
        regressions = cps = 0
        for series in db.series_ids():
            a = analyze_series(db, series)
            regressions += sum(c.status.value == "regression" for c in a.latest.values())
            cps += sum(len(v) for v in a.change_points.values())
        detect_s, detect_cpu = time.perf_counter() - t0, time.process_time() - c0
        series = db.series_ids()[0]
        t0, c0 = time.perf_counter(), time.process_time()
        html = render_trend_html(db, series)
        trend_s, trend_cpu = time.perf_counter() - t0, time.process_time() - c0
    size = (tmp / f"{name}.sqlite").stat().st_size
    print(f"layout {name}: {series_count} series x {RUNS // series_count} runs; {n_runs} runs, "
          f"{n_metrics} metric rows, {size / 1e6:.0f} MB; prepared in {load_s:.1f} s")
    print(f"  change detection over all {series_count * METRICS} series of metrics: {detect_s:.2f} s "
          f"(CPU {detect_cpu:.2f} s) "
          f"(target <= {DETECT_TARGET_S:.0f} s{'' if detect_s <= DETECT_TARGET_S else ', MISSED'}); "
          f"{cps} change points confirmed, {regressions} latest-run regressions")
    print(f"  trend page of one series ({METRICS} charts, {len(html) / 1e6:.1f} MB): {trend_s:.2f} s "
          f"(CPU {trend_cpu:.2f} s) "
          f"(target <= {TREND_TARGET_S:.0f} s{'' if trend_s <= TREND_TARGET_S else ', MISSED'})")
    return {"detect": detect_s, "trend": trend_s}


def main() -> int:
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (wall times stretch with it; "
          "CPU times do not)")
    with tempfile.TemporaryDirectory(prefix="kvgate-bench-history-") as d:
        tmp = Path(d)
        a = _layout("A", 20, tmp)
        b = _layout("B", 1, tmp)
    print(f"ratio B/A change detection: {b['detect'] / a['detect']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

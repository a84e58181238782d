"""Summarising a 72-hour soak: 2 million request records in 72 one-hour windows (compressed JSONL
as the node agent writes them, with the node's summary line per window) -> the gate's path: every
window re-summarised from its records and checked against the node's line
(``harness.pipelines.g4.soakverify``, as ``kvgate gate G4`` does at the soak's end) -> G4's measured
results and checks.

Target (issue 12): <= 20 s and <= 1 GiB peak RSS on the 2-core test machine. The summary runs in
a child process so its peak RSS is its own (the generator's memory is not counted). Records are
made by the load client's own ``make_record`` (64 output tokens: 63 inter-token latencies each),
one window file generated and copied to every window (the summariser reads every one).

    .venv/bin/python bench/soak.py [--records 2000000] [--windows 72] [--workers 2] [--profile]

``--profile`` runs the summary in one process under cProfile and prints where the time goes
(the run is slower under the profiler: its time is not the figure to compare with the target).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

OUTPUT_TOKENS = 64
T0 = 1_800_000_000.0


def generate(d: Path, records: int, windows: int, window_s: float) -> None:
    from harness.load.client import RequestResult
    from harness.load.records import make_record
    from harness.load.spec import RequestSpec

    per = records // windows
    rng = random.Random(0)
    wdir = d / "windows"
    wdir.mkdir(parents=True)
    first = wdir / "w000001.jsonl.gz"
    with gzip.open(first, "wt", compresslevel=6) as fh:
        for i in range(per):
            ttft = rng.lognormvariate(4.4, 0.3)
            itl = [round(rng.lognormvariate(3.0, 0.2), 4) for _ in range(OUTPUT_TOKENS - 1)]
            ok = rng.random() > 0.0005
            res = RequestResult(f"doc-{i % 500}-q{i}", "ok" if ok else "error", i * 1000, i * 1000 + 10**9,
                                error_kind=None if ok else "http", error=None if ok else "HTTP 503",
                                http_status=200 if ok else 503, ttft_ms=ttft if ok else None,
                                e2el_ms=ttft + sum(itl), tpot_ms=sum(itl) / len(itl), itl_ms=itl if ok else [],
                                input_tokens=4096, output_tokens=OUTPUT_TOKENS if ok else 0,
                                counted_tokens=OUTPUT_TOKENS if ok else 0, chunks=OUTPUT_TOKENS, server_usage=True)
            spec = RequestSpec(res.request_id, "", 4096, OUTPUT_TOKENS, meta={"workload": "long-doc", "doc": i % 500})
            fh.write(json.dumps(make_record(res, spec, phase="soak", queue_ms=0.1, scheduled_ns=None),
                                separators=(",", ":")) + "\n")
    from harness.load.soakwindow import summarise_file

    # The node's summary line of each window, as the agent writes it when the window closes
    # (made once: every window holds a copy of the same records).
    one = summarise_file(1, first, T0, T0 + window_s)
    with open(d / "windows.jsonl", "w") as fh:
        for w in range(1, windows + 1):
            if w > 1:
                shutil.copyfile(first, wdir / f"w{w:06d}.jsonl.gz")
            fh.write(json.dumps({**one, "index": w, "started_unix": T0 + (w - 1) * window_s,
                                 "ended_unix": T0 + w * window_s, "counters": {}, "restarts_so_far": 0,
                                 "record_write_errors": 0, "file": f"windows/w{w:06d}.jsonl.gz"}) + "\n")


def profile_child(d: Path, window_s: float) -> None:
    import cProfile
    import io
    import pstats

    prof = cProfile.Profile()
    prof.enable()
    child(d, 1, window_s, quiet=True)
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(12)
    print(out.getvalue())


def child(d: Path, workers: int, window_s: float, quiet: bool = False) -> None:
    from harness.config.loader import load_gate
    from harness.gates.evaluate import evaluate_gate
    from harness.pipelines.g4.soakdata import soak_measured
    from harness.pipelines.g4.soakrun import read_local_jsonl
    from harness.pipelines.g4.soakverify import verify_windows

    t0 = time.perf_counter()
    check = verify_windows(d, read_local_jsonl(d / "windows.jsonl"), workers=workers)
    if check.verified != len(check.windows):
        raise SystemExit(f"the re-summarised windows disagree with the node's: {check.to_json()}")
    summaries = check.windows
    t1 = time.perf_counter()
    measured, _ = soak_measured(d, windows=summaries, duration_target_s=window_s * len(summaries),
                                window_s=window_s, fio_before={"value": 2e9}, fio_after={"value": 1.9e9})
    checks = evaluate_gate(load_gate(ROOT / "gates" / "G4.yaml"), measured)
    t2 = time.perf_counter()
    if quiet:
        return
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    self_kb, kids_kb = me.ru_maxrss, kids.ru_maxrss
    cpu_s = me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
    print(json.dumps({"records": sum(s["requests"] for s in summaries), "windows": len(summaries),
                      "summarise_s": t1 - t0, "checks_s": t2 - t1, "total_s": t2 - t0,
                      "peak_rss_mib": max(self_kb, kids_kb) / 1024, "rss_self_mib": self_kb / 1024,
                      "rss_worker_mib": kids_kb / 1024, "cpu_s": cpu_s,
                      "load_avg_1min": os.getloadavg()[0],
                      "verdicts": {c.id: c.verdict.value for c in checks}}))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=2_000_000)
    p.add_argument("--windows", type=int, default=72)
    p.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    p.add_argument("--profile", action="store_true", help="where the summary's time goes (cProfile, one process)")
    p.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--profile-child", type=Path, help=argparse.SUPPRESS)
    a = p.parse_args()
    window_s = 3600.0
    if a.child:
        child(a.child, a.workers, window_s)
        return 0
    if a.profile_child:
        profile_child(a.profile_child, window_s)
        return 0
    with tempfile.TemporaryDirectory(prefix="kvgate-bench-soak-") as tmp:
        d = Path(tmp)
        t0 = time.perf_counter()
        generate(d, a.records, a.windows, window_s)
        size = sum(f.stat().st_size for f in (d / "windows").iterdir())
        print(f"generated {a.records:,} records in {a.windows} windows ({size / 2**20:.0f} MiB compressed) "
              f"in {time.perf_counter() - t0:.1f} s")
        out = subprocess.run([sys.executable, __file__, "--child", str(d), "--workers", str(a.workers)],  # noqa: S603
                             capture_output=True, text=True, check=False)
        if out.returncode != 0:
            print(out.stderr, file=sys.stderr)
            return 1
        r = json.loads(out.stdout)
        if a.profile:
            prof = subprocess.run([sys.executable, __file__, "--profile-child", str(d)],  # noqa: S603
                                  capture_output=True, text=True, check=False)
            print(prof.stdout or prof.stderr)
    ok_time, ok_rss = r["total_s"] <= 20.0, r["peak_rss_mib"] <= 1024.0
    print(f"re-summarised {r['records']:,} records into {r['windows']} windows and checked them against the "
          f"node's summaries with {a.workers} worker(s): "
          f"{r['summarise_s']:.1f} s; measured results and checks {r['checks_s']:.2f} s; total {r['total_s']:.1f} s "
          f"(target <= 20 s: {'met' if ok_time else 'MISSED'})")
    print(f"CPU time {r['cpu_s']:.1f} s over all processes; load average {r['load_avg_1min']:.1f} on "
          f"{os.cpu_count()} CPUs (other work on the machine stretches the wall time, not the CPU time)")
    print(f"peak RSS {r['peak_rss_mib']:.0f} MiB (controller {r['rss_self_mib']:.0f} MiB, largest worker "
          f"{r['rss_worker_mib']:.0f} MiB; target <= 1024 MiB: {'met' if ok_rss else 'MISSED'})")
    return 0 if ok_time and ok_rss else 1


if __name__ == "__main__":
    sys.exit(main())

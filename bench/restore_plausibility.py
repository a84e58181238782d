"""Benchmark: can the engine's own retrieval timing tell a restore served from memory at 1.5x its
storage from an honest one (issue 52 item 5)? Prints the figures a margin would be justified from.

Per run, on one tier directory: the emulator's KVStore stores ``--docs`` documents (8 chunks of
512 KiB each: a 4 MiB retrieval, as tests/pipelines/test_restoreprobe.py's), then

* **honest**: restores each document from the disk tier, one at a time after ``RETRIEVAL_GAP_S`` of
  idle, timed by the emulator as LMCache does (``lmcache:time_to_retrieve``): the engine-timed
  bandwidth is the bytes retrieved over those seconds;
* **probe**: the tier's own chunk files read in retrievals of the same size, same gap, 8 threads,
  O_DIRECT, each timed at ns resolution (``restoreprobe.timed_retrievals``' reader,
  ``harness.pipelines.shared.timedreads``): the storage's per-retrieval distribution;
* **fault**: the same restores by an emulator serving them from memory while reporting disk hits
  (``KVGATE_SIM_MEMORY_RESTORE_BPS``) at 1.5x the median of a probe taken just before them (the
  storage's figure at that time; it also warms what caches the storage has, in both modes).

It prints, per run, the engine-timed bandwidth over a second probe's (taken after the restores, as
the gate's is) per-retrieval bandwidth at its
p25/p50/p75/p90 and over its mean-time figure; at the end, for each, the highest honest ratio and
the lowest fault ratio: a statistic separates them only where the first is below the second.
Run it in the cgroup whose conditions you want (e.g. one capped by blk-throttle, as the demo's);
it prints the blkio limits it runs under.

Usage: python bench/restore_plausibility.py [--dir DIR] [--runs N] [--docs N] [--samples N]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.pipelines.shared.restoreprobe import (  # noqa: E402
    RETRIEVAL_GAP_S,
    WORKERS,
    retrieval_groups,
    timed_retrievals,
)
from harness.remote.local import LocalExecutor  # noqa: E402
from harness.sim.kvstore import KVStore, StoreSettings, chunk_hashes  # noqa: E402
from harness.sim.lmcache_config import LMCacheConfig  # noqa: E402
from harness.sim.metrics import SimMetrics  # noqa: E402

CHUNK = 256
BYTES_PER_TOKEN = 2048  # 512 KiB chunks
CHUNKS = 8  # per retrieval: 4 MiB
STATS = ("p25", "p50", "p75", "p90", "mean")
FAULT = 1.5  # the fault's rate over the run's first probe's median


def _store(tier: Path, memory_restore_bps: float) -> KVStore:
    cfg = LMCacheConfig(chunk_size=CHUNK, local_disk=str(tier), max_local_disk_size=4.0)
    return KVStore(StoreSettings(model="bench", prefill_tokens_per_s=1e9, hbm_tokens=0,
                                 kv_bytes_per_token=BYTES_PER_TOKEN, kv_scale=1.0, prefix_caching=False,
                                 connector=True, lmcache=cfg, memory_restore_bps=memory_restore_bps),
                   SimMetrics("bench"))


def _engine_bps(store: KVStore, docs: list[list[int]]) -> float:
    """Restore each document after the probe's idle gap; bytes over the engine's own seconds."""
    nbytes = seconds = 0.0
    for doc in docs:
        time.sleep(RETRIEVAL_GAP_S)
        res = asyncio.run(store.prefill(doc))
        assert res.tiers == {"local_disk": CHUNKS}, res.tiers
        nbytes += CHUNKS * store.s.chunk_bytes
        seconds += res.read_seconds
    return nbytes / seconds


def _probe(tier: Path, samples: int) -> list[float]:
    """Per-retrieval bandwidths (B/s) of the tier's files, read by restoreprobe.timed_retrievals on
    this node (what it uses of an engine instance: the executor, its python, the tier)."""
    files = sorted((p.stat().st_size, str(p)) for p in tier.rglob("*") if p.is_file())
    groups = retrieval_groups(files, CHUNKS * files[0][0], samples)
    with LocalExecutor("local") as ex:
        node = SimpleNamespace(plan=SimpleNamespace(python=sys.executable, kv_dirs=(str(tier),)), executor=ex)
        got, why = timed_retrievals(node, groups)  # type: ignore[arg-type]
    if not got:
        raise SystemExit(f"restore_plausibility: {why}")
    return [b / (ns / 1e9) for b, ns in got]


def _figures(bws: list[float]) -> dict[str, float]:
    q = statistics.quantiles(bws, n=20, method="inclusive")
    mean_time = len(bws) / sum(1 / b for b in bws)  # equal bytes: the mean time's bandwidth
    return {"p25": q[4], "p50": q[9], "p75": q[14], "p90": q[17], "mean": mean_time}


def one_run(base: Path, ndocs: int, samples: int, fault: float) -> tuple[float, dict[str, float], float, float]:
    """Store, probe (the reference, which also warms what caches the storage has for both arms),
    restore (honest, or at ``fault`` x the reference's median), probe again (what the check would
    compare with): the engine-timed bandwidth, the second probe's figures, the fault's rate, the
    first probe's median."""
    tier = Path(tempfile.mkdtemp(prefix="restore-bench-", dir=base))
    try:
        docs = [[hash((d, i)) & 0xFFFFFFFF for i in range(CHUNK * CHUNKS + 1)] for d in range(ndocs)]
        store = _store(tier, 0.0)
        try:
            for doc in docs:
                store.store_now(chunk_hashes("bench", doc, CHUNK))
            before = _figures(_probe(tier, samples))["p50"]
            rate = fault * before
            store.s.memory_restore_bps = rate
            engine = _engine_bps(store, docs)
        finally:
            store.close()
        return engine, _figures(_probe(tier, samples)), rate, before
    finally:
        shutil.rmtree(tier, ignore_errors=True)


def _limits() -> str:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        parts = line.split(":", 2)
        if "blkio" in parts[1].split(","):
            f = Path("/sys/fs/cgroup/blkio") / parts[2].lstrip("/") / "blkio.throttle.read_bps_device"
            return f"blkio cgroup {parts[2]}: read_bps {f.read_text().strip() if f.exists() else '-'}"
    return "no blkio cgroup"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()), help="where the tier directory goes")
    ap.add_argument("--runs", type=int, default=5, help="honest runs, then as many fault runs")
    ap.add_argument("--docs", type=int, default=20, help="restores timed by the engine per run")
    ap.add_argument("--samples", type=int, default=40, help="timed probe retrievals per run")
    args = ap.parse_args()
    print(f"{_limits()}; retrieval {CHUNKS} x 512 KiB, gap {RETRIEVAL_GAP_S} s, {WORKERS} readers", flush=True)
    ratios: dict[str, dict[str, list[float]]] = {"honest": {s: [] for s in STATS}, "fault": {s: [] for s in STATS}}
    for mode, fault in (("honest", 0.0), ("fault", FAULT)):
        for k in range(args.runs):
            engine, fig, rate, before = one_run(args.dir, args.docs, args.samples, fault)
            for s in STATS:
                ratios[mode][s].append(engine / fig[s])
            print(f"{mode} {k + 1}: engine {engine / 1e9:.3f} GB/s" + (f" (set {rate / 1e9:.3f})" if rate else "")
                  + "; probe " + " ".join(f"{s} {fig[s] / 1e9:.3f}" for s in STATS)
                  + "; engine/probe " + " ".join(f"{s} {engine / fig[s]:.2f}" for s in STATS)
                  + f"; probe median after/before {fig['p50'] / before:.2f}", flush=True)
    print("statistic: highest honest ratio / lowest fault ratio (separates only when the first is lower)")
    for s in STATS:
        hi, lo = max(ratios["honest"][s]), min(ratios["fault"][s])
        print(f"  {s}: {hi:.2f} / {lo:.2f}{'  separates' if hi < lo else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

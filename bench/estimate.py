"""The estimator against the KV emulator: predicted vs measured TTFT p50.

The emulator's compute is known (prefill and decode rates per request, a bounded batch, 4 reader
threads) and its storage is real, so the estimator's prediction can be checked point by point:
3 context lengths x the tiers (LMCache's disk-tier code on tmpfs, the CPU tier; and, reported
apart, the disk tier on this machine's disk) x 2 concurrencies (below and above the batch). Each
point: a populate run (every document once), a pause for the write-behind, then a measured run
with the engine's prefix cache off (every context comes back from the tier).

Every input of a point's prediction is probed just before AND just after the point, and the two
averaged, so a machine whose speed drifts (a shared disk, other engineers' tests on the CPUs) moves
the prediction with the measurement; the spread between the two probes is printed beside the error
so a reader can tell model error from noise. The probes, never the point itself:
* the tier: the emulator's own restore path (``KVStore``'s reader threads, chunk I/O pool, direct
  reads and CRC, or the CPU tier's wait) on chunks of the point's size, one request alone and 4 in
  flight in steady state (``RestoreProbe``); fio figures are printed for the disk tier for comparison;
* the per-request overhead and TPOT: 1-token requests at the point's concurrency up to the batch;
* the front end: the emulator's own parse/tokenize (before the slot) and chunk hashing and
  first-token work (inside it), timed in-process.

Prints each point with its error, the probes' spread and the load average, and the count within
the 20% target; exit 0 either way (a benchmark reports, it does not gate). With
``KVGATE_BENCH_POINTS=FILE`` it also writes every point's probes (before and after) and
measurement as JSON lines, so a change to the model can be judged on the same points without
running them again. Run: ``make bench-estimate``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import asdict, dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from harness.estimate import (  # noqa: E402
    Compute,
    Engine,
    ModelGeometry,
    PointPrediction,
    Tier,
    Workload,
    predict_point,
)
from harness.ports import free_port  # noqa: E402
from harness.sim.kvstore import CPU_COPY_BYTES_PER_S, KVStore, StoreSettings  # noqa: E402
from harness.sim.lmcache_config import LMCacheConfig  # noqa: E402
from harness.sim.metrics import SimMetrics  # noqa: E402

KVGATE = [sys.executable, "-m", "harness.cli.main"]
# 2 x 8 layers x 4 KV heads x 128 x 2 B = 16,384 B per token: a 4 MiB chunk of 256 tokens
GEOM = ModelGeometry("bench-16k", layers=8, kv_heads=4, head_dim=128, kv_dtype_bytes=2,
                     num_attention_heads=8, active_params=1e6)
CHUNK = 256
PREFILL_TPS = 20000.0
DECODE_TPS = 400.0
MAX_BATCH = 4
OUTPUT_LEN = 16
QUERY_LEN = 16  # the long-doc question after the document
CONTEXTS = (2048, 4096, 8192)
CONCURRENCY = (2, 8)
DOCS = 8
# measured requests per point: a closed loop starts with every client sending at once, and at
# concurrency 8 over a batch of 4 its first two rounds see no steady queue; 96 requests keep that
# ramp (and the drain at the end) from deciding the p50 the model predicts for the steady state
QUERIES = 96
SIM_READERS = 4
# Steps of a request's path in its batch slot that wait for the emulator's one event loop, counted
# in harness/sim (server._generate, kvstore.prefill, server._emit): before the first token, the
# slot grant (a semaphore wake-up), the restore's hand-back from its reader thread, the end of the
# emulated prefill (a timer); after it, the last token's timer (earlier late tokens are made up by
# the schedule, t0 + k / rate).
LOOP_WAITS_FIRST = 3
# The host's cores as the model's shared CPU: the machine's count. The cores a CPU-bound job gets
# at the moment (``cores_available``) are printed, not used: under the scheduler a process's share
# follows its number of runnable threads (the emulator's 8 I/O threads get more than a 2-thread
# probe), and that figure swung 0.5-1.9 within a minute while the points did not follow it.
HOST_CORES = float(os.cpu_count() or 1)
LOOP_WAITS_LAST = 1
TARGET = 0.20


def fio_read_bw(directory: Path, jobs: int, size_mb: int = 512) -> float:
    """Sequential direct read bandwidth (B/s), chunk-sized blocks, queue depth 1, ``jobs`` jobs."""
    out = subprocess.run(  # noqa: S603
        ["fio", "--name=est", f"--directory={directory}", "--rw=read", f"--bs={CHUNK * GEOM.bytes_per_token}",
         "--direct=1", "--iodepth=1", f"--numjobs={jobs}", f"--size={size_mb}M", "--runtime=4", "--time_based",
         "--group_reporting", "--ioengine=psync", "--output-format=json"],
        check=True, capture_output=True, text=True, timeout=120).stdout
    data = json.loads(out[out.index("{"):])
    return float(data["jobs"][0]["read"]["bw_bytes"])


def _cpu_seconds() -> float:
    """CPU time (user + system) of this process, every thread."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _children_cpu_seconds() -> float:
    """CPU time (user + system) of this process's finished children (the load client runs)."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _proc_cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of process ``pid`` so far, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cores_available(seconds: float = 0.3) -> float:
    """How many of this machine's cores a CPU-bound job gets now: one thread per core computing
    CRCs (zlib releases the GIL) for ``seconds``, CPU time over wall time. Other engineers' tests
    share this machine; what they leave is what the emulator's reads, event loop and client share."""
    import threading
    import zlib

    buf = bytes(1 << 20)
    stop = time.perf_counter() + seconds

    def spin() -> None:
        while time.perf_counter() < stop:
            zlib.crc32(buf)

    threads = [threading.Thread(target=spin) for _ in range(os.cpu_count() or 1)]
    cpu0, t0 = _cpu_seconds(), time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return max(0.1, (_cpu_seconds() - cpu0) / (time.perf_counter() - t0))


class RestoreProbe:
    """The emulator's own restore path, run in this process beside a point: a ``KVStore``
    (``harness.sim.kvstore``) with the point's tier, holding ``SIM_READERS`` requests' worth of
    chunks (the point's chunk count each) stored by its write path. A round restores ``requests``
    of them at once from an event loop, as the emulator's requests do: the hand-off to its reader
    threads, its lookups, its chunk I/O pool (page-aligned buffers kept per thread, as in a running
    emulator: the first round warms them), direct reads, the CRC of what was read, the hand-back to
    the loop; for the CPU tier, its one wait per request. So the probe sees what the emulator's
    restore costs on this machine now, never the point it is compared with."""

    def __init__(self, directory: Path | None, chunks: int) -> None:
        cfg = LMCacheConfig(chunk_size=CHUNK, local_cpu=directory is None, max_local_cpu_size=4.0,
                            local_disk=None if directory is None else str(directory), max_local_disk_size=4.0,
                            use_odirect=True)
        self.store = KVStore(StoreSettings(model="bench/probe", prefill_tokens_per_s=PREFILL_TPS, hbm_tokens=0,
                                           kv_bytes_per_token=GEOM.bytes_per_token, kv_scale=1.0,
                                           prefix_caching=False, connector=True, lmcache=cfg),
                             SimMetrics("bench/probe"))
        self.requests = [[hashlib.sha256(f"{r}:{i}".encode()).digest() for i in range(chunks)]
                         for r in range(SIM_READERS)]
        self.store.store_now([d for req in self.requests for d in req])
        self.nbytes = chunks * self.store.s.chunk_bytes  # one request's KV
        self.loop = asyncio.new_event_loop()
        self.round(SIM_READERS)

    def round(self, requests: int) -> float:
        """Seconds to restore ``requests`` requests' chunks at once."""
        store = self.store

        async def go() -> float:
            loop = asyncio.get_running_loop()
            start = time.perf_counter()
            done = await asyncio.gather(*(loop.run_in_executor(store._readers, store._load_external, req, [])
                                          for req in self.requests[:requests]))
            elapsed = time.perf_counter() - start
            if any(len(served) != len(self.requests[0]) for served, _ in done):
                raise RuntimeError("the restore probe did not find every chunk it stored")
            return elapsed

        return self.loop.run_until_complete(go())

    def stream(self, total: int, inflight: int) -> float:
        """Seconds to restore ``total`` requests with ``inflight`` of them in flight at every moment
        (a new one starts as one ends), as the emulator's slots keep restoring in steady state; a
        round of ``inflight`` started together would end with a tail of idle I/O threads."""
        store = self.store

        async def go() -> float:
            loop = asyncio.get_running_loop()
            gate = asyncio.Semaphore(inflight)

            async def one(k: int) -> None:
                async with gate:
                    served, _ = await loop.run_in_executor(store._readers, store._load_external,
                                                           self.requests[k % len(self.requests)], [])
                if len(served) != len(self.requests[0]):
                    raise RuntimeError("the restore probe did not find every chunk it stored")

            start = time.perf_counter()
            await asyncio.gather(*(one(k) for k in range(total)))
            return time.perf_counter() - start

        return self.loop.run_until_complete(go())

    def bandwidths(self, min_rounds: int = 5, min_s: float = 0.4) -> tuple[float, float, float]:
        """(one request alone, ``SIM_READERS`` requests at once) in B/s, and the CPU seconds one
        request's restore costs (this process's CPU time while restoring 4 at once, per request:
        copies, CRCs, system calls of the read path). One alone: the median of at least
        ``min_rounds`` rounds, and of as many as ``min_s`` seconds take (a 2,048-token round is
        tens of ms, and a busy shared machine swings one by 2x). Four at once: steady state, 4 x
        ``min_rounds`` requests kept 4 in flight, repeated until ``min_s`` have passed."""
        times: list[float] = []
        while len(times) < min_rounds or sum(times) < min_s:
            times.append(self.round(1))
        one = sorted(times)[len(times) // 2]
        cpu0, elapsed, restores = _cpu_seconds(), 0.0, 0
        while elapsed < min_s or restores < SIM_READERS * min_rounds:
            elapsed += self.stream(SIM_READERS * min_rounds, SIM_READERS)
            restores += SIM_READERS * min_rounds
        cpu = _cpu_seconds() - cpu0
        return self.nbytes / one, restores * self.nbytes / elapsed, cpu / restores

    def close(self) -> None:
        self.store.close()
        self.loop.close()


def frontend_seconds(ctx: int, reps: int = 21) -> tuple[float, float, float]:
    """The emulator's per-request work on its event loop for a prompt of ``ctx`` words, with the
    functions it runs (median of ``reps``): (parse the JSON body and tokenize, before the request
    takes a batch slot; after it took one and before its first token: hash the prompt's chunks for
    the prefix lookup, and derive its greedy output from the prompt, the emulator's stand-in for
    sampling the first token); and the load client's work for that prompt (build its words, as
    its lazy long prompts are built when sent, and encode the JSON body)."""
    import random

    from harness.load.workloads import words
    from harness.sim.kvstore import chunk_hashes, output_tokens, tokenize

    prompt = words(random.Random(ctx), ctx + QUERY_LEN)
    body = json.dumps({"model": "bench/model", "prompt": prompt, "max_tokens": OUTPUT_LEN, "stream": True})
    front, slot, client = [], [], []
    for i in range(reps):
        start = time.perf_counter()
        json.dumps({"model": "bench/model", "prompt": words(random.Random(i), ctx + QUERY_LEN),
                    "max_tokens": OUTPUT_LEN, "stream": True})
        client.append(time.perf_counter() - start)
        start = time.perf_counter()
        ids = tokenize(json.loads(body)["prompt"])
        mid = time.perf_counter()
        chunk_hashes("bench/model", ids, CHUNK)
        output_tokens(ids, [], OUTPUT_LEN)
        front.append(mid - start)
        slot.append(time.perf_counter() - mid)
    return sorted(front)[reps // 2], sorted(slot)[reps // 2], sorted(client)[reps // 2]


def wait_ready(port: int, proc: subprocess.Popen[bytes]) -> None:
    for _ in range(200):
        if proc.poll() is not None:
            raise RuntimeError(f"emulator exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("emulator did not become ready")


def start_sim(work: Path, tier: str, kv_dir: Path | None) -> tuple[subprocess.Popen[bytes], int]:
    """The emulator with LMCache's disk tier in ``kv_dir`` (direct I/O where the filesystem allows
    it), or with the CPU tier only when ``kv_dir`` is None; the engine's prefix cache is off, so
    every request's context comes back from the tier."""
    port = free_port()
    cfg = work / f"lmcache-{tier}.yaml"
    if kv_dir is not None:
        cfg.write_text(f"chunk_size: {CHUNK}\nlocal_cpu: false\nlocal_disk: file://{kv_dir}/\n"
                       "max_local_disk_size: 4\nextra_config:\n  use_odirect: true\n")
    else:
        cfg.write_text(f"chunk_size: {CHUNK}\nlocal_cpu: true\nmax_local_cpu_size: 4\n")
    env = dict(os.environ, LMCACHE_CONFIG_FILE=str(cfg))
    proc = subprocess.Popen(  # noqa: S603
        KVGATE + ["sim", "serve", "bench/model", "--port", str(port), "--no-enable-prefix-caching",
                  "--kv-transfer-config", '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}',
                  "--prefill-tokens-per-s", str(PREFILL_TPS), "--decode-tokens-per-s", str(DECODE_TPS),
                  "--max-batch", str(MAX_BATCH), "--kv-bytes-per-token", str(GEOM.bytes_per_token),
                  "--log-level", "WARNING"],
        cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=open(work / f"sim-{tier}.log", "ab"))
    try:
        wait_ready(port, proc)
    except RuntimeError as exc:
        raise RuntimeError(f"{exc}: {(work / f'sim-{tier}.log').read_text()[-2000:]}") from None
    return proc, port


def load(port: int, out: Path, ctx: int, conc: int, *, populate: bool) -> dict[str, float]:
    args = KVGATE + ["load", "run", "--endpoint", f"http://127.0.0.1:{port}", "--model", "bench/model",
                     "--workload", "long-doc", "--num-docs", str(DOCS), "--doc-len", str(ctx),
                     "--query-len", str(QUERY_LEN), "--num-queries", str(DOCS if populate else QUERIES),
                     "--hit-ratio", "1", "--output-len", str(OUTPUT_LEN), "--concurrency", str(conc),
                     "--seed", str(ctx * 100 + conc), "--out", str(out), "-q"]
    if not populate:
        args.append("--no-warmup")
    subprocess.run(args, cwd=ROOT, check=True, timeout=600, stdout=subprocess.DEVNULL)  # noqa: S603
    return dict(json.loads((out / "summary.json").read_text()))


def fixed_probe(proc: subprocess.Popen[bytes], port: int, out: Path,
                conc: int) -> tuple[float, float, float, float]:
    """1-token prompts (no KV to restore, 0.05 ms of emulated prefill) at ``conc`` clients: their
    TTFT p50 is the per-request overhead of HTTP, the event loop and the client while ``conc``
    requests are in flight, their TPOT the real per-token decode time with as many streams
    decoding (one event loop writes them all: more streams, later wake-ups). Probe at the point's
    concurrency up to the batch (beyond it the extra requests wait in the queue, which the model
    predicts). Also the emulator's CPU seconds per such request (HTTP, its loop, the decode's
    writes), from /proc, and the load client's (its stream reading, records and bookkeeping: the
    client's own CPU over its measured window, ``kvgate.client_cpu_s`` of its summary, so its
    start-up is left out). None of it comes from the points the prediction is compared with."""
    cpu0 = _proc_cpu_seconds(proc.pid)
    s = load_random(port, out, min(conc, MAX_BATCH))
    done = int(s["completed"])
    cpu = (_proc_cpu_seconds(proc.pid) - cpu0) / done
    client = float(s["kvgate"]["client_cpu_s"]) / done  # type: ignore[index]
    return float(s["median_ttft_ms"]) / 1000 - 1 / PREFILL_TPS, float(s["median_tpot_ms"]) / 1000, cpu, client


def load_random(port: int, out: Path, conc: int) -> dict[str, float]:
    shutil.rmtree(out, ignore_errors=True)
    args = KVGATE + ["load", "run", "--endpoint", f"http://127.0.0.1:{port}", "--model", "bench/model",
                     "--workload", "random", "--input-len", "1", "--num-requests", str(16 * conc),
                     "--output-len", str(OUTPUT_LEN), "--concurrency", str(conc), "--out", str(out), "-q"]
    subprocess.run(args, cwd=ROOT, check=True, timeout=300, stdout=subprocess.DEVNULL)  # noqa: S603
    return dict(json.loads((out / "summary.json").read_text()))


@dataclass
class Calibration:
    """Everything a point's prediction uses, probed beside it (before, or after)."""

    one_bw: float  # B/s, one request restoring alone
    agg_bw: float  # B/s, SIM_READERS requests restoring at once
    fixed_s: float
    tpot_s: float
    front_s: float
    slot_s: float
    restore_cpu_s: float  # CPU seconds of one request's restore
    emulator_cpu_s: float  # CPU seconds of the emulator per 1-token request
    client_s: float  # the load client's build and encode of one prompt
    cores: float  # cores a CPU-bound job gets now
    client_stream_s: float = 0.0  # the load client's CPU seconds per request besides the prompt's build

    @property
    def host_cpu_s(self) -> float:
        """CPU seconds one request of the point costs this machine's shared cores: its restore's
        read path, the emulator's per-request work and its front-end work for this prompt, and the
        load client's: its build of the prompt and its work per request (reading the stream,
        records, bookkeeping)."""
        return (self.restore_cpu_s + self.emulator_cpu_s + self.front_s + self.slot_s + self.client_s
                + self.client_stream_s)


def calibrate(proc: subprocess.Popen[bytes], port: int, out: Path, probe: RestoreProbe, ctx: int,
              conc: int) -> Calibration:
    one, agg, restore_cpu = probe.bandwidths()
    fixed, tpot, emu_cpu, client_stream = fixed_probe(proc, port, out, conc)
    front, slot, client = frontend_seconds(ctx)
    return Calibration(one, agg, fixed, tpot, front, slot, restore_cpu, emu_cpu, client, cores_available(),
                       client_stream)


def mean_of(a: Calibration, b: Calibration) -> Calibration:
    """The probes before and after a point, averaged: bandwidths as the harmonic mean (the mean of
    the restore times they imply), the rest as the arithmetic mean."""
    def hm(x: float, y: float) -> float:
        return 2 / (1 / x + 1 / y)

    def am(x: float, y: float) -> float:
        return (x + y) / 2

    return Calibration(hm(a.one_bw, b.one_bw), hm(a.agg_bw, b.agg_bw), am(a.fixed_s, b.fixed_s),
                       am(a.tpot_s, b.tpot_s), am(a.front_s, b.front_s), am(a.slot_s, b.slot_s),
                       am(a.restore_cpu_s, b.restore_cpu_s), am(a.emulator_cpu_s, b.emulator_cpu_s),
                       am(a.client_s, b.client_s), am(a.cores, b.cores), am(a.client_stream_s, b.client_stream_s))


def predict(cal: Calibration, tier_name: str, shape: Workload, conc: int) -> PointPrediction:
    """The estimator's prediction of one point from its probes (``harness.estimate.predict_point``)."""
    engine = Engine(Compute(tokens_per_s=PREFILL_TPS, shared=False), MAX_BATCH, 1 / cal.tpot_s,
                    fixed_s=cal.fixed_s, frontend_s=cal.front_s, slot_s=cal.slot_s,
                    host_cpu_s=cal.host_cpu_s, host_cores=HOST_CORES, loop_other_s=cal.emulator_cpu_s,
                    loop_waits_first=LOOP_WAITS_FIRST, loop_waits_last=LOOP_WAITS_LAST)
    tier = Tier(tier_name, read_bw=cal.agg_bw, stream_bw=cal.one_bw, read_streams=SIM_READERS)
    return predict_point(GEOM, engine, shape, tier, conc)


def spread(a: float, b: float) -> float:
    """How far the probes before and after a point differ, relative to their mean."""
    return abs(a - b) / ((a + b) / 2)


def main() -> int:
    # a stopped bench still stops its emulator and removes its directories (the finally below)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    disk_base = Path(os.environ.get("KVGATE_BENCH_DIR", "/var/tmp"))
    shm_base = Path(os.environ.get("KVGATE_BENCH_SHM", "/dev/shm"))
    work = Path(tempfile.mkdtemp(prefix="kvgate-bench-estimate-", dir=disk_base))
    shm = Path(tempfile.mkdtemp(prefix="kvgate-bench-estimate-", dir=shm_base))
    points_file = os.environ.get("KVGATE_BENCH_POINTS")
    # (name, directory of the LMCache disk tier or None for the CPU tier, in the headline figure)
    tiers: list[tuple[str, Path | None, bool]] = [("file", shm, True), ("cpu", None, True), ("disk", work, False)]
    only = os.environ.get("KVGATE_BENCH_TIERS")  # e.g. "file,cpu": a shorter run of those tiers
    if only:
        wanted = {t.strip() for t in only.split(",")}
        if not wanted <= {name for name, _, _ in tiers}:
            raise SystemExit(f"KVGATE_BENCH_TIERS={only!r}: expected a comma-separated subset of file, cpu, disk")
        tiers = [t for t in tiers if t[0] in wanted]
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)")
    try:
        fio_dir = work / "fio"
        fio_dir.mkdir()
        fio_one = fio_read_bw(fio_dir, 1)
        fio_all = fio_read_bw(fio_dir, SIM_READERS, size_mb=256)
        shutil.rmtree(fio_dir)
        print("tiers: 'file' = LMCache's disk-tier code on a tmpfs directory (real file reads at memory speed); "
              f"'cpu' = the CPU tier ({CPU_COPY_BYTES_PER_S / 1e9:.0f} GB/s per stream nominal, "
              "one wait per request for its CPU-tier chunks); "
              f"'disk' = the disk tier on {disk_base} (this VM's shared disk, direct I/O)")
        print(f"disk: fio {CHUNK * GEOM.bytes_per_token >> 20} MiB direct reads, one stream {fio_one / 1e9:.2f} GB/s, "
              f"{SIM_READERS} streams {fio_all / 1e9:.2f} GB/s")
        print(f"emulator: prefill {PREFILL_TPS:,.0f} tok/s, decode {DECODE_TPS:,.0f} tok/s per request, batch "
              f"{MAX_BATCH}, {SIM_READERS} reader threads; {GEOM.bytes_per_token:,} B/token; {QUERIES} measured "
              f"requests per point, output {OUTPUT_LEN} tokens")
        print("each prediction uses probes taken just before AND just after its point, averaged: the emulator's "
              "own restore path in this process ('tier GB/s': one request alone / 4 at once; 'spread': how far "
              "the before and after probes differ), 1-token requests at the point's concurrency up to the batch "
              "('fixed' per-request overhead, 'tpot'), and the emulator's front-end work for that prompt "
              "('front+slot': parse and tokenize / chunk hashing, timed in-process), the CPU seconds one request "
              "costs the machine's shared cores and how many cores a CPU-bound job got at that moment "
              f"('host ms/cores'; the prediction uses the machine's {HOST_CORES:.0f}: "
              "the restore's read path, the emulator's and the client's work); 'fio pred.' uses fio "
              "instead of the restore probe; 'random/waves': the two limits the prediction lies between beyond "
              "the batch (requests at random phases, by mean value analysis; requests entering their slots in "
              "waves), within it the prediction is the first; 'from b../a..': the prediction from the probes "
              "before only and "
              "after only (what the machine's drift alone does to it)\n")
        print(f"{'tier':5} {'context':>7} {'conc':>4} {'tier GB/s 1/4':>13} {'spread 1/4':>11} {'fixed':>5} "
              f"{'tpot':>4} {'front+slot':>10} {'host ms/cores':>13} {'predicted':>9} {'random/waves':>12} "
              f"{'from b../a..':>11} {'measured':>8} {'error':>7} "
              f"{'fio pred.':>9} {'error':>7}  bottleneck     load")
        errors: dict[str, list[float]] = {}
        spreads: dict[str, list[float]] = {}
        fio_errors: list[float] = []
        for tier_name, directory, _ in tiers:
            kv_dir = probe_dir = None
            if directory is not None:
                kv_dir, probe_dir = directory / f"kv-{tier_name}", directory / f"probe-{tier_name}"
                kv_dir.mkdir()
            proc, port = start_sim(work, tier_name, kv_dir)
            try:
                for ctx, conc in ((ctx, conc) for ctx in CONTEXTS for conc in CONCURRENCY):
                    tag = f"{tier_name}-{ctx}-{conc}"
                    # documents of its own per point (the seed): written by this point's populate run
                    load(port, work / f"pop-{tag}", ctx, conc, populate=True)
                    time.sleep(1.0 + ctx * DOCS * GEOM.bytes_per_token / 1e9)  # write-behind drains
                    # the probe's chunks are written now, as the point's were just written: on a VM
                    # a direct read of data written seconds ago can still come from the host's cache
                    if probe_dir is not None:
                        probe_dir.mkdir()
                    probe = RestoreProbe(probe_dir, ctx // CHUNK)
                    try:
                        before = calibrate(proc, port, work / f"fixed-{tag}-a", probe, ctx, conc)
                        emu0, kids0 = _proc_cpu_seconds(proc.pid), _children_cpu_seconds()
                        s = load(port, work / f"run-{tag}", ctx, conc, populate=False)
                        # what the point itself cost the host (never used by its prediction): the
                        # emulator's and the load client's CPU seconds per request
                        point_cpu = {"emulator_s": (_proc_cpu_seconds(proc.pid) - emu0) / QUERIES,
                                     "client_s": (_children_cpu_seconds() - kids0) / QUERIES}
                        after = calibrate(proc, port, work / f"fixed-{tag}-b", probe, ctx, conc)
                        cal = mean_of(before, after)
                        sp1, sp4 = spread(before.one_bw, after.one_bw), spread(before.agg_bw, after.agg_bw)
                        spreads.setdefault(tier_name, []).append(max(sp1, sp4))
                        shape = Workload(ctx + QUERY_LEN, OUTPUT_LEN, CHUNK)
                        pred = predict(cal, tier_name, shape, conc)
                        # the same model on the probes before only and after only: how far the
                        # machine's drift alone moves the prediction
                        pb, pa = (predict(c, tier_name, shape, conc).ttft_s * 1000 for c in (before, after))
                        measured = float(s["median_ttft_ms"])
                        if points_file:
                            with open(points_file, "a", encoding="utf-8") as fh:
                                fh.write(json.dumps({"tier": tier_name, "context": ctx, "concurrency": conc,
                                                     "before": asdict(before), "after": asdict(after),
                                                     "measured_ttft_p50_ms": measured,
                                                     "point_cpu": point_cpu}) + "\n")
                        err = pred.ttft_s * 1000 / measured - 1
                        errors.setdefault(tier_name, []).append(err)
                        fio_txt = f"{'-':>9} {'-':>7}"
                        if tier_name == "disk":
                            fio_cal = replace(cal, one_bw=fio_one, agg_bw=fio_all)
                            fp = predict(fio_cal, tier_name, shape, conc).ttft_s * 1000
                            fio_errors.append(fp / measured - 1)
                            fio_txt = f"{fp:9.1f} {fp / measured - 1:+7.1%}"
                        bw = f"{cal.one_bw / 1e9:.2f}/{cal.agg_bw / 1e9:.2f}"
                        limits = f"{(pred.ttft_random_s or 0) * 1000:.1f}/{(pred.ttft_waves_s or 0) * 1000:.1f}"
                        print(f"{tier_name:5} {ctx:7d} {conc:4d} {bw:>13} {f'{sp1:.0%}/{sp4:.0%}':>11} "
                              f"{cal.fixed_s * 1000:5.1f} {cal.tpot_s * 1000:4.2f} "
                              f"{f'{cal.front_s * 1000:.1f}+{cal.slot_s * 1000:.1f}':>10} "
                              f"{f'{cal.host_cpu_s * 1000:.1f}/{cal.cores:.1f}':>13} "
                              f"{pred.ttft_s * 1000:9.1f} {limits:>12} {f'{min(pb, pa):.0f}..{max(pb, pa):.0f}':>11} "
                              f"{measured:8.1f} {err:+7.1%} {fio_txt}  "
                              f"{pred.bottleneck:14} {os.getloadavg()[0]:.2f}", flush=True)
                    finally:
                        probe.close()
                        if probe_dir is not None:
                            shutil.rmtree(probe_dir, ignore_errors=True)
            finally:
                proc.terminate()
                proc.wait(timeout=30)
                if kv_dir is not None:
                    shutil.rmtree(kv_dir, ignore_errors=True)
        print()
        groups = [(f"{n} tier", [n]) for n, _, _ in tiers]
        # 'file' (tmpfs) reads are memory copies and CRCs on the cores the emulator's loop and the
        # client use: a CPU benchmark of this machine; cpu + disk are LMCache's two tiers as deployed
        groups += [("file + cpu tiers", [t for t, _, head in tiers if head]), ("cpu + disk tiers", ["cpu", "disk"]),
                   ("all tiers", [t for t, _, _ in tiers])]
        for label, names in groups:
            errs = [e for n in names for e in errors.get(n, [])]
            if errs and all(n in errors for n in names):  # a group with a tier not run is not printed
                within = sum(1 for e in errs if abs(e) <= TARGET)
                sps = [x for n in names for x in spreads.get(n, [])]
                print(f"{label}: {within} of {len(errs)} points within {TARGET:.0%}; worst error "
                      f"{max(map(abs, errs)):.1%}; mean |error| {sum(map(abs, errs)) / len(errs):.1%}; "
                      f"probe spread before/after up to {max(sps):.0%}")
        if fio_errors:
            print(f"disk points predicted from the fio figures instead: mean |error| "
                  f"{sum(map(abs, fio_errors)) / len(fio_errors):.1%}")
        print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(shm, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: the emulator's disk-tier restore path against fio's sequential read, side by side on
the same target. A 64 MiB disk-tier hit (16 chunks of 4 MiB) is read through the emulator's own
code (KVStore._load_external: parallel O_DIRECT chunk reads), after dropping the page cache, then
fio reads the same amount sequentially with O_DIRECT from a file in the same directory.
Target: the emulator reaches >= 70% of fio's bandwidth (kvgate issue 18). Prints the figures.

Usage: python bench/emulator.py [--dir DIR] [--rounds N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.sim import directio  # noqa: E402
from harness.sim.chunkcrc import with_crc  # noqa: E402
from harness.sim.kvstore import KVStore, StoreSettings, chunk_hashes  # noqa: E402
from harness.sim.lmcache_config import LMCacheConfig  # noqa: E402
from harness.sim.metrics import SimMetrics  # noqa: E402

CHUNK_TOKENS = 256
KV_BYTES_PER_TOKEN = 16384  # 4 MiB chunks
CHUNKS = 16  # 64 MiB per hit
TARGET = 0.70


def drop_caches() -> None:
    try:
        subprocess.run(["sh", "-c", "sync && echo 3 > /proc/sys/vm/drop_caches"], check=False, capture_output=True)
    except OSError:
        pass


def emulator_read(work: Path, *, sequential: bool = False, no_check: bool = False) -> float:
    """Seconds for one 64 MiB disk-tier hit through the emulator's restore path (``sequential``:
    one chunk after the other, as the emulator read before; ``no_check``: the same parallel reads
    without the CRC pass that detects corrupted chunks, to show what that pass costs)."""
    cfg = LMCacheConfig(chunk_size=CHUNK_TOKENS, local_disk=str(work / "kv"), max_local_disk_size=1.0)
    settings = StoreSettings(model="bench", prefill_tokens_per_s=1e9, hbm_tokens=0,
                             kv_bytes_per_token=KV_BYTES_PER_TOKEN, kv_scale=1.0, connector=True, lmcache=cfg)
    store = KVStore(settings, SimMetrics("bench"))
    try:
        digests = chunk_hashes("bench", list(range(CHUNKS * CHUNK_TOKENS)), CHUNK_TOKENS)
        tier = store.dirs[0]
        for d in digests:
            # as the emulator's write-behind stores them: the header records the payload's CRC
            tier.write(d, with_crc(directio.chunk_payload(d, settings.chunk_bytes)))
        drop_caches()
        if sequential:
            start = time.perf_counter()
            for d in digests:
                tier.read(d)
            return time.perf_counter() - start
        if no_check:
            start = time.perf_counter()
            list(store._chunk_io.map(tier.read, digests))  # noqa: SLF001 - the pool the restore path uses
            return time.perf_counter() - start
        served, seconds = store._load_external(digests, [])  # noqa: SLF001 - the code path under test
        assert served == ["local_disk"] * CHUNKS, served
        return seconds
    finally:
        store.close()
        shutil.rmtree(work / "kv", ignore_errors=True)


def fio_read(work: Path, size: int) -> float:
    """Seconds fio takes to read ``size`` bytes sequentially with O_DIRECT (bs 1 MiB, iodepth 16)."""
    path = work / "fio.dat"
    common = ["fio", "--name=seq", f"--filename={path}", f"--size={size}", "--bs=1M", "--direct=1",
              "--ioengine=libaio", "--output-format=json"]
    subprocess.run([*common, "--rw=write", "--iodepth=16"], check=True, capture_output=True)  # noqa: S603 - fixed argv
    drop_caches()
    out = subprocess.run([*common, "--rw=read", "--iodepth=16"], check=True, capture_output=True, text=True)  # noqa: S603 - fixed argv
    job = json.loads(out.stdout)["jobs"][0]["read"]
    path.unlink(missing_ok=True)
    return float(job["io_bytes"]) / float(job["bw_bytes"])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default=None, help="directory on the target (default: a temp dir in /var/tmp)")
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds of each (default 5)")
    args = ap.parse_args()
    if shutil.which("fio") is None:
        print("bench-emulator: fio is not installed (make system-deps)", file=sys.stderr)
        return 2
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="kvgate-bench-", dir="/var/tmp"))
    work = base / f"bench-emulator-{os.getpid()}"
    work.mkdir(parents=True)
    size = CHUNKS * CHUNK_TOKENS * KV_BYTES_PER_TOKEN
    emu, seq, nocheck, fio = [], [], [], []
    try:
        for _ in range(args.rounds):  # alternate, so all see the same device state
            emu.append(emulator_read(work))
            seq.append(emulator_read(work, sequential=True))
            nocheck.append(emulator_read(work, no_check=True))
            fio.append(fio_read(work, size))
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)
    emu_bw = size / sorted(emu)[len(emu) // 2] / 1e9
    fio_bw = size / sorted(fio)[len(fio) // 2] / 1e9
    seq_bw = size / sorted(seq)[len(seq) // 2] / 1e9
    nocheck_bw = size / sorted(nocheck)[len(nocheck) // 2] / 1e9
    ratio = emu_bw / fio_bw
    print(f"target: {base}  hit size: {size / 2**20:.0f} MiB  rounds: {args.rounds}")
    print(f"emulator restore (parallel O_DIRECT chunks): median {emu_bw:.2f} GB/s")
    print(f"emulator, one chunk at a time (before):     median {seq_bw:.2f} GB/s")
    print(f"emulator, parallel reads without the CRC pass: median {nocheck_bw:.2f} GB/s "
          f"({nocheck_bw / fio_bw:.0%} of fio: the CRC pass is the rest)")
    print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs "
          "(the CRC pass is CPU-bound: a loaded machine lowers the ratio)")
    print(f"fio sequential read (O_DIRECT, bs 1M, iodepth 16): median {fio_bw:.2f} GB/s")
    print(f"ratio: {ratio:.0%} (target >= {TARGET:.0%}) -> {'OK' if ratio >= TARGET else 'BELOW TARGET'}")
    return 0 if ratio >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: parse a 50 MB fio json+ document (many jobs with full clat histograms).

The document is generated from a real fio 3.33 json+ job entry captured in tests/data/fio/, so its
shape is fio's own; every job gets a full histogram of FIO_IO_U_PLAT_NR-like bins (about 1,800 per
direction, as fio 3.x writes when latencies spread). Target: under 1 s. Prints the figures.
"""

from __future__ import annotations

import copy
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.probes.fio_parse import parse_fio_output, summarise_groups  # noqa: E402

TARGET_BYTES = 50 * 10**6
TARGET_SECONDS = 1.0
SAMPLE = ROOT / "tests" / "data" / "fio" / "fio-3.33-jsonplus.json"


def _bins(rng: random.Random, n: int = 1800) -> dict[str, int]:
    # fio 3.x bins: key = latency of the bin in ns, value = count
    out: dict[str, int] = {}
    value = 1000
    for _ in range(n):
        value += rng.randint(1, value // 50 + 1)
        out[str(value)] = rng.randint(1, 5000)
    return out


def make_document(target: int = TARGET_BYTES) -> str:
    sample = json.loads(SAMPLE.read_text())
    template = next(j for j in sample["jobs"] if j["read"]["io_bytes"] > 0)
    rng = random.Random(1)
    doc = {k: v for k, v in sample.items() if k != "jobs"}
    jobs: list[dict[str, object]] = []
    doc["jobs"] = jobs
    one = copy.deepcopy(template)
    for ddir in ("read", "write"):
        one[ddir] = copy.deepcopy(template["read"])
        one[ddir]["clat_ns"]["bins"] = _bins(rng)
    def fill(count: int) -> None:
        jobs.clear()
        for i in range(count):
            job = copy.deepcopy(one)
            job["jobname"] = f"job{i}"
            job["groupid"] = i // 8
            jobs.append(job)

    fill(10)
    per_job = len(json.dumps(doc, indent=2)) / 10  # indentation inside the document counts
    fill(max(1, int(target / per_job)))
    return json.dumps(doc, indent=2)


def main() -> int:
    text = make_document()
    data = text.encode()
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        out = parse_fio_output(data, source="bench.json")
        groups = summarise_groups(out.final.jobs)
        best = min(best, time.perf_counter() - t0)
    mb = len(data) / 1e6
    print(f"fio json+ parse: {mb:.1f} MB, {len(out.final.jobs)} jobs, {len(groups)} groups "
          f"(percentiles merged from bins)")
    print(f"  best of 3: {best:.3f} s  ({mb / best:.0f} MB/s)  target < {TARGET_SECONDS:.1f} s: "
          f"{'met' if best < TARGET_SECONDS else 'MISSED'}")
    return 0 if best < TARGET_SECONDS else 1


if __name__ == "__main__":
    sys.exit(main())

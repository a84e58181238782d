"""Fixtures for the gate pipelines: small, fast inventories and profiles written to temp files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml


def small_profile(port: int, **changes: Any) -> dict[str, Any]:
    """A profile that runs G1-G3 in tens of seconds on this machine (the emulator, real fio).

    The emulated prefill (4000 tokens/s: 512 ms to recompute a 2048-token document) makes the
    storage benefit large compared with the noise between repetitions on a loaded two-core machine:
    the candidate's restore is real disk I/O and CPU, so its per-repetition throughput varies by tens
    of percent when other tests run, while the recompute arm's prefill is an emulated wait. At
    20000 tokens/s the 5-repetition intervals reached down to the thresholds under load; at 8000
    (263 ms against the candidate's 76 ms) a CI run beside a CPU hog gave G3's TTFT reduction the
    interval [17.86%, 94.08%]: the candidate's per-repetition p50s differed several-fold (log sd
    ~0.75), and the interval is built on that spread. Halving the speed moves its centre by log 2
    and leaves the candidate's spread as it was. A slower
    prefill costs wall time only (an emulated wait), not CPU; more requests per repetition cost CPU
    in every test that uses this profile, so there are 8: the output identity check's minimum sample
    (fewer, and it compared fewer than the issue's 8), which also lengthens each repetition's window."""
    prof: dict[str, Any] = {
        "name": "e2e",
        "model": {"name": "e2e/tiny", "preset": "tiny"},
        "engine": {"kind": "sim", "port": port, "ready_timeout": "30s",
                   "sim": {"prefill_tokens_per_s": 4000, "decode_tokens_per_s": 1000, "max_batch": 8,
                           "hbm_tokens": 2048}},
        "arms": [{"name": "baseline", "offload": False},
                 {"name": "candidate", "storage": "tier", "lmcache": {"max_local_disk_size": 1}}],
        "recompute": "baseline",
        "load": {"workload": "long-doc", "input_len": 2048, "output_len": 4, "concurrency": [2],
                 "prompts_per_point": 8, "warmup": 0, "repetitions": 5, "seed": 3},
        # seq-read only: the job set every gate's blocker reads; G1's fio_write is advisory (NOT_RUN
        # here, deciding nothing), and its write rounds cost 5-10 s per fio step of every test
        # up to 100 rounds of 1 s (the default limit is 25): G2 and G3 need a passed G1, and beside
        # `make test`'s other sessions this VM's read rate wanders between 0.6 and 3.5 GB/s over tens of
        # seconds; 25 rounds held no steady 5 s window in 3 of 14 CI runs (a test's G1 INCONCLUSIVE,
        # honestly). An operator raises the limit on a busy node alike; a quiet one stops after 5
        "probes": {"fio": {"job_sets": ["seq-read"], "size": "8 MiB", "runtime": "1s",
                           "ramp_time": "0s", "numjobs": 1, "iodepth": 4, "max_rounds": 100}},
        "overrides": [
            {"gate": "G3", "check": "read_bandwidth", "threshold": "10 MB/s",
             "reason": "test machine disk, not the array under test"},
            {"gate": "G3", "check": "throughput_gain_plausible", "threshold": "100000%",
             "reason": "recompute baseline: gains far above the reference range are expected"},
        ],
    }
    for key, value in changes.items():
        prof[key] = value
    return prof


@pytest.fixture
def write_yaml(tmp_path: Path) -> Callable[[str, dict[str, Any]], Path]:
    def write(name: str, data: dict[str, Any]) -> Path:
        p = tmp_path / name
        p.write_text(yaml.safe_dump(data, sort_keys=False))
        return p

    return write


@pytest.fixture
def local_inventory(tmp_path: Path, write_yaml: Callable[[str, dict[str, Any]], Path]) -> Path:
    tier = tmp_path / "tier"
    tier.mkdir()
    return write_yaml("inventory.yaml", {
        "cluster": "e2e-local",
        "defaults": {"workdir": str(tmp_path / "work")},
        "nodes": [{"name": "local", "host": "localhost", "connection": "local", "roles": ["server", "client"],
                   "storage": [{"name": "tier", "path": str(tier)}]}],
    })

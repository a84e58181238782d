"""A capacity-cliff result's measurements (the layout of harness.report.cliffchart), with figures
from a run of profiles/demo-cliff.yaml against the emulator (rounded), for the report tests."""

from __future__ import annotations

from typing import Any

BPT = 2048  # tiny geometry, bytes of KV per token


def _point(prefixes: int, expected: float, hbm: float, cpu: float, disk: float, ttft: float) -> dict[str, Any]:
    total = hbm + cpu + disk
    tokens = prefixes * 1024
    return {"prefixes": prefixes, "tokens": tokens, "bytes": tokens * BPT, "requests": prefixes,
            "expected": {"hit_rate": expected, "tier": "local_disk", "by_tier": {}},
            "measured_hit_rate": total, "ttft_p50_ms": ttft, "ttft_p99_ms": ttft * 1.5,
            "completed": prefixes, "failed": 0, "evidence": [f"evidence/cliff/cpu-disk/ws{prefixes}/trace.jsonl"],
            "hits": {"queried": prefixes * 1040.0},
            "rates": {"hbm": hbm, "local_cpu": cpu, "local_disk": disk, "remote": 0.0,
                      "offload": cpu + disk, "total": total}}


def cliff_measurements() -> dict[str, Any]:
    cpu_disk = [_point(1, 0.985, 0.985, 0, 0, 8.4), _point(3, 0.985, 0, 0.985, 0, 9.7),
                _point(12, 0.985, 0, 0.492, 0.492, 10.6), _point(40, 0.0, 0, 0, 0, 35.9)]
    hbm_only = [_point(1, 0.985, 0.985, 0, 0, 7.8), _point(3, 0.0, 0, 0, 0, 30.7),
                _point(12, 0.0, 0, 0, 0, 32.9), _point(40, 0.0, 0, 0, 0, 31.0)]
    for p in hbm_only:
        p["expected"]["tier"] = "hbm"
    return {
        "cliff": {"kv_bytes_per_token": BPT, "prefix_len": 1024, "order": "cyclic", "passes": 1, "tolerance": 0.05,
                  "arms": {
                      "cpu-disk": {"offload": True, "chunk_size": 256, "points": cpu_disk, "boundaries": {
                          "hbm": {"tokens": 2048, "bytes": 2048 * BPT, "how": "emulator HBM"},
                          "local_cpu": {"tokens": 6144, "bytes": 6144 * BPT, "how": "max_local_cpu_size 0.0015 GB"},
                          "local_disk": {"tokens": 16640, "bytes": 16640 * BPT, "how": "disk 0.004 GB"}}},
                      "hbm-only": {"offload": False, "chunk_size": 256, "points": hbm_only, "boundaries": {
                          "hbm": {"tokens": 2048, "bytes": 2048 * BPT, "how": "emulator HBM"}}}}},
        "tier_hits": {"cpu-disk": [{"point": f"{p['prefixes']} prefixes", "queried": p["hits"]["queried"],
                                    "rates": p["rates"]} for p in cpu_disk]},
    }

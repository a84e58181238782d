"""Gate directories for the page-budget tests, without running a gate: the demo's G3 as it
recorded itself (``tests/data/report/demo-G3.result.json``, from ``kvgate demo`` on this
machine: 2 arms x 1 concurrency x 5 repetitions; its nodes' ``declared`` and ``measured`` blocks,
which gates record since issue 53, were added from G1's facts collected on this machine with
``harness.pipelines.shared.systemfacts``, the kernel as the run recorded it), and the same result grown to 3 arms x 3
concurrencies (each per-concurrency observation, sweep point, tier-hit row and estimate row
copied per concurrency and arm), each with an ``evidence/`` tree of the size and layout a real
run writes (8 files per repetition, fio and engine files per arm), so the appendix is as long as
it would be."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

from harness.store.schema import GateResult

STORED = Path(__file__).resolve().parents[1] / "data" / "report" / "demo-G3.result.json"
REP_FILES = ("protocol.json", "metrics-delta.json", "populate/summary.json", "populate/records.jsonl",
             "populate/point-summary.json", "measure/summary.json", "measure/records.jsonl",
             "measure/point-summary.json")


def demo_result() -> GateResult:
    return GateResult.model_validate_json(STORED.read_text(encoding="utf-8"))


def demo_early_result(gate: str) -> GateResult:
    """The demo's G1 or G2 as they recorded themselves (``tests/data/report/demo-G1.result.json``,
    ``demo-G2.result.json``: ``kvgate demo --until G2`` on this machine, the disk provisioned at
    150 MB/s by blk-throttle)."""
    return GateResult.model_validate_json(STORED.with_name(f"demo-{gate}.result.json").read_text(encoding="utf-8"))


def _per_point(path: str) -> bool:
    return bool(re.search(r"\.c2$|-c2$", path))


def _grow_checks(result: GateResult, arms: list[str], concs: list[int]) -> None:
    for check in result.checks:
        grown = []
        for obs in check.observations:
            if not _per_point(obs.path):
                grown.append(obs)
                continue
            if obs.path.startswith("estimate."):
                for arm in arms:
                    for c in concs:
                        o = copy.deepcopy(obs)
                        o.path = re.sub(r"\.[^.]*-c2$", f".{arm}-c{c}", obs.path)
                        grown.append(o)
                continue
            for c in concs:
                o = copy.deepcopy(obs)
                o.path = obs.path[:-1] + str(c)
                grown.append(o)
        check.observations = grown


def _grow_measurements(m: dict[str, Any], arms: list[str], concs: list[int]) -> None:
    sweep = m["sweep"]
    template = {"baseline": sweep["baseline"]["2"], "other": sweep["candidate"]["2"]}
    m["sweep"] = {arm: {str(c): dict(template["baseline" if arm == "baseline" else "other"],
                                     ttft_p90_ms=30.0 + c) for c in concs} for arm in arms}
    hits = m["tier_hits"]
    m["tier_hits"] = {arm: [dict(row, point=f"c{c} rep{n}")
                            for c in concs for n, row in enumerate(hits["baseline" if arm == "baseline"
                                                                        else "candidate"], 1)]
                      for arm in arms}
    ex = m["expected"]
    ex["rows"] = [dict(ex["rows"][0 if arm == "baseline" else 1], arm=arm, concurrency=c) for arm in arms
                  for c in concs]
    ex["compare"] = {str(c): ex["compare"]["2"] for c in concs}
    m["checkpoint"] = {arm: m["checkpoint"]["candidate"] for arm in arms[1:]}
    m["modelload"] = {arm: m["modelload"]["candidate"] for arm in arms[1:]}


def grown_result(arms: int = 3, concs: tuple[int, ...] = (2, 8, 16)) -> GateResult:
    """The demo's G3 with ``arms`` arms (baseline, candidate, candidate-2, ...) x ``concs``."""
    result = demo_result()
    names = ["baseline", "candidate"] + [f"candidate-{i}" for i in range(2, arms)]
    _grow_checks(result, names, list(concs))
    _grow_measurements(result.measurements, names, list(concs))
    arm_list = result.profile["arms"]
    result.profile["arms"] = arm_list + [dict(arm_list[1], name=n) for n in names[2:]]
    result.profile["load"]["concurrency"] = list(concs)
    return result


def write_gate_dir(gate_dir: Path, result: GateResult, reps: int = 5) -> Path:
    """``result.json`` and an evidence tree the size of a real run's."""
    gate_dir.mkdir(parents=True, exist_ok=True)
    (gate_dir / "result.json").write_text(result.model_dump_json(indent=2), encoding="utf-8")
    ev = gate_dir / "evidence"
    files = ["measured.json", "commands.jsonl", "fio/local/fast-disk/fio-local-fast-disk.json",
             "fio/local/fast-disk/fio-local-fast-disk.cmd", "fio/local/fast-disk/fio-local-fast-disk.fio"]
    for arm, points in result.measurements["sweep"].items():
        files += [f"engine/{arm}/instance0.json", f"engine/{arm}/instance0-logs/stdout.log",
                  f"sweep/{arm}/workload.json"]
        files += [f"sweep/{arm}/c{c}/rep{n}/{f}" for c in points for n in range(1, reps + 1) for f in REP_FILES]
    for n, rel in enumerate(files):
        p = ev / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps({"n": n, "file": rel}) + "\n", encoding="utf-8")
    return gate_dir


# --- G4: the demo's soak as it recorded itself (``tests/data/report/demo-G4.result.json``, from
# ``kvgate demo`` on this machine: 60 windows of 1 s after a 12 s warm-up), and the same soak grown
# to a real 72-hour one (864 windows of 300 s, an engine restart and a kernel storage line), each
# with the evidence tree a soak writes (one compressed record file per window).

STORED_G4 = STORED.with_name("demo-G4.result.json")
SOAK_FILES = ("commands.jsonl", "measured.json", "engine/candidate/instance0.json",
              "engine/candidate/instance0-logs/local-engine-candidate-0.stderr.log",
              "fio/before/local/fast-disk/fio-local-fast-disk-seq-read.json",
              "fio/after/local/fast-disk/fio-local-fast-disk-seq-read.json", "soak/events.jsonl",
              "soak/health.jsonl", "soak/windows.jsonl", "soak/windows-verified.json", "soak/soak.json")


def demo_g4_result() -> GateResult:
    return GateResult.model_validate_json(STORED_G4.read_text(encoding="utf-8"))


def long_soak_result(windows: int = 864, window_s: float = 300.0) -> GateResult:
    """The demo's G4 with ``windows`` windows of ``window_s`` (72 h by default), the demo's
    per-window figures repeated in order, and two faults on the time axis."""
    result = demo_g4_result()
    soak = result.measurements["soak"]
    demo = soak["windows"]
    soak["windows"] = [dict(demo[i % len(demo)], index=i + 1, t_s=(i + 1) * window_s, length_s=window_s)
                       for i in range(windows)]
    soak["window_s"], soak["warmup_s"] = window_s, 3600.0
    soak["drift_windows"] = list(range(13, windows + 1))
    soak["faults"] = [
        {"t_s": 30 * 3600.0, "kind": "restart", "what": "engine pid 4242 -> 4311 (start time changed)",
         "evidence": "evidence/soak/events.jsonl"},
        {"t_s": 51 * 3600.0, "kind": "kernel storage",
         "what": "nvme nvme0: I/O 417 QID 3 timeout, aborting", "evidence": "evidence/soak/health.jsonl"}]
    soak["verified"] = dict(soak["verified"], windows=windows, verified=windows, records=windows * 2400)
    return result


def write_soak_dir(gate_dir: Path, result: GateResult) -> Path:
    """``result.json`` and a soak's evidence tree: one record file per window."""
    gate_dir.mkdir(parents=True, exist_ok=True)
    (gate_dir / "result.json").write_text(result.model_dump_json(indent=2), encoding="utf-8")
    n = len(result.measurements["soak"]["windows"])
    files = list(SOAK_FILES) + [f"soak/windows/w{i:06d}.jsonl.gz" for i in range(1, n + 1)]
    for i, rel in enumerate(files):
        p = gate_dir / "evidence" / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps({"n": i, "file": rel}) + "\n", encoding="utf-8")
    return gate_dir

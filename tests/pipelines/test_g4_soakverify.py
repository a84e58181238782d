"""The soak's window figures are checked against the record files copied into evidence: a node
summary that disagrees with its records is a fault and the records' figures are decided on."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from harness.config.loader import load_gate
from harness.config.profile import ThresholdOverride
from harness.gates.evaluate import evaluate_gate
from harness.load.client import RequestResult
from harness.load.records import make_record
from harness.load.soakwindow import summarise_records
from harness.load.spec import RequestSpec
from harness.pipelines.g4.soakdata import soak_measured
from harness.pipelines.g4.soakverify import verify_windows

ROOT = Path(__file__).resolve().parents[2]
SPEC = load_gate(ROOT / "gates" / "G4.yaml")
DURATION = ThresholdOverride(gate="G4", check="duration", threshold="60s", reason="compressed soak in a test")
T0 = 1_800_000_000.0


def _line(i: int, ttft: float) -> bytes:
    res = RequestResult(f"r{i}", "ok", 1, 2, ttft_ms=ttft, tpot_ms=5.0, itl_ms=[5.0], input_tokens=100,
                        output_tokens=8)
    rec = make_record(res, RequestSpec(f"r{i}", "p", 100, 8), phase="soak", queue_ms=0.1, scheduled_ns=None)
    return (json.dumps(rec, separators=(",", ":")) + "\n").encode()


def write_soak(d: Path, *, slow_from: int = 30) -> list[dict[str, Any]]:
    """30 windows of 20 records each, written as the agent writes them (gzip record files, one
    summary line each); TTFT 20 ms, 50% slower from window ``slow_from`` on."""
    (d / "windows").mkdir(parents=True)
    rows = []
    for w in range(30):
        lines = [_line(w * 20 + r, 20.0 * (1.0 + 0.01 * (r % 5)) * (1.5 if w >= slow_from else 1.0))
                 for r in range(20)]
        name = f"windows/w{w + 1:06d}.jsonl.gz"
        with gzip.open(d / name, "wb") as fh:
            fh.write(b"".join(lines))
        s = summarise_records(w + 1, [json.loads(x) for x in lines], T0 + 4.0 * w, T0 + 4.0 * (w + 1))
        rows.append({**s, "counters": {}, "restarts_so_far": 0, "record_write_errors": 0, "file": name})
    (d / "windows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return rows


def test_summaries_equal_to_their_records_are_verified_and_unchanged(tmp_path: Path) -> None:
    rows = write_soak(tmp_path)
    check = verify_windows(tmp_path, rows, workers=2)
    assert (check.verified, check.records, check.mismatched, check.missing) == (30, 600, [], [])
    assert check.windows == rows


def test_a_node_summary_hiding_a_slowdown_is_caught_and_the_records_decide(tmp_path: Path) -> None:
    """The false PASS: the records show the last third 50% slower, but the node's index (a bug,
    a file edited afterwards) says every window took 20 ms. Decided on the index alone,
    ttft_drift PASSes; checked against the records, the mismatch is reported and the drift FAILs."""
    rows = write_soak(tmp_path, slow_from=20)
    forged = [{**r, "ttft_p50_ms": 20.2} for r in rows]
    (tmp_path / "windows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in forged))
    opts: dict[str, Any] = {"duration_target_s": 60.0, "window_s": 4.0}

    def ttft_drift(measured: dict[str, Any]) -> str:
        return {c.id: c.verdict.value for c in evaluate_gate(SPEC, measured, overrides=[DURATION])}["ttft_drift"]

    assert ttft_drift(soak_measured(tmp_path, **opts)[0]) == "PASS"  # the index alone
    check = verify_windows(tmp_path, forged)
    assert check.verified == 0 and len(check.mismatched) == 30
    assert "window 21: ttft_p50_ms 20.2 (node) vs 30.6 (records)" in check.mismatched[20]
    assert ttft_drift(soak_measured(tmp_path, windows=check.windows, **opts)[0]) == "FAIL"


def test_missing_files_and_windows_the_node_could_not_write_keep_the_node_summary_and_say_so(
        tmp_path: Path) -> None:
    rows = write_soak(tmp_path)
    (tmp_path / rows[3]["file"]).unlink()
    rows[5]["record_write_errors"] = 2  # the node's disk was full: the file lacks 2 records
    rows[7]["file"] = "../outside.jsonl.gz"  # never read outside the soak's directory
    check = verify_windows(tmp_path, rows)
    assert check.verified == 27
    assert [m.split(":")[0] for m in check.missing] == ["window 4", "window 8"]
    assert check.unwritten == ["window 6: 2 record(s) could not be written on the node; its in-memory summary stands"]
    assert check.windows == rows

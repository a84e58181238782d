"""``kvgate export`` of a campaign with a G4: one row per soak window and one per recorded fault
(the gate's and the soak's, with time, kind and evidence), and files with the permissions the
user's umask gives a new file (never the temporary file's 0600)."""

from __future__ import annotations

import csv
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cli.main import run
from tests.report.budget import demo_g4_result, long_soak_result, write_soak_dir


@pytest.fixture
def umask() -> Iterator[None]:
    old = os.umask(0o027)
    try:
        yield
    finally:
        os.umask(old)


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_export_has_the_soak_windows_and_the_fault_log(tmp_path: Path, umask: None) -> None:
    camp = tmp_path / "camp"
    result = long_soak_result(windows=120, window_s=60.0)
    result.faults = ["node-a: ssh: connection reset during the soak (exit 255)"]
    write_soak_dir(camp / "G4", result)
    out = tmp_path / "out"
    assert run(["export", str(camp), "-o", str(out)]) == 0
    windows = _rows(out / "soak_windows.csv")
    assert len(windows) == 120
    assert windows[0]["gate"] == "G4" and windows[0]["index"] == "1" and windows[-1]["t_s"] == "7200.0"
    assert {"requests", "failed", "ttft_p50_ms", "throughput_tok_s", "length_s"} <= set(windows[0])
    assert sum(int(w["requests"]) for w in windows) > 0
    faults = _rows(out / "faults.csv")
    assert [(f["source"], f["kind"]) for f in faults] == [("gate", ""), ("soak", "restart"), ("soak", "kernel storage")]
    assert faults[0]["what"] == "node-a: ssh: connection reset during the soak (exit 255)"
    assert faults[2]["t_s"] == str(51 * 3600.0) and faults[2]["evidence"] == "evidence/soak/health.jsonl"
    for f in out.iterdir():  # umask 027: rw-r----- like any new file, not the temporary file's 0600
        assert stat.S_IMODE(f.stat().st_mode) == 0o640, (f.name, oct(f.stat().st_mode))


def test_demo_soak_exports_every_window(tmp_path: Path) -> None:
    camp = tmp_path / "camp"
    result = demo_g4_result()
    write_soak_dir(camp / "G4", result)
    assert run(["export", str(camp), "-o", str(tmp_path / "out")]) == 0
    rows = _rows(tmp_path / "out" / "soak_windows.csv")
    assert len(rows) == len(result.measurements["soak"]["windows"]) == 60
    assert sum(int(r["requests"]) for r in rows) == sum(w["requests"] for w in result.measurements["soak"]["windows"])
    assert not (tmp_path / "out" / "faults.csv").exists()  # the demo recorded none: no empty file

"""G4 on this machine (``connection: local``): ``kvgate soak stop`` ends a soak early and the
gate then FAILs ``duration``; status reports the stop; the report carries the soak section."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.cli.cmd_soak import status
from harness.cli.main import run
from tests.pipelines.conftest import free_port
from tests.pipelines.test_g4_faults import gates_without_prerequisites, soak_profile, wait_for, window_count

pytestmark = [pytest.mark.fio, pytest.mark.slow]


def test_soak_stop_ends_it_early_and_duration_fails(tmp_path: Path, local_inventory: Path,
                                                    write_yaml: Callable[[str, dict[str, Any]], Path],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    prof = write_yaml("profile.yaml", soak_profile(free_port(), "120s", "2s"))
    reports = tmp_path / "reports"
    common = ["--inventory", str(local_inventory), "--profile", str(prof), "--campaign", "stop",
              "--reports", str(reports), "--gates", str(gates_without_prerequisites(tmp_path)), "--no-progress"]
    assert run(["gate", "G4", *common]) == 0
    soak_dir = reports / "stop" / "G4" / "evidence" / "soak"
    t0 = time.monotonic()
    wait_for(lambda: (run(["soak", "status", "stop", "--reports", str(reports)]) == 0
                      and window_count(soak_dir) >= 2), 40, "two windows")
    assert "FAILING" not in capsys.readouterr().out
    assert run(["soak", "stop", "stop", "--reports", str(reports)]) == 0
    assert run(["gate", "G4", "--resume", *common]) == 1
    assert time.monotonic() - t0 < 60  # stopped, not run to its 120 s
    result = json.loads((reports / "stop" / "G4" / "result.json").read_text())
    checks = {c["id"]: c for c in result["checks"]}
    assert checks["duration"]["verdict"] == "FAIL"
    assert "ended: stopped" in json.dumps(checks["duration"])
    assert checks["no_restarts"]["verdict"] == "PASS"
    assert checks["probe_identity"]["verdict"] == "PASS"
    st = status("stop", reports=reports, pull_now=False)
    assert st["running"] is False and st["ended"]["reason"] == "stopped"
    html = (reports / "stop" / "G4" / "report.html").read_text()
    assert 'id="soak-windows"' in html and 'id="chart-soak-ttft"' in html
    # the engine was stopped and the KV chunks it wrote removed (directories may stay)
    assert [p for p in (tmp_path / "tier").rglob("*") if p.is_file()] == []

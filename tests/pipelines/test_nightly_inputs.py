"""kvgate nightly on bad input (exit 2, nothing created), an unreachable history (exit 4 before
measuring) and an unreachable node (exit 4, recorded, and kept out of later windows)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.cli.main import run as cli
from harness.ports import free_port
from harness.store.historydb import HistoryDB
from tests.pipelines.conftest import small_profile


def _args(inventory: Path, profile: Path, reports: Path, *extra: str) -> list[str]:
    return ["nightly", "--inventory", str(inventory), "--profile", str(profile), "--reports", str(reports),
            "--no-progress", *extra]


def test_bad_input_exits_2_and_creates_nothing(tmp_path: Path, local_inventory: Path,
                                               write_yaml: Callable[[str, dict[str, Any]], Path],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    reports = tmp_path / "reports"
    profile = write_yaml("p.yaml", small_profile(free_port()))
    assert cli(_args(local_inventory, tmp_path / "missing.yaml", reports)) == 2
    assert cli(_args(local_inventory, profile, reports, "--min-effect", "ttft")) == 2
    assert "METRIC=PERCENT" in capsys.readouterr().err
    assert cli(_args(local_inventory, profile, reports, "--baseline-window", "0")) == 2
    assert cli(_args(local_inventory, profile, reports, "--history", "mysql://u@h/db")) == 2
    assert not reports.exists() or not any(reports.glob("nightly-*"))


def test_unreachable_history_exits_4_before_measuring(tmp_path: Path, local_inventory: Path,
                                                      write_yaml: Callable[[str, dict[str, Any]], Path],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    reports = tmp_path / "reports"
    profile = write_yaml("p.yaml", small_profile(free_port()))
    url = f"postgresql://kvgate:s3cret@127.0.0.1:{free_port()}/h?connect_timeout=3"
    assert cli(_args(local_inventory, profile, reports, "--history", url)) == 4
    err = capsys.readouterr().err
    assert "cannot open the history database" in err and "s3cret" not in err
    assert "carries a password" in err and "PGPASSWORD" in err
    assert not reports.exists() or not any(reports.glob("nightly-*"))


@pytest.mark.ssh
def test_unreachable_node_is_a_recorded_fault_kept_out_of_windows(
        tmp_path: Path, write_yaml: Callable[[str, dict[str, Any]], Path]) -> None:
    reports = tmp_path / "reports"
    inventory = write_yaml("inv.yaml", {
        "cluster": "gone", "defaults": {"workdir": str(tmp_path / "work"), "connect_timeout": "2s"},
        "nodes": [{"name": "gone", "host": "127.0.0.1", "port": free_port(), "roles": ["server", "client"],
                   "storage": [{"name": "tier", "path": str(tmp_path / "tier")}]}]})
    profile = write_yaml("p.yaml", small_profile(free_port()))
    assert cli(_args(inventory, profile, reports, "--fio-repetitions", "1")) == 4
    (folder,) = reports.glob("nightly-*")
    result = json.loads((folder / "nightly" / "result.json").read_text())
    assert result["faults"] and result["verdict"] == "NOT_RUN"
    assert all(c["verdict"] == "NOT_RUN" for c in result["checks"]) or not result["checks"]
    with HistoryDB(f"sqlite:///{reports / 'history.sqlite'}") as db:
        (run,) = db.runs()
        assert run.exit_code == 4

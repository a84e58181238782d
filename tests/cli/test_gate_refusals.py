"""A gate refused for its inputs or prerequisites exits 2 and creates nothing: "nothing was touched"
is the promise of exit code 2 (no campaign folder, no campaign.json, no runs.jsonl line)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli.main import run

REPO = Path(__file__).resolve().parents[2]
ARGS = ["--inventory", str(REPO / "inventory" / "localhost.yaml"), "--profile", str(REPO / "profiles" / "demo.yaml")]


def test_g3_before_g2_exits_2_and_creates_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reports = tmp_path / "reports"
    code = run(["gate", "G3", *ARGS, "--campaign", "poc", "--reports", str(reports)])
    assert code == 2
    assert "G3 needs a passed G2" in capsys.readouterr().err
    assert not (reports / "poc").exists()


def test_refusal_in_an_existing_campaign_adds_no_run_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reports = tmp_path / "reports"
    camp = reports / "poc"
    camp.mkdir(parents=True)
    (camp / "runs.jsonl").write_text('{"started_at": "earlier"}\n')
    before = sorted(p.name for p in camp.iterdir())
    assert run(["gate", "G2", *ARGS, "--campaign", "poc", "--reports", str(reports)]) == 2
    assert "G2 needs a passed G1" in capsys.readouterr().err
    assert sorted(p.name for p in camp.iterdir()) == before
    assert (camp / "runs.jsonl").read_text() == '{"started_at": "earlier"}\n'


def test_a_bad_campaign_name_creates_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reports = tmp_path / "reports"
    assert run(["gate", "G3", *ARGS, "--campaign", "../escape", "--reports", str(reports)]) == 2
    assert "campaign name" in capsys.readouterr().err
    assert not reports.exists() and not (tmp_path / "escape").exists()

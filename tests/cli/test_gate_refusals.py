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


def test_an_unlike_baseline_exits_2_and_creates_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.config.loader import load_gate
    from harness.gates.fingerprint import fingerprint_record
    from harness.gates.result import build_gate_result
    from harness.report.sign import write_manifest
    from harness.store.campaign import Campaign, GateDir
    from harness.store.schema import CheckResult, Verdict

    reports = tmp_path / "reports"
    Campaign.open(reports, "base", inventory_path=Path(ARGS[1]), profile_path=Path(ARGS[3]), create=True).close()
    g2 = GateDir(reports / "base" / "G2", "G2")
    passed = CheckResult(id="complete", description="d", metric="baseline.complete", comparator="is_true",
                         severity="blocker", statistic="point", verdict=Verdict.PASS)
    res = build_gate_result(load_gate(REPO / "gates" / "G2.yaml"), [passed], campaign="base", started_at="s",
                            fingerprint=fingerprint_record({"load.input_len": 1, "arm.name": "baseline"}))
    assert res.verdict == Verdict.PASS
    g2.write_result(res)
    write_manifest(g2.path)
    _passed_g1(reports / "cand")  # G3's own prerequisite: its G1 is checked first (issue 27)
    before = sorted(p.name for p in (reports / "cand").iterdir())
    runs = (reports / "cand" / "runs.jsonl").read_bytes()
    code = run(["gate", "G3", *ARGS, "--campaign", "cand", "--baseline", "base", "--reports", str(reports),
                "--allow-unsigned-baseline"])
    assert code == 2
    assert "load.input_len" in capsys.readouterr().err
    assert sorted(p.name for p in (reports / "cand").iterdir()) == before  # no G3, no journal
    assert (reports / "cand" / "runs.jsonl").read_bytes() == runs  # not even a run recorded


def _passed_g1(campaign: Path) -> None:
    """A passed G1 of the shipped inventory, with the demo candidate's target probed."""
    from harness.config.loader import load_gate, load_inventory, load_profile
    from harness.gates.fingerprint import fingerprint_record
    from harness.gates.hardware import inventory_fingerprint
    from harness.gates.result import build_gate_result
    from harness.report.sign import write_manifest
    from harness.store.campaign import Campaign, GateDir
    from harness.store.schema import CheckResult, Observation, Verdict

    profile = load_profile(Path(ARGS[3]))
    target = profile.arm(profile.candidate).storage
    probed = Observation(path=f"nodes.local.storage.{target}.fio.seq_read_bw", measured=1e9, verdict=Verdict.PASS)
    fio = CheckResult(id="fio_read", description="d", metric="nodes.*.storage.*.fio.seq_read_bw", comparator=">",
                      severity="blocker", statistic="point", verdict=Verdict.PASS, observations=[probed])
    res = build_gate_result(load_gate(REPO / "gates" / "G1.yaml"), [fio], campaign=campaign.name, started_at="s",
                            fingerprint=fingerprint_record(inventory_fingerprint(load_inventory(Path(ARGS[1])))))
    assert res.verdict == Verdict.PASS
    # as a G1 run in this campaign leaves it: of its id (G3 refuses a G1 of another campaign, issue 51)
    with Campaign.open(campaign.parent, campaign.name, inventory_path=Path(ARGS[1]),
                       profile_path=Path(ARGS[3])) as camp:
        res.custody = {"campaign_id": camp.id}
    GateDir(campaign / "G1", "G1").write_result(res)
    write_manifest(campaign / "G1")  # as a G1 run leaves it: G3 verifies G1 against its manifest

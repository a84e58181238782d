"""Every allowance is a label (issue 51 item 4): an accepted baseline mismatch, a tier declared
``kind: memory``, a threshold override and a re-run after a FAIL are each on page one of the gate
and campaign reports and a LABEL line of `kvgate verify`; `--strict` exits 1 on any of them, and 0
on a result with none (the adversary's G3 with `--allow-baseline-mismatch load.input_len` was plain
VERIFIED)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.report import render_campaign_report, render_gate_reports
from harness.report.i18n import language
from harness.report.labels import gate_labels
from harness.report.loader import load_gate_result
from harness.store import journal
from harness.store.schema import Verdict
from tests.report.conftest import make_result, write_gate
from tests.support.signing import cli, sign_both


def _labelled(camp: Path) -> Path:
    r = make_result(with_data=False, verdict=Verdict.PASS, exit_code=0)
    r.gate, r.campaign = "G3", "camp-1"
    r.baseline = {"campaign": "camp-1", "gate": "G2", "accepted_mismatches": [
        {"field": "load.input_len", "baseline": 4096, "this_run": 1024}]}
    r.custody = {"campaign_id": "c1", "run_id": "r2", "memory_tiers": [
        {"node": "n1", "target": "shm", "path": "/dev/shm/kv", "kind": "memory"}],
        "earlier_runs": [{"run_id": "r1", "verdict": "FAIL", "started_at": "2026-12-06T10:00:00Z",
                          "finished_at": "2026-12-06T10:02:00Z", "resumed": False}]}
    return write_gate(camp / "G3", r)


def test_each_allowance_is_a_label_on_page_one_and_in_verify(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    camp = tmp_path / "camp-1"
    gate = _labelled(camp)
    assert cli(capsys, "report", str(camp))[0] == 0
    kinds = [label.kind for label in gate_labels(load_gate_result(gate))]
    assert kinds == ["baseline-mismatch", "override", "memory-tier", "re-run"]
    for page in (gate / "report.html", camp / "report.html", gate / "report.md", camp / "report.md"):
        text = page.read_text()
        assert "load.input_len" in text, page  # its own notice (gate page) and the baselines table (campaign)
        assert "memory tier: n1:shm (/dev/shm/kv) is declared kind: memory" in text, page
        assert "throughput_gain" in text and "Customer contract 2026-11" in text, page  # the overrides table
        assert "re-run: G3: 2 runs: FAIL 10:02, PASS" in text, page
    allowed = sign_both(capsys, tmp_path, gate, camp)
    code, out = cli(capsys, "verify", str(gate), "--allowed-signers", str(allowed))
    assert code == 0, out
    assert "LABEL    baseline mismatch allowed: load.input_len" in out and "LABEL    memory tier: n1:shm" in out
    assert "VERIFIED: G3 verdict PASS; 4 label(s) above" in out
    code, out = cli(capsys, "verify", str(gate), "--allowed-signers", str(allowed), "--strict")
    assert code == 1 and "NOT VERIFIED (--strict): 4 label(s)" in out, out
    code, out = cli(capsys, "verify", str(camp), "--allowed-signers", str(allowed), "--strict", "--json")
    assert code == 1 and '"strict": true' in out, out


def test_strict_accepts_a_result_without_labels(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gate = tmp_path / "camp-1" / "G2"
    r = make_result(with_data=False, verdict=Verdict.PASS, exit_code=0)
    r.gate, r.campaign = "G2", "camp-1"
    r.checks = [c for c in r.checks if not c.override_reason]
    write_gate(gate, r)
    assert cli(capsys, "report", str(gate))[0] == 0
    allowed = sign_both(capsys, tmp_path, gate)
    code, out = cli(capsys, "verify", str(gate), "--allowed-signers", str(allowed), "--strict")
    assert code == 0 and "LABEL" not in out, out
    assert "Labels (kvgate verify --strict" not in (gate / "report.html").read_text()


def test_a_resumed_run_is_no_rerun(tmp_path: Path) -> None:
    """A detached G4 finished with --resume is one run, not a re-run."""
    r = make_result(with_data=False, verdict=Verdict.PASS, exit_code=0)
    r.gate, r.checks = "G4", []
    r.custody = {"campaign_id": "c1", "run_id": "r2", "resumed": True, "earlier_runs": [
        {"run_id": "r1", "verdict": None, "started_at": "2026-12-06T10:00:00Z", "finished_at": None,
         "resumed": False}]}
    assert gate_labels(r) == []
    r.custody["resumed"] = False  # started afresh after a run that wrote no result: a re-run
    (label,) = gate_labels(r)
    assert label.kind == "re-run" and "G4: 2 runs: no result (started 10:00), PASS" in label.text


def test_labels_are_in_the_report_language_and_english_in_verify(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Page one in zh carries every label in Chinese (the catalog); ``kvgate verify`` prints the
    same labels as English LABEL lines whatever reports were rendered (stable, greppable)."""
    camp = tmp_path / "camp-1"
    gate = _labelled(camp)
    for run_id, verdict in (("r1", "FAIL"), ("r2", "PASS")):  # the campaign page's runs line, from the journal
        journal.append(camp, "start", gate="G3", run_id=run_id, campaign_id="c1")
        journal.append(camp, "result", gate="G3", run_id=run_id, campaign_id="c1", verdict=verdict)
    render_gate_reports(gate, "zh")
    render_campaign_report(camp, "zh")
    assert "G3：2 次运行：FAIL " in (camp / "report.zh.html").read_text(encoding="utf-8")
    for page in (gate / "report.zh.html", gate / "report.zh.md", camp / "report.zh.html", camp / "report.zh.md"):
        text = page.read_text(encoding="utf-8")
        assert "内存层：n1:shm（/dev/shm/kv）声明为 kind: memory：其数值是内存的，而非存储设备的" in text, page
        assert "重新运行：G3：2 次运行：FAIL 10:02, PASS" in text and "在 FAIL 之后再次运行" in text, page
        for english in ("memory tier:", "re-run:", "its figures are RAM's", "2 runs"):
            assert english not in text, (page, english)
    result = load_gate_result(gate)
    with language("zh"):
        shown = [label.text for label in gate_labels(result)]
    assert shown[0].startswith("允许的基线差异：load.input_len 在基线中为 4096"), shown
    assert shown[1].startswith("阈值修改：G3 "), shown
    code, out = cli(capsys, "verify", str(gate))
    assert "LABEL    baseline mismatch allowed: load.input_len was 4096 in the baseline and 1024 in this run" in out
    assert "LABEL    threshold override: G3 " in out and "LABEL    memory tier: n1:shm (/dev/shm/kv)" in out
    assert "LABEL    re-run: G3: 2 runs: FAIL 10:02, PASS" in out and "允许" not in out, out

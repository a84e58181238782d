"""The journal of gate runs (issue 51 item 1), end to end through the CLI on the emulator: the
adversary deleted a failing G2 and ran it again until it passed; both parties signed every gate
and the campaign, and `kvgate verify` said plain VERIFIED. Now every run is listed, the re-run is
a label (`--strict` refuses it), and a journal cut short, edited or left behind is refused.

The campaign is the session's one real G1+G2 (tests/support/campaign.py), copied whole and run
on with the files it was started with; G2 is run twice more (a strict gate file, then the stock one)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from harness.store.journal import JOURNAL, read_journal
from tests.integrity.test_false_pass import kvgate
from tests.support.campaign import PassedBaseline
from tests.support.signing import cli, sign_both

# G2 twice more (and, run alone, the session baseline first): minutes on a loaded two-core machine
pytestmark = [pytest.mark.fio, pytest.mark.slow, pytest.mark.timeout(600)]
REPO = Path(__file__).resolve().parents[2]


def _strict_gates(tmp: Path) -> Path:
    """The shipped gates with G2 unpassable: no failed request is fewer than 0%."""
    gates = tmp / "strict-gates"
    shutil.copytree(REPO / "gates", gates)
    doc = yaml.safe_load((gates / "G2.yaml").read_text())
    for c in doc["checks"]:
        if c["id"] == "failed_requests":
            c["comparator"], c["threshold"] = "<", "0%"
    (gates / "G2.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return gates


def _g2(capsys: pytest.CaptureFixture[str], shared: PassedBaseline, reports: Path, *extra: str) -> tuple[int, str]:
    return kvgate(capsys, "gate", "G2", "--inventory", str(shared.root / "inventory.yaml"),
                  "--profile", str(shared.root / "profile.yaml"), "--campaign", "base",
                  "--reports", str(reports), *extra)


def test_delete_and_rerun_until_it_passes_is_listed_and_labelled(
        tmp_path: Path, passed_baseline: PassedBaseline, capsys: pytest.CaptureFixture[str]) -> None:
    reports = tmp_path / "reports"
    camp = passed_baseline.copy_into(reports, whole=True)
    shutil.rmtree(camp / "G2")
    code, out = _g2(capsys, passed_baseline, reports, "--gates", str(_strict_gates(tmp_path)))
    assert code == 1, out
    head = re.search(r"journal head: ([0-9a-f]{64})", out)
    assert head and head.group(1) == read_journal(camp).head  # printed as the run ends, to be shared
    shutil.rmtree(camp / "G2")  # the adversary's step
    code, out = _g2(capsys, passed_baseline, reports)
    assert code == 0, out
    res = json.loads((camp / "G2" / "result.json").read_text())
    assert [r["verdict"] for r in res["custody"]["earlier_runs"]] == ["PASS", "FAIL"]
    assert res["custody"]["campaign_id"] == json.loads((camp / "campaign.json").read_text())["id"]
    # every run on the campaign page
    html = (camp / "report.html").read_text()
    assert re.search(r"G2: 3 runs: PASS \d\d:\d\d, FAIL \d\d:\d\d, PASS \d\d:\d\d", html), html
    allowed = sign_both(capsys, tmp_path, camp / "G1", camp / "G2", camp)
    code, out = cli(capsys, "verify", str(camp), "--allowed-signers", str(allowed))
    assert code == 0, out
    assert re.search(r"RUNS     G2: 3 runs: PASS \d\d:\d\d, FAIL \d\d:\d\d, PASS \d\d:\d\d", out), out
    assert "RUNS     G1: 1 run: PASS" in out
    assert "LABEL    re-run: G2: 3 runs" in out and "run again after FAIL" in out
    code, out = cli(capsys, "verify", str(camp), "--allowed-signers", str(allowed), "--strict")
    assert code == 1, out
    assert "NOT VERIFIED (--strict)" in out

    # the journal cut back to before the failing run: shorter than the runs the gates record
    lines = (camp / JOURNAL).read_bytes().splitlines(keepends=True)
    (camp / JOURNAL).write_bytes(b"".join(lines[:6]))
    code, out = cli(capsys, "verify", str(camp), "--allowed-signers", str(allowed))
    assert code == 1, out
    assert "journal.jsonl changed since campaign.manifest was written" in out
    assert "journal.jsonl is shorter than the runs the gate directories record: G2/result.json" in out
    # a record edited (the FAIL made a PASS): the chain breaks there
    text = b"".join(lines).replace(b'"verdict":"FAIL"', b'"verdict":"PASS"')
    (camp / JOURNAL).write_bytes(text)
    code, out = cli(capsys, "verify", str(camp), "--allowed-signers", str(allowed))
    assert code == 1 and "the chain of gate runs is broken there" in out, out
    # the journal removed
    (camp / JOURNAL).unlink()
    code, out = cli(capsys, "verify", str(camp), "--allowed-signers", str(allowed))
    assert code == 1 and "journal.jsonl is missing, but gates of this campaign record runs of it" in out, out

"""G3 checks what it stands on (issue 51 item 3), end to end through the CLI: the adversary edited
`cpu_model` in G1's facts (G3 quoted the fake CPU as "this run"), edited an INCONCLUSIVE G1's
result.json to PASS without rewriting its manifest (G3 started its sweep), and used a G1 of another
campaign (accepted). Each is now refused before any node is touched (exit 2, naming the file).

The campaign is the session's one real G1+G2 (tests/support/campaign.py), copied whole and run on
with the files it was started with; every refusal comes before a node is touched."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from harness.report.sign import write_manifest
from tests.integrity.test_false_pass import kvgate
from tests.support.campaign import PassedBaseline

pytestmark = [pytest.mark.fio, pytest.mark.slow]


def _g3(capsys: pytest.CaptureFixture[str], shared: PassedBaseline, reports: Path) -> tuple[int, str]:
    return kvgate(capsys, "gate", "G3", "--inventory", str(shared.root / "inventory.yaml"),
                  "--profile", str(shared.root / "profile.yaml"), "--campaign", "base",
                  "--reports", str(reports), "--allow-unsigned-baseline")


@pytest.fixture
def camp(tmp_path: Path, passed_baseline: PassedBaseline) -> Path:
    return passed_baseline.copy_into(tmp_path / "reports", whole=True)


def test_edited_g1_facts_are_refused(camp: Path, passed_baseline: PassedBaseline,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    facts = next((camp / "G1" / "evidence" / "facts").glob("*.json"))
    doc = json.loads(facts.read_text())
    doc["cpu_model"] = "AMD EPYC 9654 96-Core Processor"  # to match a baseline on other hardware
    facts.write_text(json.dumps(doc))
    code, out = _g3(capsys, passed_baseline, camp.parent)
    assert code == 2, out
    assert f"G3 stands on G1 of campaign 'base', which failed verification: {facts} changed since" in out
    assert not (camp / "G3").exists()


@pytest.mark.parametrize(("gate", "said"), [("G1", "G1 there is INCONCLUSIVE"),
                                           ("G2", "G2 in campaign 'base' is INCONCLUSIVE")])
def test_an_inconclusive_prerequisite_edited_to_pass_is_refused(
        camp: Path, passed_baseline: PassedBaseline, capsys: pytest.CaptureFixture[str], gate: str, said: str) -> None:
    res = camp / gate / "result.json"
    doc = json.loads(res.read_text())
    doc["verdict"], doc["exit_code"] = "INCONCLUSIVE", 3
    res.write_text(json.dumps(doc, indent=2))
    write_manifest(camp / gate)  # as the INCONCLUSIVE run left it
    code, out = _g3(capsys, passed_baseline, camp.parent)
    assert code == 2 and said in out, out
    doc["verdict"], doc["exit_code"] = "PASS", 0  # the edit, the manifest not rewritten
    res.write_text(json.dumps(doc, indent=2))
    code, out = _g3(capsys, passed_baseline, camp.parent)
    assert code == 2, out
    assert "result.json changed since MANIFEST.sha256 was written" in out and str(camp / gate) in out, out
    assert not (camp / "G3").exists()


def test_a_g1_of_another_campaign_is_refused(camp: Path, passed_baseline: PassedBaseline,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """The campaign's G1 and G2 ran under another campaign id than this campaign.json's: as when
    a G1 directory is copied in from another campaign of the same name and files."""
    meta = json.loads((camp / "campaign.json").read_text())
    theirs, meta["id"] = meta["id"], uuid.uuid4().hex
    (camp / "campaign.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    code, out = _g3(capsys, passed_baseline, camp.parent)
    assert code == 2, out
    assert f"is of campaign id {theirs}, not this campaign's {meta['id']}: a gate directory of another campaign" in out
    assert not (camp / "G3").exists()


def test_a_g1_copied_into_a_campaign_g3_would_create_is_refused(
        tmp_path: Path, passed_baseline: PassedBaseline, capsys: pytest.CaptureFixture[str]) -> None:
    """The adversary's copy: a passed G1 (and G2) of another campaign put into a directory with no
    campaign.json, then G3 there. Before, the campaign id was compared only when the campaign
    existed, and G3 created it and stood on the foreign G1."""
    reports = tmp_path / "reports"
    passed_baseline.copy_into(reports, "base", whole=True)  # a baseline to compare against
    copied = passed_baseline.copy_into(reports, "fresh")  # G1 and G2, no campaign.json
    for extra in ((), ("--baseline", "base")):
        code, out = kvgate(capsys, "gate", "G3", "--inventory", str(passed_baseline.root / "inventory.yaml"),
                           "--profile", str(passed_baseline.root / "profile.yaml"), "--campaign", "fresh",
                           "--reports", str(reports), "--allow-unsigned-baseline", *extra)
        assert code == 2, out
        assert (f"G3 stands on G1 of campaign 'fresh', but {copied / 'G1' / 'result.json'} is of campaign id "
                f"{passed_baseline.result('G1')['custody']['campaign_id']} and {copied / 'campaign.json'} "
                "does not exist") in out, out
        assert sorted(p.name for p in copied.iterdir()) == ["G1", "G2"]  # refused before anything was created


def _readopt_g1(camp: Path) -> str:
    """Give the campaign a new id, and its G1 that id as a G1 run there would have: its G2 is then
    the only gate of another campaign."""
    meta = json.loads((camp / "campaign.json").read_text())
    meta["id"] = uuid.uuid4().hex
    (camp / "campaign.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    res = camp / "G1" / "result.json"
    doc = json.loads(res.read_text())
    doc["custody"]["campaign_id"] = meta["id"]
    res.write_text(json.dumps(doc, indent=2))
    write_manifest(camp / "G1")
    return str(meta["id"])


def test_a_g2_of_another_campaign_is_refused(camp: Path, passed_baseline: PassedBaseline,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """G3 stands on G2 as it does on G1: a G2 copied in (in this campaign, or in the campaign
    ``--baseline`` names) is of the campaign it is read from, or refused naming its result."""
    ours = _readopt_g1(camp)
    theirs = passed_baseline.result("G2")["custody"]["campaign_id"]
    code, out = _g3(capsys, passed_baseline, camp.parent)
    assert code == 2, out
    assert (f"G3 stands on G2 of campaign 'base', but {camp / 'G2' / 'result.json'} is of campaign id {theirs}, "
            f"not this campaign's {ours}") in out, out
    other = passed_baseline.copy_into(camp.parent, "other", whole=True)
    other_id = _readopt_g1(other)
    (camp / "G2").rename(camp.parent / "G2.aside")  # G3 here compares against --baseline other
    code, out = kvgate(capsys, "gate", "G3", "--inventory", str(passed_baseline.root / "inventory.yaml"),
                       "--profile", str(passed_baseline.root / "profile.yaml"), "--campaign", "base",
                       "--reports", str(camp.parent), "--allow-unsigned-baseline", "--baseline", "other")
    assert code == 2, out
    assert (f"G3 stands on G2 of campaign 'other', but {other / 'G2' / 'result.json'} is of campaign id {theirs}, "
            f"not this campaign's {other_id}") in out, out
    assert not (camp / "G3").exists()


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


def test_an_inconclusive_g1_edited_to_pass_is_refused(camp: Path, passed_baseline: PassedBaseline,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    res = camp / "G1" / "result.json"
    doc = json.loads(res.read_text())
    doc["verdict"], doc["exit_code"] = "INCONCLUSIVE", 3
    res.write_text(json.dumps(doc, indent=2))
    write_manifest(camp / "G1")  # as the INCONCLUSIVE run left it
    code, out = _g3(capsys, passed_baseline, camp.parent)
    assert code == 2 and "G1 there is INCONCLUSIVE" in out, out
    doc["verdict"], doc["exit_code"] = "PASS", 0  # the edit, the manifest not rewritten
    res.write_text(json.dumps(doc, indent=2))
    code, out = _g3(capsys, passed_baseline, camp.parent)
    assert code == 2, out
    assert f"{res} changed since MANIFEST.sha256 was written" in out
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

"""The history index over real campaign directories."""

from __future__ import annotations

from pathlib import Path

from harness.store.campaign import Campaign
from harness.store.history import list_campaigns
from harness.store.schema import GateResult, Verdict


def test_lists_campaigns_with_gate_verdicts(tmp_path: Path) -> None:
    inv, prof = tmp_path / "i.yaml", tmp_path / "p.yaml"
    inv.write_text("cluster: c\n")
    prof.write_text("name: p\n")
    root = tmp_path / "reports"
    with Campaign.open(root, "a", inventory_path=inv, profile_path=prof, operator="ann") as c:
        g1 = c.gate_dir("G1")
        g1.write_result(GateResult(gate="G1", title="t", campaign="a", verdict=Verdict.PASS, exit_code=0,
                                   started_at="s", finished_at="f", kvgate_version="0"))
        c.gate_dir("G2").mark_step_done("arm=baseline/c=8")
        (c.gate_dir("G3").path / "result.json").write_text('{"schema_version": 99}')
    Campaign.open(root, "b", inventory_path=inv, profile_path=prof).close()
    (root / "junk").mkdir()
    summaries = list_campaigns(root)
    assert [s.name for s in summaries] == ["a", "b"]
    a = summaries[0]
    assert a.operator == "ann" and a.profile.endswith("p.yaml")
    assert a.gates["G1"] == "PASS" and a.gates["G2"] == "running"
    assert a.gates["G3"].startswith("unreadable") and "schema_version 99" in a.gates["G3"]
    assert summaries[1].gates == {}
    assert list_campaigns(tmp_path / "none") == []

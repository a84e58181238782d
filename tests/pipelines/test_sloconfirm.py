"""The SLO capacity's confirmation repetitions, end to end on the emulator: G2 confirms the
baseline's capacity, G3 the candidate's, and the gain at the SLO is decided on those fresh
repetitions, not on the sweep's."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.cli.main import run
from harness.ports import free_port
from harness.report.sign import write_manifest
from harness.store.campaign import Campaign
from tests.pipelines.conftest import small_profile
from tests.support.campaign import PassedBaseline

pytestmark = [pytest.mark.fio, pytest.mark.slow]


def _gate(gate_id: str, inv: Path, prof: Path, reports: Path, *extra: str) -> int:
    return run(["gate", gate_id, "--inventory", str(inv), "--profile", str(prof), "--campaign", "slo",
                "--reports", str(reports), "--no-progress", *extra])


def _steps(state: Path) -> dict[str, dict[str, Any]]:
    lines = [json.loads(x) for x in state.read_text().splitlines() if x.strip()]
    return {r["step"]: r["data"] for r in lines if r["step"].startswith("sweep/")}


def test_g2_and_g3_confirm_each_arms_slo_capacity_with_fresh_repetitions(
        tmp_path: Path, local_inventory: Path, write_yaml: Callable[[str, dict[str, Any]], Path],
        passed_baseline: PassedBaseline) -> None:
    data = small_profile(free_port())
    # a bound every point meets on any machine: the search confirms the top swept concurrency
    data["load"] = {**data["load"], "repetitions": 3, "slo": {"ttft_p90": "60s", "confirm_repetitions": 2}}
    prof = write_yaml("profile.yaml", data)
    reports = tmp_path / "reports"
    passed_baseline.copy_into(reports, "slo", gates=("G1",))
    assert _gate("G2", local_inventory, prof, reports) in (0, 1, 3)
    g2_steps = _steps(reports / "slo" / "G2" / "state.jsonl")
    # the sweep's 3 repetitions, then 2 fresh ones numbered after them, at the found concurrency
    assert sorted(g2_steps) == [f"sweep/baseline/c2/rep{r}" for r in range(1, 6)]
    assert (reports / "slo" / "G2" / "evidence" / "sweep" / "baseline" / "c2" / "rep5" / "measure").is_dir()
    g2 = json.loads((reports / "slo" / "G2" / "result.json").read_text())
    # G2's own checks see the sweep only: the repeatability is over 3 repetitions, not 5
    cv = next(c for c in g2["checks"] if c["id"] == "ttft_repeatability")["observations"][0]
    assert "per repetition: " in cv["reason"] and cv["reason"].split("per repetition: ")[1].count(",") == 2, cv

    _adopt_g1(reports / "slo")
    _gate("G3", local_inventory, prof, reports, "--allow-unsigned-baseline")
    g3_steps = _steps(reports / "slo" / "G3" / "state.jsonl")
    assert sorted(g3_steps) == [f"sweep/candidate/c2/rep{r}" for r in range(1, 6)]
    g3 = json.loads((reports / "slo" / "G3" / "result.json").read_text())
    check = next(c for c in g3["checks"] if c["id"] == "capacity_gain_at_slo")
    obs = check["observations"][0]
    assert obs["n_samples"] == 2 and "at the SLO" in obs["measured_text"], obs
    # decided on the fresh repetitions' throughputs: rep4 and rep5 of each arm, not the sweep's
    fresh = {arm: [s[f"sweep/{arm}/c2/rep{r}"]["summary"]["output_throughput"] for r in (4, 5)]
             for arm, s in (("candidate", g3_steps), ("baseline", g2_steps))}
    mean = {arm: sum(v) / 2 for arm, v in fresh.items()}
    assert obs["measured"] == pytest.approx(mean["candidate"] / mean["baseline"] - 1)
    # two repetitions per arm are below the interval's minimum: said, not decided
    assert check["verdict"] == "INCONCLUSIVE"


def _adopt_g1(campaign: Path) -> None:
    """The copied G1 as a G1 run in this campaign would have left it: G3 refuses a G1 whose result
    names another campaign (issue 51), and the G2 run above started this one with its own id."""
    camp_id = Campaign.read(campaign.parent, campaign.name).id
    path = campaign / "G1" / "result.json"
    result = json.loads(path.read_text())
    result["custody"] = {**(result.get("custody") or {}), "campaign_id": camp_id}
    path.write_text(json.dumps(result))
    write_manifest(path.parent)

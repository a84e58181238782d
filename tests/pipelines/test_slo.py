"""SLO capacity: which concurrencies meet load.slo, each arm's capacity and the gain at it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.config.loader import load_gate, load_profile
from harness.config.profile import SloSpec
from harness.errors import InputError
from harness.gates.evaluate import evaluate_check
from harness.gates.outcome import Verdict
from harness.paths import gates_dir
from harness.pipelines.slo import capacity_gain_at_slo, repetition_meets, slo_capacity
from harness.pipelines.sweepdata import Repetition, sweep_table

ROOT = Path(__file__).resolve().parents[2]
SLO = SloSpec(ttft_p90=2.0, itl_p90=0.1)


def rep(c: int, r: int, ttft_ms: float, thr: float, itl_p90: float | None = 50.0) -> Repetition:
    summary: dict[str, object] = {"completed": 10, "output_throughput": thr, "request_goodput": thr / 100}
    if itl_p90 is not None:
        summary["p90_itl_ms"] = itl_p90
    return Repetition("a", c, r, summary, [ttft_ms * f for f in (0.8, 0.9, 1.0, 1.1, 1.2)])


def arm(points: dict[int, tuple[float, float]], reps: int = 5) -> dict[int, list[Repetition]]:
    return {c: [rep(c, r, ttft, thr * (1 + 0.01 * (r - 3))) for r in range(1, reps + 1)]
            for c, (ttft, thr) in points.items()}


def test_a_repetition_meets_the_slo_only_with_every_bounded_figure_within_it() -> None:
    assert repetition_meets(rep(8, 1, 1000.0, 100.0), SLO) is True
    assert repetition_meets(rep(8, 1, 1800.0, 100.0), SLO) is False  # TTFT p90 2088 ms > 2 s
    assert repetition_meets(rep(8, 1, 1000.0, 100.0, itl_p90=150.0), SLO) is False
    assert repetition_meets(rep(8, 1, 1000.0, 100.0, itl_p90=None), SLO) is None  # unknown is not met
    assert repetition_meets(rep(8, 1, 1000.0, 100.0, itl_p90=None), SloSpec(ttft_p90=2.0)) is True


def test_capacity_is_the_last_concurrency_met_walking_up_and_needs_every_repetition() -> None:
    sweep = arm({4: (500.0, 100.0), 8: (1000.0, 180.0), 16: (2500.0, 250.0), 32: (1200.0, 260.0)})
    assert slo_capacity(sweep, SLO) == 8  # c32 meets it again: noise past the first miss, not capacity
    one_slow = arm({4: (500.0, 100.0), 8: (1000.0, 180.0)})
    one_slow[8][2] = rep(8, 3, 1900.0, 180.0)  # one repetition over the bound: c8 is not confirmed
    assert slo_capacity(one_slow, SLO) == 4
    assert slo_capacity(arm({4: (3000.0, 100.0)}), SLO) is None


def test_capacity_gain_at_slo_compares_each_arm_at_its_own_slo_point() -> None:
    base = arm({8: (1500.0, 100.0), 16: (2500.0, 150.0)})  # meets the SLO up to c8
    cand = arm({8: (800.0, 120.0), 16: (1400.0, 160.0)})  # up to c16
    leaf = capacity_gain_at_slo(cand, base, SLO)
    assert leaf["value"] == pytest.approx(0.60)
    assert leaf["samples"]["a_points"].keys() == {"16"} and leaf["samples"]["b_points"].keys() == {"8"}
    assert "candidate up to c16: 160.0 tok/s, goodput 1.60 req/s" in leaf["detail"]
    check = load_gate(gates_dir() / "G3.yaml").check("capacity_gain_at_slo")
    assert check.severity == "advisory"
    assert evaluate_check(check, {"compare": {"capacity_gain_at_slo": leaf}}).verdict is Verdict.PASS
    # the baseline never meets it: nothing to compare with, said so
    never = capacity_gain_at_slo(cand, arm({8: (3000.0, 100.0)}), SLO)
    assert never["value"] is None and "baseline meets the SLO at no swept concurrency" in never["detail"]


def test_sweep_table_carries_p90_goodput_and_intervals_for_the_chart() -> None:
    t = sweep_table(arm({8: (1000.0, 100.0)}))["8"]
    assert t["ttft_p90_ms"] == pytest.approx(1200.0)
    assert t["request_goodput"] == pytest.approx(1.0)
    m, lo, hi = t["output_throughput_ci"]
    assert m == pytest.approx(100.0) and lo < 100.0 < hi
    assert t["ttft_p50_ci"][0] == pytest.approx(1000.0)
    assert sweep_table({8: [rep(8, 1, 1000.0, 100.0)]})["8"]["ttft_p90_ci"] is None  # one repetition


def test_the_slo_is_validated_with_the_profile(tmp_path: Path) -> None:
    data = yaml.safe_load((ROOT / "profiles" / "demo.yaml").read_text())
    data.setdefault("load", {})["slo"] = {"ttft_p90": "2s", "itl_p90": "100ms"}
    p = tmp_path / "p.yaml"
    p.write_text(yaml.safe_dump(data))
    slo = load_profile(p).load.slo
    assert slo is not None and slo.ttft_p90 == 2.0 and slo.itl_p90 == pytest.approx(0.1)
    data["load"]["slo"] = {}
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(InputError, match="at least one of ttft_p90, itl_p90"):
        load_profile(p)

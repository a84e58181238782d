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
from harness.pipelines.shared.slo import (
    capacity_gain_at_slo,
    confirm_order,
    confirmed_capacity,
    repetition_meets,
    slo_capacity,
)
from harness.pipelines.shared.sweepdata import Repetition, sweep_table

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


def confirm(points: dict[int, tuple[float, float]], reps: int = 5) -> dict[int, list[Repetition]]:
    """Confirmation repetitions: numbered after a 5-repetition sweep's."""
    return {c: [rep(c, 5 + r, ttft, thr * (1 + 0.01 * (r - 3))) for r in range(1, reps + 1)]
            for c, (ttft, thr) in points.items()}


def test_capacity_gain_at_slo_compares_each_arm_at_its_own_confirmed_slo_point() -> None:
    base = arm({8: (1500.0, 100.0), 16: (2500.0, 150.0)})  # meets the SLO up to c8
    cand = arm({8: (800.0, 120.0), 16: (1400.0, 160.0)})  # up to c16
    # the fresh repetitions confirm both points, at throughputs a little under the sweep's (the
    # sweep's chosen point looked its best): the gain is decided on them
    leaf = capacity_gain_at_slo(cand, base, SLO, confirm({16: (1400.0, 152.0)}), confirm({8: (1500.0, 95.0)}))
    assert leaf["value"] == pytest.approx(0.60)
    assert leaf["samples"]["a_points"] == {"16": pytest.approx([152.0 * (1 + 0.01 * (r - 3)) for r in range(1, 6)])}
    assert leaf["samples"]["b_points"].keys() == {"8"}
    assert "candidate up to c16 (sweep c16; 5 confirmation repetitions): 152.0 tok/s, goodput 1.52 req/s" \
        in leaf["detail"]
    check = load_gate(gates_dir() / "G3.yaml").check("capacity_gain_at_slo")
    assert check.severity == "advisory"
    assert evaluate_check(check, {"compare": {"capacity_gain_at_slo": leaf}}).verdict is Verdict.PASS
    # the baseline never meets it: nothing to compare with, said so
    never = capacity_gain_at_slo(cand, arm({8: (3000.0, 100.0)}), SLO, confirm({16: (1400.0, 152.0)}), {})
    assert never["value"] is None and "baseline meets the SLO at no swept concurrency" in never["detail"]


def test_a_point_the_sweep_met_by_luck_is_not_confirmed_and_the_search_steps_down() -> None:
    sweep = arm({4: (500.0, 100.0), 8: (1000.0, 180.0), 16: (1600.0, 250.0)})
    assert slo_capacity(sweep, SLO) == 16
    assert confirm_order(sweep, SLO) == [16, 8, 4]
    # c16's fresh repetitions miss the 2 s TTFT p90 (1900 ms x 1.2 = 2280 ms): c16 is not the capacity
    missed = confirm({16: (1900.0, 240.0)})
    assert confirmed_capacity(sweep, missed, SLO) is None  # c8 not confirmed yet: no capacity claimed
    both = {**missed, **confirm({8: (1000.0, 175.0)})}
    assert confirmed_capacity(sweep, both, SLO) == 8
    one_bad = confirm({16: (1000.0, 240.0)})
    one_bad[16][4] = rep(16, 10, 1800.0, 240.0)  # the last fresh repetition alone over the bound
    assert confirmed_capacity(sweep, one_bad, SLO) is None
    base = arm({4: (500.0, 100.0), 8: (1500.0, 150.0)})
    base_conf = confirm({8: (1500.0, 150.0)})
    leaf = capacity_gain_at_slo(sweep, base, SLO, both, base_conf)
    # decided on c8's fresh repetitions (175 tok/s), not the sweep's c16 (250 tok/s): a 16.7% gain, not 67%
    assert leaf["value"] == pytest.approx(175.0 / 150.0 - 1)
    assert "candidate up to c8 (sweep c16; not confirmed at c16; 5 confirmation repetitions)" in leaf["detail"]
    # not confirmed anywhere yet: NOT_RUN, saying what the sweep found and what the fresh runs said
    leaf = capacity_gain_at_slo(sweep, base, SLO, missed, base_conf)
    assert leaf["value"] is None
    assert "candidate met the SLO up to c16 in the sweep; fresh repetitions did not confirm c16" in leaf["detail"]


def test_an_slo_capacity_without_confirmation_repetitions_is_not_measured() -> None:
    # a G2 run before load.slo was set recorded no confirmation for the baseline: no gain is claimed
    cand = arm({8: (800.0, 120.0)})
    base = arm({8: (1500.0, 100.0)})
    leaf = capacity_gain_at_slo(cand, base, SLO, confirm({8: (800.0, 120.0)}), {})
    assert leaf["value"] is None and "samples" not in leaf
    assert "baseline met the SLO up to c8 in the sweep, but no confirmation repetition was recorded" in leaf["detail"]
    check = load_gate(gates_dir() / "G3.yaml").check("capacity_gain_at_slo")
    assert evaluate_check(check, {"compare": {"capacity_gain_at_slo": leaf}}).verdict is Verdict.NOT_RUN
    # fewer than two confirmation repetitions with throughput: no interval, not measured
    short = capacity_gain_at_slo(cand, base, SLO, confirm({8: (800.0, 120.0)}, reps=1), confirm({8: (1500.0, 100.0)}))
    assert short["value"] is None and "fewer than 2 confirmation repetitions" in short["detail"]


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
    assert slo.confirm_repetitions == 5
    data["load"]["slo"] = {"ttft_p90": "2s", "confirm_repetitions": 1}
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(InputError, match="confirm_repetitions"):
        load_profile(p)
    data["load"]["slo"] = {}
    p.write_text(yaml.safe_dump(data))
    with pytest.raises(InputError, match="at least one of ttft_p90, itl_p90"):
        load_profile(p)

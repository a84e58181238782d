"""bandwidth_retention's reproducibility control: the target's read before the soak must reproduce
(G1, G3, G4's before-side within the retention tolerance), else INCONCLUSIVE naming the spread."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.config.loader import load_gate
from harness.gates.evaluate import evaluate_gate
from harness.pipelines.g4.reproduce import reproducibility_control, retention_tolerance
from harness.pipelines.g4.soakdata import retention_leaf, side_leaf

ROOT = Path(__file__).resolve().parents[2]
SPEC = load_gate(ROOT / "gates" / "G4.yaml")
GB = 1e9


def _side(levels: list[float]) -> dict[str, Any]:
    """Five independent runs a side, each of five steady rounds at its level."""
    runs = [{"value": lv, "text": f"{lv / GB:.2f} GB/s", "samples": {"kind": "percentile",
             "x": [lv * f for f in (0.99, 1.0, 1.01, 1.0, 0.995)], "q": 50}} for lv in levels]
    return side_leaf(runs)


def _retention(leaf: dict[str, Any]) -> tuple[str, str]:
    (check,) = [c for c in evaluate_gate(SPEC, {"soak": {"read_bw_retention": leaf}}, seed=0)
                if c.id == "bandwidth_retention"]
    return check.verdict.value, check.reason


def test_a_level_jump_between_probes_is_inconclusive_not_fail() -> None:
    """G1 and G3 read the target at 1.5 GB/s, G4's before-side at 2.0 GB/s (the disk's level jumped),
    after the soak 1.5 again: without the control, retention 75% FAILs; with it, INCONCLUSIVE."""
    before, after = _side([2.0 * GB] * 5), _side([1.5 * GB] * 5)
    leaf = retention_leaf(before, after)
    assert _retention(leaf)[0] == "FAIL"
    controlled = reproducibility_control(leaf, before, [("G1", 1.5 * GB), ("G3", 1.52 * GB)], 0.90)
    verdict, reason = _retention(controlled)
    assert verdict == "INCONCLUSIVE"
    assert "does not reproduce" in reason and "G1 1.50 GB/s, G3 1.52 GB/s, G4 before 2.00 GB/s" in reason
    assert "spread 25.0%" in reason


def test_a_reproduced_level_leaves_the_verdict_to_the_interval() -> None:
    before, after = _side([150e6] * 5), _side([120e6] * 5)
    earlier = [("G1", 149.9e6), ("G3", 150.1e6)]
    degraded = reproducibility_control(retention_leaf(before, after), before, earlier, 0.90)
    assert _retention(degraded)[0] == "FAIL"  # the storage really lost 20%: the control does not hide it
    assert degraded["reproduced_before"]["spread"] < 0.01
    kept = reproducibility_control(retention_leaf(before, _side([150e6] * 5)), before, earlier, 0.90)
    assert _retention(kept)[0] == "PASS"


def test_without_earlier_figures_the_control_says_it_did_not_check() -> None:
    before = _side([150e6] * 5)
    leaf = reproducibility_control(retention_leaf(before, before), before, [], 0.90)
    assert "not checked" in leaf["detail"] and "inconclusive" not in leaf
    assert retention_tolerance("90%") == 0.90 and retention_tolerance("85%") == 0.85

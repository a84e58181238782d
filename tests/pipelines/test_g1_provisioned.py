"""G1's provisioned_read: the measured read against the declared rate, decided by the stock gate file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.config.inventory import StorageTarget
from harness.config.loader import load_gate
from harness.gates.evaluate import evaluate_gate
from harness.pipelines.g1.provisioned import read_of_provisioned

ROOT = Path(__file__).resolve().parents[2]
SPEC = load_gate(ROOT / "gates" / "G1.yaml")
MB = 1e6


def _target(enforce: bool = True) -> StorageTarget:
    data: dict[str, Any] = {"name": "vol", "path": "/var/tmp/x", "provisioned": {"read": "150 MB/s"}}
    if enforce:
        data["enforce"] = "blk-throttle"
    return StorageTarget.model_validate(data)


def _read(rounds: list[float], **extra: Any) -> dict[str, Any]:
    median = sorted(rounds)[len(rounds) // 2]
    return {"value": median, "text": f"{median / MB:.2f} MB/s", "evidence": ["fio.json"],
            "samples": {"kind": "percentile", "x": rounds, "q": 50}, **extra}


def _verdict(leaf: Any) -> tuple[str, str]:
    measured = {"nodes": {"n": {"storage": {"vol": {"fio": {"read_of_provisioned": leaf}}}}}}
    (check,) = [c for c in evaluate_gate(SPEC, measured, seed=0) if c.id == "provisioned_read"]
    return check.verdict.value, check.reason


def test_a_volume_delivering_its_declared_rate_passes() -> None:
    leaf = read_of_provisioned(_target(), _read([149.9 * MB, 150.0 * MB, 150.1 * MB, 149.95 * MB, 150.05 * MB]))
    assert leaf is not None and leaf["text"].startswith("100.0% of 150 MB/s")
    assert _verdict(leaf)[0] == "PASS"


def test_a_volume_delivering_much_less_than_declared_fails() -> None:
    leaf = read_of_provisioned(_target(), _read([100.0 * MB, 101.0 * MB, 99.5 * MB, 100.5 * MB, 100.2 * MB]))
    assert _verdict(leaf)[0] == "FAIL"


def test_a_throttled_read_above_its_cap_is_the_raw_device_and_never_passes() -> None:
    """The scenario that would PASS wrongly: the report says 'provisioned at 150 MB/s by blk-throttle'
    while the cap was not in effect and fio measured the raw disk (1.5 GB/s is 1000% of 150)."""
    leaf = read_of_provisioned(_target(), _read([1.5e9, 1.49e9, 1.51e9, 1.5e9, 1.52e9]))
    verdict, reason = _verdict(leaf)
    assert verdict == "INCONCLUSIVE" and "cap was not in effect" in reason
    declared_only = read_of_provisioned(_target(enforce=False), _read([1.5e9, 1.49e9, 1.51e9, 1.5e9, 1.52e9]))
    assert _verdict(declared_only)[0] == "PASS"  # a volume sold at 150 MB/s may deliver more


def test_no_read_figure_is_not_run_and_a_wide_interval_is_not_a_pass() -> None:
    assert _verdict(read_of_provisioned(_target(), {"value": None, "detail": "fio did not run"}))[0] == "NOT_RUN"
    wide = read_of_provisioned(_target(), _read([60 * MB, 150 * MB, 140 * MB, 200 * MB, 90 * MB]))
    assert _verdict(wide)[0] in ("INCONCLUSIVE", "FAIL")
    assert read_of_provisioned(StorageTarget(name="t", path="/x"), _read([MB] * 5)) is None

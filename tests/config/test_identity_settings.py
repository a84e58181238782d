"""The output identity check's settings: the compared tokens (gate file ``compared_tokens``, output
identity checks only), validated with the file, line and field named; default 16. The old sample
size (profile ``load.identity_sample``) is gone: every measured request is compared."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.config.loader import load_gate, load_profile
from harness.errors import InputError
from harness.gates.fingerprint import workload_fingerprint
from harness.paths import gates_dir

ROOT = Path(__file__).resolve().parents[2]


def _profile(tmp_path: Path, **load: object) -> Path:
    data = yaml.safe_load((ROOT / "profiles" / "demo.yaml").read_text())
    data.setdefault("load", {}).update(load)
    p = tmp_path / "p.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def _gate(tmp_path: Path, check_id: str, **extra: object) -> Path:
    data = yaml.safe_load((gates_dir() / "G3.yaml").read_text())
    for c in data["checks"]:
        c.pop("compared_tokens", None)
        if c["id"] == check_id:
            c.update(extra)
    p = tmp_path / "G3.yaml"
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def test_the_default_is_16_tokens_and_the_sample_size_is_gone(tmp_path: Path) -> None:
    g3 = load_gate(gates_dir() / "G3.yaml")
    assert g3.check("output_identity").compared_tokens == 16
    # every request is compared now: a profile still naming a sample size is told so, not ignored
    with pytest.raises(InputError, match=r"identity_sample") as exc:
        load_profile(_profile(tmp_path, identity_sample=32))
    assert "p.yaml" in str(exc.value)


@pytest.mark.parametrize(("check_id", "extra", "match"), [
    ("output_identity", {"compared_tokens": 0}, "compared_tokens"),
    ("output_identity", {"compared_tokens": "16 tokens"}, "compared_tokens"),
    ("throughput_gain", {"compared_tokens": 16}, "compared_tokens applies only"),
    ("output_identity", {"compared_token": 16}, "compared_token"),  # a typo: extra="forbid"
])
def test_compared_tokens_is_validated(tmp_path: Path, check_id: str, extra: dict[str, object], match: str) -> None:
    with pytest.raises(InputError, match=match) as exc:
        load_gate(_gate(tmp_path, check_id, **extra))
    assert "G3.yaml" in str(exc.value)


def test_the_compared_tokens_are_not_part_of_the_workload_fingerprint(tmp_path: Path) -> None:
    a = load_profile(_profile(tmp_path))
    arm = a.candidate
    assert not any("identity" in k for k in workload_fingerprint(a, arm=arm))
    c = load_profile(_profile(tmp_path, repetitions=a.load.repetitions + 1))
    assert workload_fingerprint(c, arm=arm) != workload_fingerprint(a, arm=arm)

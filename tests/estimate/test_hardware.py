"""Issue 15 item 3, accelerator presets: every preset carries its public source; a part with no
published peak (or no part at all) gets no invented figure: the estimate says it needs the user's
figure and predicts nothing until given one."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.loader import load_profile
from harness.estimate import ACCELERATORS, EstimateInputs, estimate_profile, find_accelerator
from harness.estimate.loader import geometry_for_profile

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", sorted(ACCELERATORS))
def test_every_preset_names_its_source(name: str) -> None:
    acc = ACCELERATORS[name]
    assert len(acc.source) > 30 and acc.memory_bytes and acc.memory_bytes > 0
    # a stand-in peak says so, with the direction of the bound
    assert (acc.stand_in is None) or ("upper bound" in acc.stand_in and "--peak-tflops" in acc.stand_in)


def test_aliases_as_vendor_tools_spell_them() -> None:
    assert find_accelerator("AMD Instinct MI308X") is ACCELERATORS["mi308x"]
    assert find_accelerator("Ascend910B3") is ACCELERATORS["ascend910b"]
    assert find_accelerator("NVIDIA H100 80GB HBM3") is ACCELERATORS["h100"]
    assert find_accelerator("Gaudi3") is None


def test_unknown_part_needs_the_users_figure() -> None:
    profile = load_profile(ROOT / "profiles" / "moe-480b-tp8.yaml")
    geom = geometry_for_profile(profile)
    bw = {"baseline": 3e9, "candidate": 5e9}
    est = estimate_profile(profile, EstimateInputs(geometry=geom, accelerator=None, read_bw=bw))
    d = est.as_dict()
    assert est.engine is None
    assert any("--peak-tflops" in n for n in d["notes"])
    assert "arms" not in d and "break_even_bw" not in d  # nothing predicted from an invented peak
    # KV sizes need no accelerator
    assert d["kv"]["per_token"] == 253_952
    given = estimate_profile(profile, EstimateInputs(geometry=geom, accelerator=None, peak_flops=500e12,
                                                     read_bw=bw)).as_dict()
    assert given["break_even_bw"] > 0
    assert given["arms"]["candidate"]["points"]["8"]["ttft_s"] < given["arms"]["baseline"]["points"]["8"]["ttft_s"]

"""Configuration models: defaults, derived values, secrets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.cli.main import run
from harness.config import load_gate, load_inventory, load_profile
from harness.config.profile import GEOMETRY_PRESETS, KVGeometry

ROOT = Path(__file__).resolve().parents[2]


def test_kv_bytes_per_token_matches_context_example() -> None:
    # 62 layers x 8 KV heads x 128 x 2 bytes x 2 (K and V) = 253,952 B per token
    assert GEOMETRY_PRESETS["moe-480b"].bytes_per_token == 253_952
    # 128K tokens is about 31 GiB for one sequence
    assert round(253_952 * 131072 / 2**30) == 31


def test_mla_geometry_uses_one_latent_per_layer() -> None:
    assert KVGeometry(layers=61, latent_dim=576, dtype_bytes=2).bytes_per_token == 61 * 576 * 2


def test_inventory_defaults_are_inherited() -> None:
    inv = load_inventory(ROOT / "inventory" / "mi308x-8gpu.example.yaml")
    node = inv.node("node1")
    assert inv.setting(node, "user") == "root"
    assert inv.setting(node, "port") == 22
    assert inv.setting(node, "accept_new_host_keys") is False  # never trust on first use by default
    assert node.accelerators is not None and node.accelerators.memory == 192e9
    fx = node.target("fx100")
    assert fx is not None and fx.capacity == 14e12 and fx.raid == "raid0" and not fx.allow_destructive
    assert node.network[0].speed == 200e9


def test_profile_values_in_base_units() -> None:
    prof = load_profile(ROOT / "profiles" / "moe-480b-tp8.yaml")
    assert prof.load.concurrency == [8, 16, 32]
    assert prof.probes.checkpoint is not None and prof.probes.checkpoint.size == 65.6e9
    assert prof.soak.duration == 72 * 3600
    assert prof.arm("recompute").offload is False


def test_g3_reference_thresholds() -> None:
    g3 = load_gate(ROOT / "gates" / "G3.yaml")
    assert g3.check("ttft_p50_reduction").threshold_value == pytest.approx(0.25)
    assert g3.check("ttft_p50_reduction").severity == "blocker"
    assert g3.check("ttft_p50_reduction").statistic.kind == "interval"
    assert g3.check("throughput_gain").threshold_value == pytest.approx(0.29)
    assert g3.check("throughput_gain_plausible").severity == "advisory"
    assert g3.check("throughput_gain_plausible").threshold_value == pytest.approx(0.40)
    assert g3.check("read_bandwidth").threshold_value == 5e9


def test_show_masks_secrets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inv = tmp_path / "inv.yaml"
    inv.write_text("cluster: c\ndefaults: {passphrase: hunter2-secret}\nnodes:\n  - {name: a, host: h}\n")
    assert run(["show", "inventory", str(inv), "--json"]) == 0
    out = capsys.readouterr().out
    assert "hunter2-secret" not in out
    data = json.loads(out)
    assert data["defaults"]["passphrase"] == "**********"
    assert data["nodes"][0]["roles"] == ["server", "client"]


def test_unknown_command_part_is_not_a_pass(capsys: pytest.CaptureFixture[str]) -> None:
    code = run(["--version"])
    assert code == 0
    assert "kvgate 0.1.0" in capsys.readouterr().out


def test_the_128k_profile_fits_the_model_context_and_one_token_more_does_not(tmp_path: Path) -> None:
    from harness.errors import KvgateError
    from harness.load.workloads import build_workload

    src = ROOT / "profiles" / "long-context-128k.yaml"
    prof = load_profile(src)
    assert prof.model.max_model_len == 131072
    assert prof.load.longest_request_tokens() == 131072
    # what the profile promises is what the workload builds (the 16-word long-doc question included)
    wl = build_workload("long-doc", {"num_docs": 1, "doc_len": prof.load.input_len, "num_queries": 1,
                                     "output_len": prof.load.output_len})
    assert wl.measured[0].input_tokens + prof.load.output_len == 131072
    bad = tmp_path / "bad.yaml"
    bad.write_text(src.read_text().replace("input_len: 130992", "input_len: 130993"))
    with pytest.raises(KvgateError, match=r"load.input_len 130993: .* needs 131073 tokens .* over model.max_model_len "
                                          r"131072"):
        load_profile(bad)
    assert load_profile(ROOT / "profiles" / "demo.yaml").load.longest_request_tokens() == 4096 + 16 + 16

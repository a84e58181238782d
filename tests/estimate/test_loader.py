"""Which geometry a profile gets: --model-config > model.config_json (relative to the profile) >
the estimator preset > the profile's own geometry; bad config files are located input errors."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harness.config.loader import load_profile
from harness.config.profile import GEOMETRY_PRESETS
from harness.errors import InputError
from harness.estimate.loader import geometry_for_profile, read_model_config
from harness.estimate.presets import PRESET_CONFIGS, preset_geometry

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "tests" / "data" / "models"

PROFILE = """\
name: p
model: {name: m, preset: tiny%s}
engine: {kind: sim, extra_args: [--kv-cache-dtype, fp8]}
arms: [{name: baseline, offload: false}, {name: candidate, storage: t}]
"""


@pytest.mark.parametrize("name", sorted(PRESET_CONFIGS))
def test_estimator_presets_match_the_profile_presets(name: str) -> None:
    assert preset_geometry(name).bytes_per_token == GEOMETRY_PRESETS[name].bytes_per_token


def test_config_json_relative_to_the_profile(tmp_path: Path) -> None:
    shutil.copy(MODELS / "llama-3-8b.json", tmp_path / "config.json")
    (tmp_path / "p.yaml").write_text(PROFILE % ", config_json: config.json")
    profile = load_profile(tmp_path / "p.yaml")
    g = geometry_for_profile(profile, profile_path=tmp_path / "p.yaml")
    assert g.bytes_per_token == 131_072 // 2  # the profile's --kv-cache-dtype fp8
    # --model-config wins over the profile's file
    g = geometry_for_profile(profile, profile_path=tmp_path / "p.yaml", model_config=MODELS / "deepseek-v3.json")
    assert g.attention == "mla"
    # without a config: the preset (tiny), fp8 as well
    (tmp_path / "q.yaml").write_text(PROFILE % "")
    assert geometry_for_profile(load_profile(tmp_path / "q.yaml")).bytes_per_token == 2048 // 2


@pytest.mark.parametrize(("text", "needle"), [
    ("[1, 2]", "expected a JSON object"),
    ("{not json", "not a JSON document"),
    ('{"num_hidden_layers": 2, "hidden_size": 8}', "num_attention_heads"),
    ('{"num_hidden_layers": 2, "hidden_size": 8, "num_attention_heads": 2, "torch_dtype": "int3"}', "int3"),
])
def test_bad_config_is_a_located_input_error(tmp_path: Path, text: str, needle: str) -> None:
    bad = tmp_path / "config.json"
    bad.write_text(text)
    (tmp_path / "p.yaml").write_text(PROFILE % "")
    with pytest.raises(InputError) as info:
        geometry_for_profile(load_profile(tmp_path / "p.yaml"), model_config=bad)
    assert str(bad) in str(info.value) and needle in str(info.value)


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read"):
        read_model_config(tmp_path / "nope.json")

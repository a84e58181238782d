"""The estimator's only I/O: read a model's config.json, and pick the geometry of a profile.

Order: ``--model-config FILE`` > the profile's ``model.config_json`` (relative to the profile
file) > the estimator preset named by ``model.preset`` > the profile's own ``geometry`` (KV bytes
only: no parameter count, so no FLOPs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from harness.config.profile import Profile
from harness.errors import InputError
from harness.estimate.geometry import ModelGeometry
from harness.estimate.modelconfig import ModelConfigError, geometry_from_config
from harness.estimate.presets import PRESET_CONFIGS, preset_geometry

MAX_CONFIG_BYTES = 4 * 2**20


def read_model_config(path: Path) -> dict[str, Any]:
    """The parsed JSON object of a config.json; InputError names the file and what is wrong."""
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            raise InputError(f"{path}: larger than 4 MiB; not a model config.json")
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"{path}: cannot read the model config: {exc.strerror or exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not a JSON document: {exc}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object (a model's config.json), got {type(data).__name__}")
    return data


def kv_cache_dtype(profile: Profile) -> str:
    extra = profile.engine.extra_args
    for i, a in enumerate(extra):
        if a == "--kv-cache-dtype" and i + 1 < len(extra):
            return extra[i + 1]
        if a.startswith("--kv-cache-dtype="):
            return a.split("=", 1)[1]
    return "auto"


def geometry_for_profile(profile: Profile, *, profile_path: Optional[Path] = None,
                         model_config: Optional[Path] = None) -> ModelGeometry:
    dtype = kv_cache_dtype(profile)
    path = model_config
    if path is None and profile.model.config_json:
        path = Path(profile.model.config_json)
        if not path.is_absolute() and profile_path is not None:
            path = profile_path.parent / path
    try:
        if path is not None:
            return geometry_from_config(read_model_config(path), name=profile.model.name, kv_cache_dtype=dtype,
                                        source=str(path))
        if profile.model.preset and profile.model.preset in PRESET_CONFIGS:
            return preset_geometry(profile.model.preset, kv_cache_dtype=dtype)
    except ModelConfigError as exc:
        raise InputError(f"{path or 'preset ' + str(profile.model.preset)}: {exc}") from None
    g = profile.model.kv_geometry
    if g.latent_dim is not None:
        return ModelGeometry(profile.model.name, g.layers, "mla", kv_dtype_bytes=g.dtype_bytes,
                             kv_lora_rank=g.latent_dim, source="profile geometry (MLA latent; no parameter count)")
    return ModelGeometry(profile.model.name, g.layers, "standard", kv_heads=g.kv_heads, head_dim=g.head_dim,
                         kv_dtype_bytes=g.dtype_bytes, source="profile geometry (no parameter count)")

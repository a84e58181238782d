"""LMCache's configuration for an arm, written as the YAML file ``LMCACHE_CONFIG_FILE`` names,
and the ``--kv-transfer-config`` that makes vLLM load the connector.

Keys and units follow ``lmcache/v1/config.py``: sizes in GB, ``local_disk`` as a ``file://`` URL.
Values are written as JSON scalars (valid YAML), one flat key per line, ``extra_config`` nested
one level: the form LMCache reads and the emulator's stdlib reader accepts.
"""

from __future__ import annotations

import json
from typing import Optional

from harness.config.profile import LMCacheSettings
from harness.platforms import get_platform
from harness.platforms.ascend910b import (  # noqa: F401  (re-exported)
    ASCEND_BUILTIN_CONNECTOR,
    ASCEND_DYNAMIC_CONNECTOR,
    ascend_connector_for,
)
from harness.platforms.base import LMCACHE_CONNECTOR as _LMCACHE_CONNECTOR

# the connectors are the platforms' (harness/platforms); these names stay importable from here
LMCACHE_CONNECTOR = dict(_LMCACHE_CONNECTOR)


def kv_transfer_config(platform: str, *, ascend_connector: str = "dynamic") -> dict[str, str]:
    """vLLM's ``--kv-transfer-config`` on ``platform`` (the connector choice matters where it has several)."""
    return get_platform(platform).kv_transfer_config(ascend_connector)


def kv_transfer_config_json(config: dict[str, str]) -> str:
    return json.dumps(config, separators=(",", ":"))


def _scalar(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return json.dumps(value)  # keep "100.0": LMCache reads a float
    return json.dumps(value)


def lmcache_config(settings: LMCacheSettings, *, local_disk_dir: Optional[str]) -> dict[str, object]:
    """The config as a dict (only keys set for the arm, plus the disk tier when it has storage)."""
    cfg: dict[str, object] = {"chunk_size": settings.chunk_size, "local_cpu": settings.local_cpu}
    # written even without the CPU tier, as LMCache's disk-tier example does: the evidence then shows
    # the value in force (LMCache's default is 5 GB)
    cfg["max_local_cpu_size"] = float(settings.max_local_cpu_size)
    if local_disk_dir is not None:
        cfg["local_disk"] = "file://" + local_disk_dir.rstrip("/") + "/"
        cfg["max_local_disk_size"] = float(settings.max_local_disk_size)
    for key in (
        "remote_url",
        "remote_serde",
        "save_unfull_chunk",
        "enable_async_loading",
        "use_gds",
        "gds_path",
        "cache_policy",
    ):
        value = getattr(settings, key)
        if value is not None:
            cfg[key] = value
    if settings.extra_config:
        cfg["extra_config"] = dict(settings.extra_config)
    return cfg


def render_yaml(config: dict[str, object], *, header: str = "") -> str:
    lines = [f"# {line}" for line in header.splitlines()] if header else []
    for key, value in config.items():
        if isinstance(value, dict):
            lines.append(f"{key}:")
            for k, v in value.items():
                if isinstance(v, (dict, list)):
                    raise ValueError(f"extra_config.{k}: nested values are not supported by LMCache's config")
                lines.append(f"  {k}: {_scalar(v)}")
        else:
            lines.append(f"{key}: {_scalar(value)}")
    return "\n".join(lines) + "\n"

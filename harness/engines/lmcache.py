"""LMCache's configuration for an arm, written as the YAML file ``LMCACHE_CONFIG_FILE`` names,
and the ``--kv-transfer-config`` that makes vLLM load the connector.

Keys and units follow ``lmcache/v1/config.py``: sizes in GB of 1024**3 bytes (GiB: LMCache
multiplies by ``1024**3``, ``local_disk_backend.py``), ``local_disk`` as a ``file://`` URL.
Values are written as JSON scalars (valid YAML), one flat key per line, ``extra_config`` nested
one level: the form LMCache reads and the emulator's stdlib reader accepts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
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


def kv_transfer_config_json(config: Mapping[str, object]) -> str:
    return json.dumps(config, separators=(",", ":"))


def _scalar(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return json.dumps(value)  # keep "100.0": LMCache reads a float
    return json.dumps(value)


def saves_on_first_rank_only(settings: LMCacheSettings, *, mla: bool) -> bool:
    """Does in-process LMCache store an MLA model's KV on the first TP rank alone? lmcache 0.5.6
    ``cache_engine.py``: ``save_only_first_rank = extra_config.save_only_first_rank (default: use_mla)
    and use_mla``; the other ranks are passive (``_is_passive``: their ``store`` returns at once), since
    every rank holds the same latent."""
    return mla and bool(settings.extra_config.get("save_only_first_rank", True))


def disk_ranks(settings: LMCacheSettings, *, tp: int, mla: bool) -> int:
    """Among how many ranks an instance's disk tier is divided: each rank that stores applies
    ``max_local_disk_size`` to itself, so the declared size is split among them (one for MLA)."""
    return 1 if saves_on_first_rank_only(settings, mla=mla) else max(tp, 1)


def lmcache_config(settings: LMCacheSettings, *, local_disk_dir: Optional[str], ranks: int = 1, mla: bool = False,
                   gds_dir: Optional[str] = None, gds_backend: Optional[str] = None) -> dict[str, object]:
    """The config as a dict (only keys set for the arm, plus the disk tier when it has storage).

    In-process LMCache runs one engine per TP rank and applies ``max_local_disk_size`` to each rank
    that stores, so the arm's per-instance size is divided among them (8 x 12000 GB would overrun a
    14 TB array): all ``ranks``, or the first alone for an MLA model (``disk_ranks``), whose choice is
    written out (``save_only_first_rank``) so the file shows it and the emulator follows it.
    With GDS (``gds_dir``) the tier is LMCache's GDS backend alone: LMCache creates a LocalDiskBackend
    whenever ``local_disk`` is set too, which would write every chunk twice and be read first."""
    cfg: dict[str, object] = {"chunk_size": settings.chunk_size, "local_cpu": settings.local_cpu}
    # written even without the CPU tier, as LMCache's disk-tier example does: the evidence then shows
    # the value in force (LMCache's default is 5 GB)
    cfg["max_local_cpu_size"] = float(settings.max_local_cpu_size)
    if local_disk_dir is not None and gds_dir is None:
        cfg["local_disk"] = "file://" + local_disk_dir.rstrip("/") + "/"
        # never rounded to 0
        cfg["max_local_disk_size"] = float(settings.max_local_disk_size) / disk_ranks(settings, tp=ranks, mla=mla)
    if gds_dir is not None:
        cfg["gds_path"] = gds_dir
        cfg["use_gds"] = settings.use_gds if settings.use_gds is not None else True
        cfg["gds_backend"] = gds_backend or settings.gds_backend or "cufile"
    for key in (
        "remote_url",
        "remote_serde",
        "save_unfull_chunk",
        "enable_async_loading",
        "cache_policy",
    ):
        value = getattr(settings, key)
        if value is not None:
            cfg[key] = value
    extra = dict(settings.extra_config)
    if mla:
        extra.setdefault("save_only_first_rank", True)  # LMCache's own default for MLA, made visible
    if extra:
        cfg["extra_config"] = extra
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


def mp_kv_transfer_config(host: str, port: int) -> dict[str, object]:
    """vLLM's connector to an LMCache multiprocess server (lmcache 0.5 ``LMCacheMPConnector``)."""
    return {
        "kv_connector": "LMCacheMPConnector",
        "kv_role": "kv_both",
        "kv_connector_extra_config": {"lmcache.mp.host": f"tcp://{host}", "lmcache.mp.port": port},
    }


MP_TRANSFER_FLAGS = ("--supported-transfer-mode", "auto")  # lmcache 0.5 (0.4 takes --transfer-mode)


def mp_server_argv(settings: LMCacheSettings, *, host: str, port: int, http_port: int,
                   l2_dir: Optional[str], l2_capacity_gb: Optional[float] = None,
                   transfer_flags: Sequence[str] = MP_TRANSFER_FLAGS) -> list[str]:
    """``lmcache server`` for one instance. L2 ``fs_native`` keeps its files on the storage target
    and finds them again after a restart (unlike the in-process local-disk backend, whose index
    lives in the engine's memory), so a cold restore may restart or clear this server's L1.

    ``l2_capacity_gb`` is this server's share of the arm's L2 (default: all of it). Each server's
    LRU counts only what it stored itself (lmcache 0.5.6 ``native_connector_l2_adapter.py``: usage
    from its own store and delete completions), so servers sharing one directory each get a share
    and together never hold more than the declared size."""
    argv = [settings.mp_command, "server", "--host", host, "--port", str(port),
            "--http-host", host, "--http-port", str(http_port),  # its /metrics is served there too
            "--chunk-size", str(settings.chunk_size), "--l1-size-gb", _scalar(float(settings.mp_l1_size_gb)),
            "--eviction-policy", "LRU", *transfer_flags]
    if l2_dir is not None:
        adapter: dict[str, object] = {"type": "fs_native", "base_path": l2_dir}
        odirect = settings.extra_config.get("use_odirect")
        if odirect is not None:
            adapter["use_odirect"] = bool(odirect)
        capacity = float(settings.max_local_disk_size if l2_capacity_gb is None else l2_capacity_gb)
        if capacity > 0:
            adapter["max_capacity_gb"] = capacity  # GiB: LMCache counts 1024**3
            # without an eviction block fs_native only accounts the capacity and never evicts
            # (lmcache 0.5.6 l2_adapters/fs_native_l2_adapter.py, config.py _parse_eviction_config)
            adapter["eviction"] = {"eviction_policy": "LRU"}
        argv += ["--l2-adapter", json.dumps(adapter, separators=(",", ":"))]
    return argv

"""Which engine environment variables are kvgate's, and which a controller's environment must not
pass on to an engine.

Two rules, both about the environment an engine starts with:
- *Managed* variables are set by kvgate itself from the plan (directories it empties, the LMCache
  file it writes, the devices it assigns, the hash seed every process must share). A profile's
  ``engine.env`` may not set one: a profile value would replace kvgate's, and kvgate acts on its
  own value (it empties ``PROMETHEUS_MULTIPROC_DIR`` at every start). ``LMCACHE_<KEY>`` for a key
  kvgate writes into LMCache's file is managed too: LMCache reads the variable over the file
  (``lmcache/v1/config.py``, 0.5.6), so it would move the tier under test behind the plan's back.
- *Scrubbed* variables never reach an engine from the environment it would inherit (the
  controller's, or the node's login shell): ``LMCACHE_*``, ``VLLM_*``, ``KVGATE_SIM_*``, ``HF_*``,
  the device-visibility variables and the managed ones. Only what the plan declares is set.
"""

from __future__ import annotations

from harness.platforms import PLATFORMS

# the keys harness/engines/lmcache.py writes into LMCACHE_CONFIG_FILE (LMCache reads LMCACHE_<KEY> over them)
LMCACHE_FILE_KEYS = ("chunk_size", "local_cpu", "max_local_cpu_size", "local_disk", "max_local_disk_size",
                     "remote_url", "remote_serde", "save_unfull_chunk", "enable_async_loading", "use_gds",
                     "gds_path", "gds_backend", "cache_policy", "extra_config")

# device visibility beyond the platforms' own device_vars: ROCm's runtime applies ROCR_VISIBLE_DEVICES
# before HIP_VISIBLE_DEVICES, so an inherited one remaps kvgate's indices
VISIBILITY_VARS = ("ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES",
                   "ASCEND_RT_VISIBLE_DEVICES", "ASCEND_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL")

_WHY: dict[str, str] = {
    "PROMETHEUS_MULTIPROC_DIR": "kvgate creates and empties its own directory per instance",
    "LMCACHE_CONFIG_FILE": "kvgate writes LMCache's file from the arm's lmcache settings",
    "PYTHONHASHSEED": "every engine process and LMCache server must hash chunk keys alike",
    "VLLM_SERVER_DEV_MODE": "set engine.dev_mode instead",
    "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES": "kvgate sets it for Ray on Ascend",
    "KVGATE_MARKER": "kvgate marks the processes it starts with it",
    "LMCACHE_MP_TRANSFER_MODE": "set arms[].lmcache.mp_transfer_mode (kvgate refuses a mode that cannot cross nodes "
                                "where the engine does)",
}

SCRUB_PREFIXES = ("LMCACHE_", "VLLM_", "KVGATE_SIM_", "HF_")


def device_vars() -> frozenset[str]:
    return frozenset(VISIBILITY_VARS) | frozenset(v for p in PLATFORMS.values() for v in p.device_vars)


def managed_reason(name: str) -> str | None:
    """Why kvgate owns ``name`` (None: a profile may set it)."""
    if name in _WHY:
        return _WHY[name]
    if name in device_vars():
        return "kvgate assigns devices per instance itself (instance i gets devices i*tp .. i*tp+tp-1)"
    if name.startswith("LMCACHE_") and name[len("LMCACHE_"):].lower() in LMCACHE_FILE_KEYS:
        return f"it overrides {name[len('LMCACHE_'):].lower()!r} of LMCache's file: set it in arms[].lmcache"
    return None


def managed_vars() -> frozenset[str]:
    """The managed names that do not depend on a pattern (for listing and scrubbing)."""
    lm = frozenset("LMCACHE_" + k.upper() for k in LMCACHE_FILE_KEYS)
    return frozenset(_WHY) | device_vars() | lm


def scrubbed(name: str) -> bool:
    """Must an inherited ``name`` be removed from an engine's environment (unless the plan sets it)?"""
    return name != "KVGATE_MARKER" and (name.startswith(SCRUB_PREFIXES) or name in managed_vars())

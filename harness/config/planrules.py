"""Combinations of profile and platform that cannot work on a real engine, refused before any node
is touched. ``kvgate validate`` (through ``crosscheck.check_profile``), ``kvgate plan`` and the
engine planner (``harness/engines/planning.py``) all ask this module, so each refusal reads the
same wherever it is met. Each rule returns (field path, message); the caller adds file and line.

Sources (checked against the code, versions as named):
- LMCache-Ascend: ``NPUCacheContext.__init__`` raises ``NotImplementedError``, so the multiprocess
  server (``lmcache server`` + ``LMCacheMPConnector``) cannot run on Ascend NPUs through it; lmcache
  0.5.6 ships NPU support itself (``lmcache/v1/platform/devices/npu/``, absent from 0.5.5), so a
  profile whose ``engine.versions`` declares lmcache 0.5.6 or later may (the platform's
  ``lmcache_multiprocess_since``).
- lmcache 0.5.6 ``lmcache/v1/storage_backend/__init__.py``: a ``GdsBackend`` is created whenever
  ``gds_path`` is set and a ``LocalDiskBackend`` whenever ``local_disk`` is set, both at once.
- lmcache 0.5.6 ``v1/multiprocess/transfer_context/worker_transfer.py`` and
  ``platform/devices/*/__init__.py``: ``auto`` transfer is lmcache-driven (IPC/SHM, one node) on CUDA
  and NPU; only ``engine_driven`` copies through the server's socket (LMCache#4213).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Optional

from packaging.version import InvalidVersion, Version

from harness.config.profile import Arm, Profile
from harness.platforms import PLATFORMS

Problem = tuple[tuple[object, ...], str]

def multiprocess_on_ascend(arm_name: str, since: Optional[str] = "0.5.6", declared: Optional[str] = None) -> str:
    have = f"engine.versions declares lmcache {declared}" if declared else "engine.versions declares no lmcache"
    return (f"arm {arm_name!r}: LMCache multiprocess mode does not run on Ascend before lmcache {since} "
            f"(LMCache-Ascend's NPUCacheContext raises NotImplementedError; {have}): declare lmcache {since} "
            "or later in engine.versions, or use lmcache.mode: in_process with no CPU tier (local_cpu: false) "
            "and engine.dev_mode: true")


def multiprocess_refused(profile: Profile, platform: str) -> bool:
    """Can LMCache's multiprocess server not run on ``platform`` with the profile's declared LMCache?"""
    plat = PLATFORMS.get(platform)
    if plat is None or plat.lmcache_multiprocess:
        return False
    since, versions = plat.lmcache_multiprocess_since, profile.engine.versions
    if since is None or versions is None:
        return True
    try:
        return Version(versions.lmcache) < Version(since)
    except InvalidVersion:
        return True


def profile_problems(profile: Profile, platforms: Iterable[str] = ()) -> list[Problem]:
    """Every refusal for ``profile`` on nodes of ``platforms`` (the inventory's server platforms;
    none known: only the platform-independent rules)."""
    plats = list(platforms)
    return [(("arms", i, *loc), msg) for i, arm in enumerate(profile.arms)
            for loc, msg in arm_problems(profile, arm, plats)]


def arm_problems(profile: Profile, arm: Arm, platforms: Iterable[str] = ()) -> list[Problem]:
    """The refusals of one arm, located below the arm."""
    out: list[Problem] = []
    if not arm.offload:
        return out
    lm = arm.lmcache
    if lm.gds_on and profile.engine.kind == "sim":
        out.append((("lmcache", "use_gds" if lm.use_gds else "gds_path"),
                    f"arm {arm.name!r}: the KV emulator has no GDS backend (it would measure recompute): use "
                    "engine.kind vllm, or a disk tier without GDS"))
    if lm.mode == "multiprocess":
        refused = [p for p in platforms if multiprocess_refused(profile, p)]
        if refused:
            versions = profile.engine.versions
            out.append((("lmcache", "mode"), multiprocess_on_ascend(
                arm.name, PLATFORMS[refused[0]].lmcache_multiprocess_since, versions.lmcache if versions else None)))
        if profile.model.nodes_per_instance > 1 and lm.mp_bind == "loopback":
            out.append((("lmcache", "mp_bind"), (
                f"arm {arm.name!r}: LMCache multiprocess mode with model.nodes_per_instance "
                f"{profile.model.nodes_per_instance}: its server binds 127.0.0.1 on the head node, which the "
                "workers on the other nodes cannot reach. Set lmcache.mp_bind: node (the head's inventory "
                "address) with lmcache.mp_transfer_mode: engine_driven, or use lmcache.mode: in_process")))
        if lm.mp_bind == "node" and lm.mp_transfer_mode != "engine_driven":
            out.append((("lmcache", "mp_transfer_mode"), mp_bind_node_transfer(arm.name, lm.mp_transfer_mode)))
    return out


def mp_bind_node_transfer(arm_name: str, mode: str) -> str:
    return (f"arm {arm_name!r}: lmcache.mp_bind: node with mp_transfer_mode {mode}: on GPUs the workers then move KV "
            "by lmcache-driven transfer (CUDA IPC or shared memory, lmcache 0.5.6 "
            "multiprocess/transfer_context/worker_transfer.py), which reaches a server on the worker's own node "
            "only (LMCache#4213: vLLM and LMCache 'on the same GPU node'), so the workers on the other nodes "
            "could not store or restore. Set lmcache.mp_transfer_mode: engine_driven (the workers copy through "
            "the server's socket), or use lmcache.mode: in_process")

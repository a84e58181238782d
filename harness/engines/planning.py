"""What every engine kind decides the same way: the arm, ports, devices, directories, the LMCache
file and the environment. Pure: nothing here touches a node."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Optional, Union

from harness.config.inventory import Node
from harness.config.managedenv import managed_reason
from harness.config.paths import fs_url_path
from harness.config.planrules import arm_problems
from harness.config.profile import Arm, Profile
from harness.engines.base import EnginePlan, RayClusterPlan, SidecarPlan
from harness.engines.connectorwiring import WiringRow, planned_row
from harness.engines.gdscapacity import gds_bytes_bound, target_of
from harness.engines.lmcache import (
    kv_transfer_config,
    kv_transfer_config_json,
    lmcache_config,
    mp_kv_transfer_config,
    mp_server_argv,
    render_yaml,
)
from harness.engines.platforms import device_env, devices_for
from harness.errors import InputError
from harness.platforms import get_platform

PROMETHEUS_SUBDIR = "prometheus-multiproc"  # under the instance directory; emptied at every start
LMCACHE_GIB = 1024**3  # LMCache sizes every tier in GB of 1024**3 bytes (local_disk_backend.py, l2 adapters)
KV_SUBDIR = "kvgate-kv"  # under a storage target: <target>/kvgate-kv/<profile>/<arm>/
_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(text: str) -> str:
    return _SAFE.sub("-", text).strip("-") or "x"


@dataclass(frozen=True)
class Common:
    arm: Arm
    platform: str
    port: int
    devices: tuple[int, ...]
    instance_dir: str
    name: str
    served: str
    model_ref: str
    kv_dirs: tuple[str, ...]
    files: dict[str, str]
    env: dict[str, str]
    kv_transfer: Optional[str]  # the --kv-transfer-config JSON, None for a recompute arm
    notes: tuple[str, ...]
    external_host: str
    sidecar: Optional[SidecarPlan] = None
    lmcache_mode: str = "none"


def engine_plan(kind: str, node: Node, profile: Profile, c: Common, instance_index: int, *, argv: list[str],
                env: dict[str, str], notes: tuple[str, ...], python: str, devices: tuple[int, ...], platform: str,
                sidecar: Optional[SidecarPlan], ray: Optional[RayClusterPlan] = None) -> EnginePlan:
    """The plan of one instance from what every kind decides alike (``c``) and what its kind decided:
    the command line, environment, notes, and how it sits on the node's devices."""
    engine = profile.engine
    return EnginePlan(
        kind=kind, node=node.name, profile=profile.name, arm=c.arm.name, instance_index=instance_index,
        argv=tuple(argv), env=env, files=c.files, host=engine.host, port=c.port, external_host=c.external_host,
        devices=devices, platform=platform, instance_dir=c.instance_dir, name=c.name, served_model_name=c.served,
        kv_dirs=c.kv_dirs, ready_timeout=float(engine.ready_timeout), python=python, offload=c.arm.offload,
        cpu_tier=c.arm.offload and c.arm.lmcache.local_cpu and c.lmcache_mode == "in_process",
        ray=ray, notes=notes, sidecar=sidecar, lmcache_mode=c.lmcache_mode, reset_endpoint=engine.dev_mode,
    )


def resolve_arm(profile: Profile, arm: Union[Arm, str]) -> Arm:
    if isinstance(arm, Arm):
        return arm
    try:
        return profile.arm(arm)
    except KeyError as exc:
        raise InputError(str(exc.args[0])) from None


def kv_dir_for(node: Node, profile: Profile, arm: Arm) -> Optional[str]:
    """The LMCache disk directory of ``arm`` on ``node`` (on its storage target), or None."""
    if not arm.offload or arm.storage is None:
        return None
    target = node.target(arm.storage)
    if target is None:
        known = ", ".join(t.name for t in node.storage) or "none"
        raise InputError(
            f"arm {arm.name!r} uses storage target {arm.storage!r}, which node {node.name} does not "
            f"have (its targets: {known})"
        )
    return posixpath.join(target.path, KV_SUBDIR, safe_name(profile.name), safe_name(arm.name))


def instance_kv_dir(node: Node, profile: Profile, arm: Arm, instance_index: int) -> Optional[str]:
    """The arm's directory for one instance: its own subdirectory when a node runs several, since
    neither LMCache's in-process disk backend (index in engine memory) nor separate multiprocess
    servers share one directory safely (same file names, separate indexes and eviction)."""
    disk = kv_dir_for(node, profile, arm)
    if disk is None or profile.model.instances_per_node <= 1 or shares_tier(arm):
        return disk
    return posixpath.join(disk, f"instance-{instance_index}")


def gds_dir_for(arm: Arm, disk: Optional[str], instance_index: int, instances: int) -> Optional[str]:
    """The GDS directory of one instance (None: GDS off): the arm's ``gds_path`` (one subdirectory per
    instance when a node runs several), else its directory on the storage target."""
    if not arm.lmcache.gds_on:
        return None
    if arm.lmcache.gds_path is None:
        if disk is None:
            raise InputError(f"arm {arm.name!r}: use_gds needs a storage target or lmcache.gds_path")
        return disk
    return arm.lmcache.gds_path if instances <= 1 else posixpath.join(arm.lmcache.gds_path,
                                                                       f"instance-{instance_index}")


def is_mla(profile: Profile) -> bool:
    """Is the model's attention MLA (one latent per layer, the same on every TP rank)?"""
    return profile.model.kv_geometry.latent_dim is not None


def l2_share_gb(profile: Profile, arm: Arm) -> float:
    """One LMCache server's ``max_capacity_gb``: the arm's L2 size, split evenly among the node's
    servers when they share one directory (each counts and evicts only what it stored)."""
    size = float(arm.lmcache.max_local_disk_size)
    return size / profile.model.instances_per_node if shares_tier(arm) else size


def shares_tier(arm: Arm) -> bool:
    """Do the instances of a node share ``arm``'s storage tier? Only where the integration really
    shares: LMCache multiprocess servers with one fs_native L2 directory (files found by name)."""
    return arm.offload and arm.lmcache.mode == "multiprocess" and arm.lmcache.mp_shared_l2


def plan_common(
    node: Node,
    profile: Profile,
    arm_ref: Union[Arm, str],
    instance_index: int,
    platform: Optional[str],
    workdir: str,
    *,
    ascend_connector: Optional[str] = None,
) -> Common:
    arm = resolve_arm(profile, arm_ref)
    platform = platform or node.platform
    model = profile.model
    engine = profile.engine
    port = _instance_port(profile, instance_index)
    count = node.accelerators.count if node.accelerators is not None else None
    devices = devices_for(platform, instance_index, model.tensor_parallel_size, count, node=node.name)
    _refuse_managed_env(profile, arm, platform)
    instance_dir = posixpath.join(
        workdir, "engines", safe_name(profile.name), f"{safe_name(arm.name)}-{instance_index}"
    )
    env, notes = _platform_env(platform, devices)
    capacity_note = _check_capacity(node, profile, arm)
    if capacity_note:
        notes.append(capacity_note)
    mode = arm.lmcache.mode if arm.offload else "none"
    if arm.offload and mode == "multiprocess":
        kv = _multiprocess_wiring(node, profile, arm, instance_index, platform)
    elif arm.offload:
        kv = _in_process_wiring(node, profile, arm, instance_index, platform, instance_dir, ascend_connector)
    else:
        kv = _KvWiring(notes=(f"arm {arm.name!r} has no KV offload: vLLM runs without a KV connector (recompute)",))
    env.update(kv.env)
    if kv.seeded_hash:
        env.setdefault("PYTHONHASHSEED", "0")
    if engine.dev_mode:
        env["VLLM_SERVER_DEV_MODE"] = "1"
    env.update(engine.env)
    external = node.host if engine.host in ("0.0.0.0", "::") else engine.host
    return Common(
        arm=arm,
        platform=platform,
        port=port,
        devices=devices,
        instance_dir=instance_dir,
        name=f"engine-{safe_name(arm.name)}-{instance_index}",
        served=model.served_name or model.name,
        model_ref=model.path or model.name,
        kv_dirs=kv.kv_dirs,
        files=kv.files,
        env=env,
        kv_transfer=kv.kv_transfer,
        notes=(*notes, *kv.notes),
        external_host=external,
        sidecar=kv.sidecar,
        lmcache_mode=mode,
    )


@dataclass(frozen=True)
class _KvWiring:
    """How an instance reaches its KV tier: directories, config files, environment, the
    --kv-transfer-config JSON, the multiprocess server, and what the plan says about them."""

    kv_dirs: tuple[str, ...] = ()
    files: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    kv_transfer: Optional[str] = None
    notes: tuple[str, ...] = ()
    sidecar: Optional[SidecarPlan] = None
    # chunk keys must agree across processes and instances (R4 sharing), so hashing is seeded
    seeded_hash: bool = False


def _instance_port(profile: Profile, instance_index: int) -> int:
    instances = profile.model.instances_per_node
    if instance_index < 0 or instance_index >= instances:
        raise InputError(
            f"instance index {instance_index} is outside 0..{instances - 1} "
            f"(model.instances_per_node = {instances})"
        )
    port = profile.engine.port + instance_index
    if port > 65535:
        raise InputError(f"engine.port {profile.engine.port} + instance {instance_index} is past 65535")
    return port


def _refuse_managed_env(profile: Profile, arm: Arm, platform: str) -> None:
    for key in sorted(profile.engine.env):  # the profile loader refused these; a profile built in code is checked too
        why = managed_reason(key)
        if why is not None:
            raise InputError(f"engine.env may not set {key}: kvgate manages it ({why})")
    for _, message in arm_problems(profile, arm, [platform]):
        raise InputError(message)


def _platform_env(platform: str, devices: tuple[int, ...]) -> tuple[dict[str, str], list[str]]:
    """The device variables and the platform's engine environment, with the notes they need."""
    env: dict[str, str] = device_env(platform, devices)
    notes: list[str] = []
    env.update(get_platform(platform).engine_env)
    if "HIP_VISIBLE_DEVICES" in get_platform(platform).device_vars:
        # ROCm applies ROCR_VISIBLE_DEVICES first and numbers HIP devices within it: an inherited one
        # would remap kvgate's indices. Cleared (engines/cleanenv.py), never honoured: recorded here.
        notes.append("ROCR_VISIBLE_DEVICES: an inherited value is cleared at start, so HIP_VISIBLE_DEVICES="
                     f"{env.get('HIP_VISIBLE_DEVICES', '')} names the node's physical devices")
    return env, notes


def _multiprocess_wiring(node: Node, profile: Profile, arm: Arm, instance_index: int, platform: str) -> _KvWiring:
    """LMCache multiprocess mode: an `lmcache server` per instance, vLLM's LMCacheMPConnector to it."""
    disk = instance_kv_dir(node, profile, arm, instance_index)
    row, wiring_note = _proven(profile, "multiprocess", platform)
    share = l2_share_gb(profile, arm)
    sidecar = _mp_sidecar(arm, disk, instance_index, f"lmcache-{safe_name(arm.name)}-{instance_index}",
                          node_host=node.host, l2_capacity_gb=share,
                          sharers=profile.model.instances_per_node if shares_tier(arm) else 1, row=row)
    notes = [f"LMCache multiprocess mode: `lmcache server` on {sidecar.host}:{sidecar.port} (HTTP API "
             f"{sidecar.http_port}, /metrics {sidecar.metrics_port}), L1 {arm.lmcache.mp_l1_size_gb} GB, "
             f"L2 {arm.lmcache.mp_l2}{' in ' + disk if disk and arm.lmcache.mp_l2 != 'none' else ''}"]
    if shares_tier(arm) and disk and arm.lmcache.mp_l2 != "none":
        notes.append(f"L2 shared by the node's {profile.model.instances_per_node} LMCache servers: each evicts "
                     f"only what it stored, so each gets {share:g} GiB of the arm's "
                     f"{arm.lmcache.max_local_disk_size:g} GiB (max_capacity_gb)")
    env: dict[str, str] = {}
    if arm.lmcache.mp_transfer_mode != "auto":
        env["LMCACHE_MP_TRANSFER_MODE"] = arm.lmcache.mp_transfer_mode  # read by lmcache's worker transfer
    kv = mp_kv_transfer_config(sidecar.host, sidecar.port)
    if row is not None:
        kv = row.kv_transfer_config(kv["kv_connector_extra_config"])  # type: ignore[arg-type]
    return _KvWiring(kv_dirs=(disk,) if disk else (), sidecar=sidecar, seeded_hash=True,
                     notes=(*notes, *wiring_note), env=env, kv_transfer=kv_transfer_config_json(kv))


def _proven(profile: Profile, mode: str, platform: str) -> tuple[Optional[WiringRow], tuple[str, ...]]:
    """The declared versions' row (harness.engines.connectorwiring) and its note; the emulator has none."""
    if profile.engine.kind != "vllm":
        return None, ()
    row, note = planned_row(profile.engine.versions, mode, platform)
    return row, (note,)


def _in_process_wiring(node: Node, profile: Profile, arm: Arm, instance_index: int, platform: str,
                       instance_dir: str, ascend_connector: Optional[str]) -> _KvWiring:
    """LMCache in the engine's processes: its YAML file, GDS or local disk, an fs:// remote tier."""
    disk = instance_kv_dir(node, profile, arm, instance_index)
    gds = gds_dir_for(arm, disk, instance_index, profile.model.instances_per_node)
    kv_dirs: tuple[str, ...] = (gds,) if gds else (disk,) if disk else ()
    notes: list[str] = []
    remote = arm.lmcache.remote_url
    if remote and remote.startswith("fs://"):
        # LMCache's fs connector writes its files there: created, marked and cleaned like a disk tier
        kv_dirs += (fs_url_path(remote).rstrip("/") or "/",)
    cfg = lmcache_config(arm.lmcache, local_disk_dir=disk, ranks=profile.model.tensor_parallel_size,
                         mla=is_mla(profile), gds_dir=gds,
                         gds_backend=arm.lmcache.gds_backend or get_platform(platform).gds_backend)
    if gds:
        notes.append(f"LMCache GDS backend ({cfg['gds_backend']}) in {gds}, no local-disk backend")
    yaml_path = posixpath.join(instance_dir, "lmcache.yaml")
    files = {yaml_path: render_yaml(
        cfg,
        header=f"kvgate: LMCache config of arm {arm.name!r}, profile "
        f"{profile.name!r}, node {node.name}, instance {instance_index}",
    )}
    env = {
        "LMCACHE_CONFIG_FILE": yaml_path,
        # in vLLM v1 LMCache's in-process metrics reach /metrics only through multi-process
        # Prometheus (its workers are other processes): one fresh directory per instance
        "PROMETHEUS_MULTIPROC_DIR": posixpath.join(instance_dir, PROMETHEUS_SUBDIR),
    }
    row, wiring_note = _proven(profile, "in_process", platform) if ascend_connector is None else (None, ())
    notes += wiring_note
    if row is not None:
        kv: dict[str, object] = row.kv_transfer_config()
    else:
        choice, note = get_platform(platform).connector(node.software, ascend_connector)
        if note:
            notes.append(note)
        kv = dict(kv_transfer_config(platform, ascend_connector=choice))
    return _KvWiring(kv_dirs=kv_dirs, files=files, env=env, notes=tuple(notes), seeded_hash=True,
                     kv_transfer=kv_transfer_config_json(kv))


def _mp_sidecar(arm: Arm, disk: Optional[str], instance_index: int, name: str, *, node_host: str,
                l2_capacity_gb: float, sharers: int = 1, row: Optional[WiringRow] = None) -> SidecarPlan:
    """The LMCache multiprocess server of one instance: its own ports, its own L2 directory. It binds
    loopback (only its node connects) unless ``mp_bind: node``: then the node's inventory address,
    which the Ray workers of an engine spanning nodes reach (they connect to the same address)."""
    base = arm.lmcache.mp_port + 2 * instance_index
    if base + 1 > 65535:
        raise InputError(f"arm {arm.name!r}: lmcache.mp_port {arm.lmcache.mp_port} + 2 x instance "
                         f"{instance_index} + 1 is past 65535")
    if arm.lmcache.mp_l2 == "fs_native" and disk is None:
        raise InputError(f"arm {arm.name!r}: lmcache.mp_l2 is fs_native but the arm names no storage target")
    host = node_host if arm.lmcache.mp_bind == "node" else "127.0.0.1"
    argv = mp_server_argv(arm.lmcache, host=host, port=base, http_port=base + 1,
                          l2_dir=disk if arm.lmcache.mp_l2 == "fs_native" else None, l2_capacity_gb=l2_capacity_gb,
                          **({"transfer_flags": row.server_flags} if row is not None else {}))
    clear = {"l1_clear_path": row.l1_clear[0], "l1_clear_body": row.l1_clear[1]} if row is not None else {}
    # lmcache 0.5 serves its Prometheus /metrics on the HTTP API port (its standalone exporter is off)
    return SidecarPlan(name=name, argv=tuple(argv), host=host, port=base, http_port=base + 1,
                       metrics_port=base + 1, env={"PYTHONHASHSEED": "0"}, l2_sharers=sharers, **clear)


def _check_unbounded_capacity(node: Node, profile: Profile, arm: Arm) -> str:
    """A GDS tier and an fs:// remote tier are unbounded (engines/gdscapacity.py): what the arm can
    store in it must fit the target its directory is on. Returns the plan's note on it."""
    if arm.lmcache.gds_on:
        where = arm.lmcache.gds_path or kv_dir_for(node, profile, arm) or ""
        backend, copies = "GDS backend", profile.model.instances_per_node  # a directory per instance
        head = "LMCache's GDS backend has no size bound or eviction (lmcache.max_local_disk_size does not apply)"
    else:
        where = fs_url_path(arm.lmcache.remote_url or "").rstrip("/") or "/"
        backend, copies = "fs:// remote connector", 1  # one directory, chunk files named alike by every instance
        head = "LMCache's fs:// remote connector has no size bound or eviction"
    target = target_of(node, where)
    bound = gds_bytes_bound(profile)
    if bound is None:
        return f"{head}: a trace's KV volume is not known before it runs, so it is not counted against capacity"
    total = bound * copies
    if target is None or target.capacity is None:
        return (f"{head}: the arm stores up to {total:.4g} bytes in {where}, on no storage target with a declared "
                "capacity: not counted")
    if total > float(target.capacity):
        raise InputError(
            f"arm {arm.name!r}: LMCache's {backend} keeps every chunk the sweep stores (no size bound, no "
            f"eviction): up to {bound:.4g} bytes (populate + measured requests x the longest request x KV bytes "
            f"per token) x {copies} instance(s) = {total:.4g} bytes exceeds storage target {target.name!r} on "
            f"{node.name} ({float(target.capacity):.4g} bytes declared). Lower load.prompts_per_point or the "
            "request lengths, or use the local-disk tier, which evicts")
    return (f"{head}: the arm stores up to {total:.4g} bytes in {where}, within target {target.name!r} "
            f"({float(target.capacity):.4g} bytes declared)")


def _check_capacity(node: Node, profile: Profile, arm: Arm) -> Optional[str]:
    """The disk tier of every instance on the node must fit the target's declared capacity; returns a
    note for the plan where there is something to say."""
    lm = arm.lmcache
    if arm.offload and lm.mode == "in_process" and (lm.gds_on or (lm.remote_url or "").startswith("fs://")):
        return _check_unbounded_capacity(node, profile, arm)
    if not arm.offload or arm.storage is None:
        return None
    target = node.target(arm.storage)
    if target is None or target.capacity is None:
        return None
    copies = 1 if shares_tier(arm) else profile.model.instances_per_node  # a shared tier is sized once
    total = arm.lmcache.max_local_disk_size * LMCACHE_GIB * copies
    if total > float(target.capacity):
        raise InputError(
            f"arm {arm.name!r}: lmcache.max_local_disk_size {arm.lmcache.max_local_disk_size:g} GiB x "
            f"{copies} instance(s) = {total:.4g} bytes exceeds storage target {target.name!r} on "
            f"{node.name} ({float(target.capacity):.4g} bytes = {float(target.capacity) / LMCACHE_GIB:.4g} GiB "
            "declared; LMCache counts 1024**3 bytes per GB)"
        )
    return None

"""What every engine kind decides the same way: the arm, ports, devices, directories, the LMCache
file and the environment. Pure: nothing here touches a node."""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Optional, Union

from harness.config.inventory import Node
from harness.config.profile import Arm, Profile
from harness.engines.lmcache import (
    kv_transfer_config,
    kv_transfer_config_json,
    lmcache_config,
    render_yaml,
)
from harness.engines.platforms import device_env, devices_for, managed_vars
from harness.errors import InputError
from harness.platforms import get_platform

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
    if instance_index < 0 or instance_index >= model.instances_per_node:
        raise InputError(
            f"instance index {instance_index} is outside 0..{model.instances_per_node - 1} "
            f"(model.instances_per_node = {model.instances_per_node})"
        )
    port = engine.port + instance_index
    if port > 65535:
        raise InputError(f"engine.port {engine.port} + instance {instance_index} is past 65535")
    count = node.accelerators.count if node.accelerators is not None else None
    devices = devices_for(platform, instance_index, model.tensor_parallel_size, count, node=node.name)
    clash = sorted(managed_vars() & set(engine.env))
    if clash:
        raise InputError(
            f"engine.env sets {', '.join(clash)}: kvgate assigns devices per instance itself "
            "(instance i gets devices i*tp .. i*tp+tp-1)"
        )
    instance_dir = posixpath.join(
        workdir, "engines", safe_name(profile.name), f"{safe_name(arm.name)}-{instance_index}"
    )
    name = f"engine-{safe_name(arm.name)}-{instance_index}"
    served = model.served_name or model.name
    env: dict[str, str] = device_env(platform, devices)
    files: dict[str, str] = {}
    kv_dirs: tuple[str, ...] = ()
    kv_transfer: Optional[str] = None
    notes: list[str] = []
    env.update(get_platform(platform).engine_env)
    if arm.offload:
        disk = kv_dir_for(node, profile, arm)
        kv_dirs = (disk,) if disk else ()
        remote = arm.lmcache.remote_url
        if remote and remote.startswith("file://"):
            kv_dirs += (remote[len("file://") :].rstrip("/") or "/",)
        cfg = lmcache_config(arm.lmcache, local_disk_dir=disk)
        yaml_path = posixpath.join(instance_dir, "lmcache.yaml")
        files[yaml_path] = render_yaml(
            cfg,
            header=f"kvgate: LMCache config of arm {arm.name!r}, profile "
            f"{profile.name!r}, node {node.name}, instance {instance_index}",
        )
        env["LMCACHE_CONFIG_FILE"] = yaml_path
        # chunk keys must agree across processes and instances (R4 sharing), so hashing is seeded
        env.setdefault("PYTHONHASHSEED", "0")
        choice, note = get_platform(platform).connector(node.software, ascend_connector)
        if note:
            notes.append(note)
        kv_transfer = kv_transfer_config_json(kv_transfer_config(platform, ascend_connector=choice))
    else:
        notes.append(f"arm {arm.name!r} has no KV offload: vLLM runs without a KV connector (recompute)")
    env.update(engine.env)
    external = node.host if engine.host in ("0.0.0.0", "::") else engine.host
    return Common(
        arm=arm,
        platform=platform,
        port=port,
        devices=devices,
        instance_dir=instance_dir,
        name=name,
        served=served,
        model_ref=model.path or model.name,
        kv_dirs=kv_dirs,
        files=files,
        env=env,
        kv_transfer=kv_transfer,
        notes=tuple(notes),
        external_host=external,
    )

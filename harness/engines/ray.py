"""A Ray cluster for one vLLM engine spanning several nodes: kvgate starts the head on the
engine's node and a worker on each peer, and stops them all afterwards (vLLM's own multi-node
backend; kvgate does not invent one)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from harness.config.inventory import Node
from harness.engines.base import EngineStartError, RayClusterPlan
from harness.engines.cleanenv import clean_argv
from harness.engines.platforms import device_env, devices_for
from harness.remote.base import Executor

RAY_PORT = 6379


def plan_ray_cluster(
    head: Node,
    peers: Sequence[Node],
    *,
    platform: str,
    devices_per_node: int,
    port: int = RAY_PORT,
    ray: str = "ray",
) -> RayClusterPlan:
    """Commands for ``ray start --head`` on ``head`` and ``ray start --address`` on each peer; every
    node exposes devices 0..devices_per_node-1 to Ray."""
    address = f"{head.host}:{port}"
    commands: list[tuple[str, tuple[str, ...]]] = [
        (
            head.name,
            (
                ray,
                "start",
                "--head",
                "--port",
                str(port),
                "--node-ip-address",
                head.host,
                "--disable-usage-stats",
            ),
        ),
    ]
    for peer in peers:
        commands.append(
            (
                peer.name,
                (ray, "start", "--address", address, "--node-ip-address", peer.host, "--disable-usage-stats"),
            )
        )
    env = []
    for node in (head, *peers):
        count = node.accelerators.count if node.accelerators is not None else None
        devs = devices_for(platform, 0, devices_per_node, count, node=node.name)
        items = {**device_env(platform, devs), **interface_env(platform, node)}
        env.append((node.name, tuple(sorted(items.items()))))
    return RayClusterPlan(
        head_node=head.name,
        head_address=address,
        commands=tuple(commands),
        env=tuple(env),
        stop_argv=(ray, "stop", "--force"),
    )


# What a Ray worker's LMCache must see as the head's engine does. vLLM 0.32 copies LMCACHE_* and
# PYTHONHASHSEED to its Ray workers (vllm/ray/ray_env.py DEFAULT_ENV_VAR_PREFIXES, DEFAULT_EXTRA_ENV_VARS),
# older versions do not, and none copies PROMETHEUS_MULTIPROC_DIR; a worker without them runs
# LMCache's defaults (5 GB CPU tier, no disk, a random hash seed, so chunk keys differ between
# ranks). The raylet's environment is what its workers inherit, whatever the vLLM version: it is set
# at `ray start`.
FORWARDED = ("PYTHONHASHSEED", "PROMETHEUS_MULTIPROC_DIR")


def forwarded_env(engine_env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in engine_env.items() if k.startswith("LMCACHE_") or k in FORWARDED}


def with_engine_env(plan: RayClusterPlan, engine_env: Mapping[str, str]) -> RayClusterPlan:
    """``plan`` whose ``ray start`` on every node also carries the engine's LMCache settings."""
    extra = forwarded_env(engine_env)
    if not extra:
        return plan
    env = tuple((node, tuple(sorted({**dict(items), **extra}.items()))) for node, items in plan.env)
    return dataclasses.replace(plan, env=env)


def interface_env(platform: str, node: Node) -> dict[str, str]:
    """What the collective libraries of ``node`` need before ``ray start`` (and in the engine):
    its address and the interface carrying the traffic (the inventory's first network interface).
    Without them NCCL/RCCL, Gloo and HCCL pick an interface themselves, often the wrong one."""
    ifname = node.network[0].interface if node.network else None
    env: dict[str, str] = {"VLLM_HOST_IP": node.host}
    if ifname:
        env["GLOO_SOCKET_IFNAME"] = ifname
    if platform == "ascend910b":
        env["HCCL_IF_IP"] = node.host
        # Ray must not rewrite ASCEND_RT_VISIBLE_DEVICES itself (vllm-ascend's multi-node guide)
        env["RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES"] = "1"
        if ifname:
            env["TP_SOCKET_IFNAME"] = ifname
    elif ifname:
        env["NCCL_SOCKET_IFNAME"] = ifname
    return env


def start_ray_cluster(
    plan: RayClusterPlan, executors: Mapping[str, Executor], *, timeout: float = 120.0
) -> None:
    """Run the head's and then each worker's ``ray start``; on a failure, stop what was started."""
    started: list[str] = []
    for node, argv in plan.commands:
        ex = executors.get(node)
        if ex is None:
            stop_ray_cluster(plan, executors, only=started)
            raise EngineStartError(f"no executor for Ray node {node}", node=node, command=argv)
        env = plan.env_for(node)
        # Ray's workers inherit the raylet's environment, which is this command's: cleaned as an engine's
        res = ex.run(clean_argv(argv, env), env=env, timeout=timeout, check=False)
        if res.exit_code != 0:
            stop_ray_cluster(plan, executors, only=started)
            raise EngineStartError(
                f"ray start failed (exit {res.exit_code})",
                node=node,
                command=argv,
                log_tail=res.stdout + res.stderr,
            )
        started.append(node)


def stop_ray_cluster(
    plan: RayClusterPlan, executors: Mapping[str, Executor], *, only: Sequence[str] | None = None
) -> dict[str, int]:
    """``ray stop`` on every node (workers first); returns each node's exit code, never raises."""
    codes: dict[str, int] = {}
    for node in reversed(plan.nodes()):
        if only is not None and node not in only:
            continue
        ex = executors.get(node)
        if ex is None:
            continue
        try:
            codes[node] = ex.run(list(plan.stop_argv), timeout=120.0, check=False).exit_code
        except Exception:  # noqa: BLE001 - stopping is best effort; the caller records the codes
            codes[node] = -1
    return codes

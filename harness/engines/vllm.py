"""The vLLM adapter: ``vllm serve`` with LMCache, for ROCm (MI308X), Ascend 910B (vllm-ascend)
and CUDA; several instances per node; one engine across nodes through Ray.

Command (the documented forms of vLLM and LMCache)::

    vllm serve MODEL --host H --port P --served-model-name NAME --tensor-parallel-size TP
        [--max-model-len N] [--pipeline-parallel-size NODES --distributed-executor-backend ray]
        [--kv-transfer-config '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}']
        [profile.engine.extra_args...]

with ``LMCACHE_CONFIG_FILE`` naming the arm's LMCache YAML; a recompute arm has no connector.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional, Union

from harness.config.inventory import Node
from harness.config.profile import Arm, Profile
from harness.engines.base import DEFAULT_WORKDIR, EngineError, EngineInstance, EnginePlan, EvictResult
from harness.engines.lifecycle import EngineLifecycle, http_request, restart
from harness.engines.planning import plan_common
from harness.engines.ray import plan_ray_cluster
from harness.engines.secretargs import move_secret_args
from harness.errors import InputError


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
        c = plan_common(
            node, profile, arm, instance_index, platform, workdir, ascend_connector=self.ascend_connector
        )
        model = profile.model
        engine = profile.engine
        argv: list[str] = [
            engine.command or "vllm",
            "serve",
            c.model_ref,
            "--host",
            engine.host,
            "--port",
            str(c.port),
            "--served-model-name",
            c.served,
            "--tensor-parallel-size",
            str(model.tensor_parallel_size),
        ]
        if model.max_model_len is not None:
            argv += ["--max-model-len", str(model.max_model_len)]
        ray = None
        notes = list(c.notes)
        if model.nodes_per_instance > 1:
            if len(peers) != model.nodes_per_instance - 1:
                raise InputError(
                    f"model.nodes_per_instance = {model.nodes_per_instance}: the engine on {node.name} "
                    f"needs {model.nodes_per_instance - 1} peer node(s), {len(peers)} given"
                )
            if model.instances_per_node != 1:
                raise InputError(
                    "an engine spanning nodes (nodes_per_instance > 1) takes whole nodes: "
                    "instances_per_node must be 1"
                )
            argv += [
                "--pipeline-parallel-size",
                str(model.nodes_per_instance),
                "--distributed-executor-backend",
                "ray",
            ]
            ray = plan_ray_cluster(
                node, peers, platform=c.platform, devices_per_node=model.tensor_parallel_size
            )
            notes.append(
                f"multi-node: TP {model.tensor_parallel_size} per node x PP {model.nodes_per_instance} "
                f"nodes over Ray ({', '.join([node.name, *(p.name for p in peers)])})"
            )
        if c.kv_transfer is not None:
            argv += ["--kv-transfer-config", c.kv_transfer]
        extra, secret_env, secret_notes = move_secret_args(engine.extra_args)  # secrets by env (i17)
        argv += extra
        return EnginePlan(
            kind=self.kind,
            node=node.name,
            profile=profile.name,
            arm=c.arm.name,
            instance_index=instance_index,
            argv=tuple(argv),
            env={**c.env, **secret_env},
            files=c.files,
            host=engine.host,
            port=c.port,
            external_host=c.external_host,
            devices=c.devices,
            platform=c.platform,
            instance_dir=c.instance_dir,
            name=c.name,
            served_model_name=c.served,
            kv_dirs=c.kv_dirs,
            ready_timeout=float(engine.ready_timeout),
            python=python,
            offload=c.arm.offload,
            cpu_tier=c.arm.offload and c.arm.lmcache.local_cpu,
            ray=ray,
            notes=(*notes, *secret_notes),
        )

    def evict(self, instance: EngineInstance) -> EvictResult:
        """Drop the KV held inside the engine, keeping LMCache's disk and remote tiers.

        Without an LMCache CPU tier, vLLM's ``POST /reset_prefix_cache`` empties the HBM prefix cache
        in place (served when the profile sets ``VLLM_SERVER_DEV_MODE=1``): seconds instead of a
        model reload. Otherwise (a CPU tier lives in the engine's memory, or the endpoint is not
        served) the engine is restarted."""
        if not instance.plan.cpu_tier:
            try:
                status, _ = http_request(
                    instance, "/reset_prefix_cache", method="POST", body=b"", timeout=120.0
                )
            except EngineError:
                status = 0
            if status == 200:
                return EvictResult(
                    instance,
                    "reset_prefix_cache",
                    "POST /reset_prefix_cache: HBM prefix cache emptied in place; disk tier kept",
                )
        new = restart(self, instance)
        return EvictResult(
            new, "restart", "engine restarted: HBM prefix cache and LMCache CPU tier emptied; disk tier kept"
        )

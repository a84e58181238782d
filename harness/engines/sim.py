"""Engine kind ``sim``: kvgate's KV emulator behind the same protocol as vLLM.

The emulator takes vLLM's command line plus its own compute flags from ``profile.engine.sim``
and ``--kv-bytes-per-token`` from the model geometry. On a node it runs from the agent zipapp
(``agent_path``); without one it runs ``python -m harness.sim.cli`` from this source tree (a
node that shares this machine's filesystem: localhost, loopback SSH)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Optional, Union

from harness.config.inventory import Node
from harness.config.profile import Arm, Profile
from harness.engines.base import DEFAULT_WORKDIR, EngineError, EngineInstance, EnginePlan, EvictResult, SidecarPlan
from harness.engines.lifecycle import EngineLifecycle, evict_like_vllm, verified_reset
from harness.engines.planning import Common, engine_plan, plan_common
from harness.engines.secretargs import move_secret_args
from harness.errors import InputError

SOURCE_ROOT = str(Path(__file__).resolve().parents[2])

# The emulator's one fault injection a run may take from the controller's environment (tests and
# demos of "the storage got slower" with an unchanged profile, e.g. the nightly regression test).
# Engines otherwise get no inherited KVGATE_SIM_* (engines/cleanenv.py): this one is copied into
# the plan, so it is declared in plan.json and named in the plan's notes.
FAULT_ENV = "KVGATE_SIM_TIER_READ_DELAY_MS"


def fault_injection() -> tuple[dict[str, str], tuple[str, ...]]:
    value = os.environ.get(FAULT_ENV, "").strip()
    if not value:
        return {}, ()
    return {FAULT_ENV: value}, (f"fault injection from the controller's environment: {FAULT_ENV}={value} "
                                "slows every emulated tier read",)


def _program(python: str, agent_path: Optional[str], verb: str) -> tuple[list[str], dict[str, str]]:
    """The emulator's program and verb: from the agent zipapp on a node, else from this source tree
    (which the environment's PYTHONPATH names)."""
    if agent_path:
        return [python, "-I", "-S", agent_path, "sim", verb], {}
    return [python, "-m", "harness.sim.cli", verb], {"PYTHONPATH": SOURCE_ROOT}


def _serve_args(profile: Profile, c: Common) -> list[str]:
    """vLLM's serve arguments the emulator takes, then its own compute and KV-size flags."""
    model = profile.model
    sim = profile.engine.sim
    argv = [c.model_ref, "--host", profile.engine.host, "--port", str(c.port), "--served-model-name", c.served,
            "--tensor-parallel-size", str(model.tensor_parallel_size)]
    if model.max_model_len is not None:
        argv += ["--max-model-len", str(model.max_model_len)]
    if c.kv_transfer is not None:
        argv += ["--kv-transfer-config", c.kv_transfer]
    return argv + [
        "--prefill-tokens-per-s", repr(sim.prefill_tokens_per_s),
        "--decode-tokens-per-s", repr(sim.decode_tokens_per_s),
        "--max-batch", str(sim.max_batch),
        "--hbm-tokens", str(sim.hbm_tokens),
        "--kv-bytes-per-token", str(model.kv_geometry.bytes_per_token),
        "--kv-scale", repr(sim.kv_scale),
    ]


class SimEngine(EngineLifecycle):
    kind = "sim"

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
        if profile.model.nodes_per_instance > 1:
            raise InputError("the KV emulator runs one instance per node: model.nodes_per_instance must be 1")
        # the emulator has no accelerators to pin: plan it as a cpu instance whatever the node is
        c = plan_common(node, profile, arm, instance_index, "cpu", workdir)
        engine = profile.engine
        env = dict(c.env)
        head, head_env = _program(python, agent_path, "serve")
        env.update(head_env)
        extra, secret_env, secret_notes = move_secret_args(engine.extra_args)  # secrets by env (i17)
        argv = [*head, *_serve_args(profile, c), *extra]
        env.update(secret_env)
        fault_env, fault_notes = fault_injection()
        env.update(fault_env)
        notes = (*c.notes, *secret_notes, *fault_notes,
                 "engine is kvgate's KV emulator: compute is emulated, storage I/O is real")
        sidecar = None
        if c.sidecar is not None:
            # the emulated `lmcache server`: the same command line after the program and its verb
            side_head, side_head_env = _program(python, agent_path, "lmcache-server")
            side_env = {**c.sidecar.env, **fault_env, **side_head_env}
            sidecar = SidecarPlan(name=c.sidecar.name, argv=(*side_head, *c.sidecar.argv[2:]), host=c.sidecar.host,
                                  port=c.sidecar.port, http_port=c.sidecar.http_port,
                                  metrics_port=c.sidecar.metrics_port, env=side_env, l2_sharers=c.sidecar.l2_sharers)
        return engine_plan(self.kind, node, profile, c, instance_index, argv=argv, env=env, notes=notes,
                           python=python, devices=(), platform=platform or node.platform, sidecar=sidecar)

    def evict(self, instance: EngineInstance) -> EvictResult:
        """Drop the emulated HBM and CPU tiers through the admin endpoint (the disk tier stays),
        verified as on vLLM: a probe prompt re-sent after it finds 0 prefix-cache hits. In LMCache
        multiprocess mode the emulator is evicted as vLLM is (prefix-cache reset or restart, then
        the LMCache server's L1 cleared through its API): its L1 lives in that server."""
        if instance.plan.sidecar is not None:
            return evict_like_vllm(self, instance)
        verified, step = verified_reset(self, instance, "/kvgate/evict")
        if not verified:
            raise EngineError(f"emulator evict not effective: {step}", node=instance.node,
                              command=instance.plan.argv)
        detail = f"dropped in-process tiers: {step['answer']}; disk tier kept"
        return EvictResult(instance, "admin-endpoint", detail, (step,), verified)

"""The per-arm storage steps G2 and G3 both run: fio and the registered one-node probes on an arm's
storage target, and an arm's ``cold_restore`` subtree (moved out of G2 so G3 need not import G2)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from harness.engines.platforms import engine_block_size
from harness.pipelines.shared.coldrestore import cold_restore_measured, expectation
from harness.pipelines.shared.context import GateRun
from harness.pipelines.shared.loadpoint import point_workload
from harness.pipelines.shared.probesteps import fio_step, probe_step
from harness.pipelines.shared.restoreprobe import kv_bytes_per_token, restore_bandwidth_measured
from harness.pipelines.shared.sweep import probe_key
from harness.pipelines.shared.sweepdata import Sweep, measurement
from harness.probes.registry import PROBES


def arm_storage_probes(run: GateRun, arm_name: str, prefix: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """fio, checkpoint write and model load on an arm's storage target (measured, measurements)."""
    arm = run.profile.arm(arm_name)
    measured: dict[str, Any] = {}
    charts: dict[str, Any] = {}
    target_name = arm.storage
    if target_name is None:
        why = f"arm {arm.name!r} has no storage target ({'no offload' if not arm.offload else 'CPU/remote tier'})"
        measured["fio"] = {"seq_read_bw": measurement(None, detail=why)}
        return measured, charts
    node = run.node_with_target(target_name)
    target = node.target(target_name)
    assert target is not None
    fio = fio_step(run, node, target, key=f"fio/{prefix}/{node.name}/{target.name}")
    measured["fio"] = fio
    charts["fio"] = {node.name: {target.name: {k: v.get("value") for k, v in fio.items()}}}
    for kind in PROBES.values():  # every registered one-node probe the profile asks for, on this target
        spec = kind.spec_of(run.profile)
        if kind.run is None or spec is None or not kind.runs_on(spec, target_name):
            continue
        got = probe_step(run, kind.name, node, target, f"{kind.name}/{prefix}")
        if got is not None:
            measured[kind.name] = {kind.metric: got[kind.metric]}
            if "chart" in got:
                charts[kind.chart_key] = {arm.name: got["chart"]}
    return measured, charts


def arm_cold_restore(run: GateRun, arm_name: str, sweep: Sweep,
                     storage_fio: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
    """The ``cold_restore`` subtree of an arm (harness.pipelines.shared.coldrestore); ``storage_fio``:
    the arm's target's ``fio.seq_read_bw`` leaf measured in this run, one of the storage figures a
    restore is held to (``restoreprobe.restore_bandwidth_measured``)."""
    arm = run.profile.arm(arm_name)
    workload = point_workload(run.profile)
    platform = next((n.platform for n in run.inventory.nodes_with_role("server")), "cpu")
    exp = expectation(workload.populate, workload.measure, arm.lmcache.chunk_size,
                      engine_block_size(run.profile, platform))
    out = cold_restore_measured(sweep, run.profile.load.concurrency, exp, offload=arm.offload)
    if arm.offload and run.profile.load.cold_restore:
        bpt, how = kv_bytes_per_token(run.profile)
        out["restore_bandwidth_ratio"] = restore_bandwidth_measured(
            sweep, run.profile.load.concurrency, run.gate_dir.step_done(probe_key(arm.name)), bpt, how,
            storage_fio=storage_fio)
    return out

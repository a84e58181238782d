"""Probe steps shared by the gates: fio on a target, checkpoint write, model load, each resumable
and recording its raw output as evidence. A failed probe is a recorded fault, never a figure."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from harness.config.inventory import Node, StorageTarget
from harness.errors import InfraError, InputError
from harness.pipelines.context import GateRun
from harness.pipelines.sweepdata import measurement
from harness.probes.checkpoint import CheckpointResult, run_checkpoint_probe
from harness.probes.fio_run import run_fio_probe
from harness.probes.measured import FIO_METRICS, checkpoint_leaf, fio_leaf, modelload_leaf
from harness.probes.modelload import ModelLoadResult, run_modelload_probe
from harness.progress import Progress


def fio_step(run: GateRun, node: Node, target: StorageTarget, *, job_sets: Optional[list[str]] = None,
             key: Optional[str] = None) -> dict[str, Any]:
    """fio on one target; returns ``{"seq_read_bw": leaf, "seq_write_bw": leaf}`` (leaves per the
    measured-results contract), from the state when the step already ran."""
    key = key or f"fio/{node.name}/{target.name}"
    done = run.gate_dir.step_done(key)
    if done is not None:
        return dict(done)
    sets = job_sets or [s for s in run.profile.probes.fio.job_sets if s in ("seq-read", "seq-write")] or ["seq-read"]
    out_dir = Path(run.gate_dir.evidence_path(f"fio/{node.name}/{target.name}"))
    with Progress(f"{run.gate} fio {node.name}/{target.name}", enabled=run.progress) as p:
        try:
            res = run_fio_probe(run.executor(node.name), target, run.profile.probes.fio, out_dir,
                                job_sets=sets, progress=p)
        except (InfraError, InputError) as exc:
            run.fault(f"{node.name}: fio on target {target.name} failed", exc)
            reason = f"fio did not run: {exc}"
            return {"seq_read_bw": measurement(None, detail=reason), "seq_write_bw": measurement(None, detail=reason)}
    run.gate_dir.record_command(node.name, shlex.split(res.command))
    out: dict[str, Any] = {}
    for metric in ("seq_read_bw", "seq_write_bw"):
        job_set, direction = FIO_METRICS[metric]
        leaf = fio_leaf(res, job_set, direction, run.path)
        if leaf is not None:
            out[metric] = leaf
    run.gate_dir.mark_step_done(key, out)
    return out


def _probe_step(run: GateRun, node: Node, target: StorageTarget, key: str, what: str, metric: str,
                probe: Callable[[Path], Any], describe: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
    """Run one probe (resumable); a probe that cannot run is a recorded fault, never a figure."""
    done = run.gate_dir.step_done(key)
    if done is not None:
        return dict(done)
    out_dir = Path(run.gate_dir.evidence_path(f"{key}/{node.name}/{target.name}"))
    with Progress(f"{run.gate} {what} {node.name}/{target.name}", enabled=run.progress):
        try:
            res = probe(out_dir)
        except (InfraError, InputError) as exc:
            run.fault(f"{node.name}: {what} on {target.name} failed", exc)
            return {metric: measurement(None, detail=f"the {what} probe did not run: {exc}")}
    out = describe(res)
    run.gate_dir.mark_step_done(key, out)
    return out


def checkpoint_step(run: GateRun, node: Node, target: StorageTarget, key: str) -> Optional[dict[str, Any]]:
    spec = run.profile.probes.checkpoint
    if spec is None:
        return None
    python = str(run.inventory.setting(node, "python"))

    def describe(res: CheckpointResult) -> dict[str, Any]:
        return {"write_bw": checkpoint_leaf(res, run.path),
                "chart": {"write_bw": res.write_bw_bytes, "bytes": res.total_bytes, "seconds": res.total_s}}

    return _probe_step(run, node, target, key, "checkpoint write", "write_bw",
                       lambda out: run_checkpoint_probe(run.executor(node.name), target, spec, out, python=python),
                       describe)


def modelload_step(run: GateRun, node: Node, target: StorageTarget, key: str) -> Optional[dict[str, Any]]:
    spec = run.profile.probes.modelload
    if spec is None:
        return None
    python = str(run.inventory.setting(node, "python"))
    source: Any = target if spec.synthetic_size is not None else (
        spec.directory if spec.directory and spec.directory.startswith("/")
        else f"{target.path.rstrip('/')}/{spec.directory or ''}")

    def describe(res: ModelLoadResult) -> dict[str, Any]:
        # A read that may include cached data is no storage figure: the leaf says so (NOT_RUN).
        return {"read_bw": modelload_leaf(res, run.path),
                "chart": {"read_bw": res.read_bw_bytes if not res.may_include_cached else None,
                          "bytes": res.total_bytes, "seconds": res.total_s}}

    return _probe_step(run, node, target, key, "model load", "read_bw",
                       lambda out: run_modelload_probe(run.executor(node.name), source, spec, out, python=python),
                       describe)

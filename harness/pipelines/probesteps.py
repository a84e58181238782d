"""Probe steps shared by the gates: fio on a target, checkpoint write, model load, each resumable
and recording its raw output as evidence. A failed probe is a recorded fault, never a figure."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from harness.config.inventory import Node, StorageTarget
from harness.errors import InfraError, InputError
from harness.pipelines.context import GateRun
from harness.pipelines.sweepdata import measurement
from harness.probes.checkpoint import CheckpointResult, run_checkpoint_probe
from harness.probes.fio_run import run_fio_probe
from harness.probes.modelload import ModelLoadResult, run_modelload_probe
from harness.progress import Progress


def _rel(run: GateRun, path: Path) -> str:
    try:
        return Path(path).resolve().relative_to(run.path.resolve()).as_posix()
    except ValueError:
        return str(path)


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
    evidence = [_rel(run, res.raw_output), _rel(run, res.jobfile)]
    run.gate_dir.record_command(node.name, ["sh", "-c", res.command])
    out: dict[str, Any] = {}
    for name, metric, attr in (("seq-read", "seq_read_bw", "read_bw_bytes"),
                               ("seq-write", "seq_write_bw", "write_bw_bytes")):
        js = res.job_sets.get(name)
        if js is None:
            continue
        value = getattr(js, attr)
        steady = js.steady_state.to_json() if js.steady_state else None
        if isinstance(steady, dict):
            state = "reached" if steady.get("steady") else f"not reached ({steady.get('reason') or 'see evidence'})"
        else:
            state = "not assessed"
        detail = f"fio {res.fio_version or ''} {res.engine}, direct=1; steady state {state}"
        out[metric] = measurement(value, f"{(value or 0) / 1e9:.3f} GB/s", detail=detail, evidence=evidence)
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
        return {"write_bw": measurement(res.write_bw_bytes, f"{res.write_gb_s:.3f} GB/s",
                                        detail=f"{res.total_bytes} B in {res.files} files by {res.writers} "
                                               f"writers, {res.total_s:.2f} s with fsync",
                                        evidence=[_rel(run, res.evidence)]),
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
        caveat = " (may include cached reads)" if res.may_include_cached else ""
        return {"read_bw": measurement(res.read_bw_bytes, f"{res.read_gb_s:.3f} GB/s{caveat}",
                                       detail=f"{res.total_bytes} B, {res.files} files, {res.readers} readers, "
                                              f"{res.total_s:.2f} s; {res.how}", evidence=[_rel(run, res.evidence)]),
                "chart": {"read_bw": res.read_bw_bytes, "bytes": res.total_bytes, "seconds": res.total_s}}

    return _probe_step(run, node, target, key, "model load", "read_bw",
                       lambda out: run_modelload_probe(run.executor(node.name), source, spec, out, python=python),
                       describe)

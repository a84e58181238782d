"""Probe steps shared by the gates: fio on a target, checkpoint write, model load, each resumable
and recording its raw output as evidence. A failed probe is a recorded fault, never a figure."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, Optional

from harness.config.inventory import Node, StorageTarget
from harness.errors import InfraError, InputError
from harness.pipelines.shared.context import GateRun
from harness.pipelines.shared.sweepdata import measurement
from harness.probes.backing import BackingNotResolved
from harness.probes.fio_rounds import MemoryBackedTarget, run_fio_rounds
from harness.probes.measured import FIO_METRICS, fio_leaf
from harness.probes.registry import get_probe, run_probe_on
from harness.progress import Progress
from harness.remote.scratch import remove_stale_dirs


def fio_step(run: GateRun, node: Node, target: StorageTarget, *, job_sets: Optional[list[str]] = None,
             key: Optional[str] = None) -> dict[str, Any]:
    """fio on one target under the gates' protocol (``harness.probes.fio_rounds``: preconditioned,
    drained, in rounds until steady state); returns ``{"seq_read_bw": leaf, "seq_write_bw": leaf}``
    (leaves per the measured-results contract), from the state when the step already ran. A
    memory-backed target raises ``MemoryBackedTarget``, one whose backing cannot be followed
    ``BackingNotResolved`` (exit 2)."""
    key = key or f"fio/{node.name}/{target.name}"
    done = run.gate_dir.step_done(key)
    if done is not None:
        return dict(done)
    sets = job_sets or [s for s in run.profile.probes.fio.job_sets if s in ("seq-read", "seq-write")] or ["seq-read"]
    out_dir = Path(run.gate_dir.evidence_path(f"fio/{node.name}/{target.name}"))
    with Progress(f"{run.gate} fio {node.name}/{target.name}", enabled=run.progress) as p:
        try:
            _remove_stale_scratch(run, node, target)
            res = run_fio_rounds(run.executor(node.name), target, run.profile.probes.fio, out_dir,
                                 job_sets=sets, progress=p, owner=run.campaign.id)
        except (MemoryBackedTarget, BackingNotResolved):
            raise  # exit 2 before any load runs on it: the target is wrong, not the node
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


def _remove_stale_scratch(run: GateRun, node: Node, target: StorageTarget) -> None:
    """Scratch directories this campaign left on the target when a run was killed (SIGKILL): removed
    by containment before the step runs again (``--resume``)."""
    if run.executor(node.name).run(["test", "-b", target.path], check=False).ok:
        return  # a raw device: no scratch directory on it (a path under /dev/ may be a directory)
    for removal in remove_stale_dirs(run.executor(node.name), target.path, "kvgate-fio-", run.campaign.id):
        run.gate_dir.record_removal(removal)
        run.notes.append(f"removed scratch left by an interrupted run: {removal.describe()}")


def probe_step(run: GateRun, name: str, node: Node, target: StorageTarget, key: str) -> Optional[dict[str, Any]]:
    """A registered one-node probe on ``target`` (resumable), through the same runner as ``kvgate
    probe``: ``{<metric>: leaf, "chart": {...}}``, or None when the profile does not ask for it. A
    probe that cannot run is a recorded fault, never a figure."""
    kind = get_probe(name)
    spec = kind.spec_of(run.profile)
    if spec is None:
        return None
    done = run.gate_dir.step_done(key)
    if done is not None:
        return dict(done)
    what = kind.help.split(":")[0]
    python = str(run.inventory.setting(node, "python"))
    out_dir = Path(run.gate_dir.evidence_path(f"{key}/{node.name}/{target.name}"))
    with Progress(f"{run.gate} {what} {node.name}/{target.name}", enabled=run.progress) as p:
        try:
            res = run_probe_on(kind, run.executor(node.name), kind.where_on(spec, target), spec, out_dir,
                               python=python, on_round=lambda line: p.status(line, force=True))
        except (InfraError, InputError) as exc:
            run.fault(f"{node.name}: {what} on {target.name} failed", exc)
            return {kind.metric: measurement(None, detail=f"the {what} probe did not run: {exc}")}
    out = {kind.metric: kind.leaf(res, run.path), "chart": kind.chart(res)}
    run.gate_dir.mark_step_done(key, out)
    return out


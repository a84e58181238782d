"""A gate run on provisioned-rate storage: refused before anything runs when a declared enforcement
cannot be had, and otherwise run with every command of the run on each such node in a cgroup of
kvgate's own that caps the target's devices (``harness.probes.blkthrottle``), recorded as evidence,
labelled, and removed at the end."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Optional

from harness.config.inventory import Inventory, Node
from harness.pipelines.shared.context import GateRun
from harness.probes.blkthrottle import (
    Cgroup,
    ThrottlePlan,
    clean_stale,
    create_cgroup,
    enforced_targets,
    label,
    plan_node,
    remove_cgroup,
)
from harness.remote.base import Executor, RemoteError


def _nodes(inventory: Inventory) -> list[Node]:
    return [n for n in inventory.nodes if enforced_targets(n)]


def check_enforceable(inventory: Inventory, *, accept_new_host_keys: bool = False,
                      cgroup_root: Optional[str] = None) -> list[ThrottlePlan]:
    """Each node's plan; raises ``ThrottleRefused`` (exit 2, nothing created) for the first target whose
    declared enforcement cannot be had there. Touches the nodes read-only."""
    from harness.remote.connect import executor_for

    plans = []
    for node in _nodes(inventory):
        ex = executor_for(inventory, node.name, accept_new_host_keys=accept_new_host_keys)
        try:
            plan = plan_node(ex, node, root=cgroup_root)
        finally:
            ex.close()
        if plan is not None:
            plans.append(plan)
    return plans


def provisioned_labels(inventory: Inventory) -> list[dict[str, Any]]:
    """Every target declaring a provisioned rate, for the result data (page one, the terminal)."""
    out = []
    for node in inventory.nodes:
        for t in node.storage:
            text = label(t)
            if text is not None and t.provisioned is not None:
                out.append({"node": node.name, "target": t.name, "label": text, "enforce": t.enforce,
                            "read_bps": t.provisioned.read, "write_bps": t.provisioned.write})
    return out


def _say(run: GateRun, text: str) -> None:
    run.notes.append(text)
    if run.progress:
        print(f"{run.gate}: {text}", file=sys.stderr, flush=True)


@contextmanager
def enforced_rates(run: GateRun, *, cgroup_root: Optional[str] = None) -> Iterator[list[Cgroup]]:
    """Create the cgroups the run's nodes need, run the body with every command there in them, and
    remove them after (also when the body raises); a stale one of an earlier killed run is removed
    first, and said."""
    from harness.remote.connect import executor_for
    from harness.remote.recording import RecordingExecutor

    made: list[tuple[Executor, Cgroup]] = []
    try:
        for node in _nodes(run.inventory):
            ex = RecordingExecutor(executor_for(run.inventory, node.name,
                                                accept_new_host_keys=run.accept_new_host_keys),
                                   run.gate_dir.record_command)
            for line in clean_stale(ex):
                _say(run, f"{node.name}: {line}")
            plan = plan_node(ex, node, root=cgroup_root)
            if plan is None:
                ex.close()
                continue
            cg = create_cgroup(ex, plan, campaign=run.campaign.name, gate=run.gate)
            made.append((ex, cg))
            run.cgroups[node.name] = cg.procs_file
            run.drop_executor(node.name)  # the next command of the run starts in the cgroup
            for text in plan.labels:
                _say(run, f"{text} (cgroup {cg.path}, devices "
                          f"{', '.join(f'{d.name} {d.majmin}' for d in cg.limits)})")
        if made:
            run.gate_dir.write_evidence_json("provisioned.json", [cg.to_json() for _, cg in made])
        yield [cg for _, cg in made]
    finally:
        _remove_all(run, made)


def _remove_all(run: GateRun, made: list[tuple[Executor, Cgroup]]) -> None:
    for ex, cg in made:
        run.cgroups.pop(cg.node, None)
        run.drop_executor(cg.node)
        try:
            for line in remove_cgroup(ex, cg):
                run.warn(f"{cg.node}: {line}")
        except RemoteError as exc:
            run.warn(f"{cg.node}: could not remove cgroup {cg.path} (the next run removes it)", exc)
        finally:
            ex.close()

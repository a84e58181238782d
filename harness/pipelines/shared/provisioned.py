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
    adopt_detached,
    clean_stale,
    create_cgroup,
    enforced_targets,
    keep_for_detached,
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
def enforced_rates(run: GateRun, *, cgroup_root: Optional[str] = None,
                   keep_on: tuple[type[BaseException], ...] = ()) -> Iterator[list[Cgroup]]:
    """Create the cgroups the run's nodes need (or adopt the one a detached soak of this campaign
    and gate runs in), run the body with every command there in them, and remove them after, also
    when the body raises; a stale one of an earlier killed run is removed first, and said. ``keep_on``:
    the exceptions after which the cgroups stay for what runs on (a soak started without --wait)."""
    made: list[tuple[Executor, Cgroup]] = []
    keep = False
    try:
        for node in _nodes(run.inventory):
            got = _node_cgroup(run, node, cgroup_root)
            if got is not None:
                made.append(got)
        if made:
            run.gate_dir.write_evidence_json("provisioned.json", [cg.to_json() for _, cg in made])
        yield [cg for _, cg in made]
    except keep_on:
        keep = True
        raise
    finally:
        if keep:
            _keep_all(run, made)
        else:
            _remove_all(run, made)


def _node_cgroup(run: GateRun, node: Node, cgroup_root: Optional[str]) -> Optional[tuple[Executor, Cgroup]]:
    from harness.remote.connect import executor_for
    from harness.remote.recording import RecordingExecutor

    ex = RecordingExecutor(executor_for(run.inventory, node.name, accept_new_host_keys=run.accept_new_host_keys),
                           run.gate_dir.record_command)
    cg = adopt_detached(ex, node.name, campaign=run.campaign.name, gate=run.gate)
    for line in clean_stale(ex):
        _say(run, f"{node.name}: {line}")
    plan = plan_node(ex, node, root=cgroup_root)
    if plan is None:
        ex.close()
        return None
    if cg is None:
        cg = create_cgroup(ex, plan, campaign=run.campaign.name, gate=run.gate)
    else:
        _say(run, f"{node.name}: the soak started earlier runs in cgroup {cg.path}: this run uses it too")
    run.cgroups[node.name] = cg.procs_file
    run.drop_executor(node.name)  # the next command of the run starts in the cgroup
    for text in plan.labels:
        _say(run, f"{text} (cgroup {cg.path}, devices {', '.join(f'{d.name} {d.majmin}' for d in cg.limits)})")
    return ex, cg


def _keep_all(run: GateRun, made: list[tuple[Executor, Cgroup]]) -> None:
    for ex, cg in made:
        run.cgroups.pop(cg.node, None)
        run.drop_executor(cg.node)
        try:
            keep_for_detached(ex, cg)
            run.notes.append(f"{cg.node}: cgroup {cg.path} kept for the soak that runs on; `kvgate gate G4 --resume` "
                             "removes it at the end")
        except (RemoteError, ValueError) as exc:
            run.warn(f"{cg.node}: could not mark cgroup {cg.path} for the soak that runs on", exc)
        finally:
            ex.close()


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

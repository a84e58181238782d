"""Facts for every node of an inventory (what ``kvgate facts`` calls).

Nodes are visited in parallel through ``harness.remote.fleet.Fleet``; a node that cannot be
reached (or gives no result within ``timeout``) becomes a :class:`NodeUnreachable` entry
carrying the error, and never hides the other nodes. A bad inventory setting is an
``InputError`` and a kvgate bug propagates: neither is disguised as an unreachable node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional, Union

from harness.config.inventory import Inventory
from harness.errors import InputError, KvgateError
from harness.facts.collect import collect_facts
from harness.facts.compare import compare_facts
from harness.facts.model import NodeFacts
from harness.progress import Progress
from harness.remote.base import Executor
from harness.remote.fleet import Fleet

__all__ = ["NodeUnreachable", "collect_inventory_facts", "facts_rows", "facts_json", "FACTS_HEADERS",
           "storage_problems"]


@dataclass(frozen=True)
class NodeUnreachable:
    node: str
    error: str


NodeResult = Union[NodeFacts, NodeUnreachable]


def collect_inventory_facts(inventory: Inventory, *, nodes: Optional[Sequence[str]] = None,
                            accept_new_host_keys: bool = False, parallel: int = 16,
                            timeout: Optional[float] = 900.0,
                            progress: Optional[Progress] = None) -> dict[str, NodeResult]:
    """Facts of the named nodes (default: all), in inventory order."""
    names = list(nodes) if nodes else [n.name for n in inventory.nodes]
    for name in names:
        try:
            inventory.node(name)
        except KeyError as exc:
            raise InputError(str(exc.args[0])) from None

    def one(executor: Executor) -> NodeFacts:
        node = inventory.node(executor.node)
        python = str(inventory.setting(node, "python") or "python3")
        return collect_facts(executor, node, python=python)

    fleet = Fleet(inventory, accept_new_host_keys=accept_new_host_keys)
    try:
        outcome = fleet.map(one, names, max_workers=parallel, timeout=timeout, progress=progress)
    finally:
        fleet.close()
    results: dict[str, NodeResult] = {}
    for name in names:
        o = outcome[name]
        if o.ok and o.value is not None:
            results[name] = o.value
            continue
        if isinstance(o.error, InputError) or not isinstance(o.error, KvgateError):
            raise o.error if o.error is not None else RuntimeError(f"{name}: no facts and no error")
        results[name] = NodeUnreachable(name, str(o.error))
    return results


FACTS_HEADERS = ("node", "os / kernel", "accelerators", "nvme", "targets", "links", "versions", "missing",
                 "problems")


def _accel(f: NodeFacts) -> str:
    if f.accelerators is None:
        return "-"
    if not f.accelerators:
        return f"none ({f.accelerator_source})"
    models = sorted({a.model for a in f.accelerators})
    cards = len({a.card for a in f.accelerators})
    extra = f" ({len(f.accelerators)} devices)" if cards != len(f.accelerators) else ""
    mem = sorted({a.memory_bytes for a in f.accelerators if a.memory_bytes})
    memtext = f", {mem[0] / 2**30:.0f} GiB" if len(mem) == 1 else ""
    return f"{'/'.join(models)} x{cards}{extra}{memtext}"


def facts_rows(results: dict[str, NodeResult]) -> list[list[Any]]:
    """One table row per node for the terminal."""
    rows: list[list[Any]] = []
    for name, r in results.items():
        if isinstance(r, NodeUnreachable):
            rows.append([name, "UNREACHABLE", "-", "-", "-", "-", "-", "-", r.error.splitlines()[0]])
            continue
        os_text = f"{r.os.pretty_name or r.os.id} / {r.os.kernel}" if r.os else "-"
        nvme = "-" if r.nvme is None else str(len(r.nvme))
        targets = ", ".join(f"{k}:{'rw' if t.writable else ('ro' if t.exists else 'missing')}"
                            for k, t in r.targets.items()) or "-"
        links = ", ".join(f"{k}:{v.speed_bps // 10**9 if v.speed_bps else '?'}G"
                          for k, v in r.links.items()) or "-"
        versions = ", ".join(f"{k} {v}" for k, v in r.versions.items() if v and k != "kernel") or "-"
        rows.append([name, os_text, _accel(r), nvme, targets, links, versions, ", ".join(r.missing) or "-",
                     str(len(r.errors)) if r.errors else "-"])
    return rows


def facts_json(inventory: Inventory, results: dict[str, NodeResult], *, raw: bool = False) -> dict[str, Any]:
    """``{"nodes": {name: {"facts": ..., "g1": <compare_facts subtree>} | {"unreachable": error}}}``."""
    out: dict[str, Any] = {}
    for name, r in results.items():
        if isinstance(r, NodeUnreachable):
            out[name] = {"unreachable": r.error}
            continue
        out[name] = {"facts": r.model_dump(mode="json", exclude=None if raw else {"raw"}),
                     "g1": compare_facts(inventory.node(name), r)}
    return {"nodes": out}


def storage_problems(inventory: Inventory, results: dict[str, NodeResult]) -> list[str]:
    """Storage targets of reached nodes whose directory does not exist (or could not be probed):
    every probe and the KV tier would fail on them, so ``kvgate facts`` reports them and exits 4."""
    out: list[str] = []
    for name, r in results.items():
        if isinstance(r, NodeUnreachable):
            continue
        for target in inventory.node(name).storage:
            tf = r.targets.get(target.name)
            if tf is None:
                out.append(f"{name}: storage target {target.name} ({target.path}) could not be checked")
            elif not tf.exists:
                out.append(f"{name}: storage target {target.name}: {target.path} does not exist on the node")
    return out

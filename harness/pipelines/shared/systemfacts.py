"""The system under test as a gate records it in ``result.json`` (``inventory.nodes[]``): per node,
what the inventory declares (``declared``: storage targets with their kind, devices, drive models,
RAID, capacity and any other field a target gains) and what G1's facts measured on the node
(``measured``: accelerators, CPU, memory, kernel, OS, and per storage target its filesystem,
device and drive models and firmware). The report's page one reads these alone; a field that was
not collected is absent, never guessed."""

from __future__ import annotations

from collections import Counter
from typing import Any, Optional

from harness.config.inventory import Node
from harness.facts.model import NodeFacts


def declared_node(node: Node) -> dict[str, Any]:
    """The inventory's storage targets of ``node`` (every field but the path's safety switches)."""
    targets = []
    for t in node.storage:
        data = t.model_dump(mode="json", exclude_none=True)
        for key in ("allow_destructive", "min_free"):
            data.pop(key, None)
        targets.append({k: v for k, v in data.items() if v not in ([], {}, "")})
    return {"storage_targets": targets}


def _accelerators(facts: NodeFacts) -> Optional[str]:
    if facts.accelerators is None:
        return None
    if not facts.accelerators:
        return "none"
    counts = Counter(a.model for a in facts.accelerators)
    return ", ".join(f"{model} x {n}" for model, n in counts.items())


def _target(facts: NodeFacts, name: str) -> dict[str, Any]:
    t = facts.targets.get(name)
    if t is None:
        return {}
    out: dict[str, Any] = {}
    if t.mount is not None:
        out["filesystem"] = t.mount.fstype
        out["source"] = t.mount.source
    if t.usage is not None:
        out["size_bytes"] = t.usage.size_bytes
    if t.device_models:
        out["device_models"] = sorted(set(t.device_models))
        firmware = sorted({d.firmware for d in facts.nvme or [] if d.firmware and d.model in t.device_models})
        if firmware:
            out["firmware"] = firmware
    return out


def measured_node(facts: Optional[NodeFacts], node: Node) -> dict[str, Any]:
    """What G1 measured on ``node`` (empty when G1 recorded no readable facts for it)."""
    if facts is None:
        return {}
    out: dict[str, Any] = {"collected_at": facts.collected_at}
    if (acc := _accelerators(facts)) is not None:
        out["accelerators"] = acc
    if facts.cpu_model:
        out["cpu"] = facts.cpu_model
    if facts.memory_bytes:
        out["memory_bytes"] = facts.memory_bytes
    if facts.os is not None:
        if facts.os.kernel:
            out["kernel"] = facts.os.kernel
        if facts.os.pretty_name:
            out["os"] = facts.os.pretty_name
    storage = {t.name: _target(facts, t.name) for t in node.storage}
    if any(storage.values()):
        out["storage"] = {k: v for k, v in storage.items() if v}
    return out


def add_system_facts(summary_nodes: list[dict[str, Any]], nodes: list[Node],
                     facts: dict[str, Optional[NodeFacts]]) -> None:
    """Add ``declared`` and ``measured`` to each node of a result's inventory summary."""
    by_name = {n.name: n for n in nodes}
    for entry in summary_nodes:
        node = by_name.get(entry.get("name", ""))
        if node is None:
            continue
        entry["declared"] = declared_node(node)
        measured = measured_node(facts.get(node.name), node)
        if measured:
            entry["measured"] = measured

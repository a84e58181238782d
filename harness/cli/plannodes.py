"""What ``kvgate plan`` says about every node of the inventory, not only the engine's: the head's
engine and LMCache server (printed above it), each Ray worker's own commands, the load client, the
server nodes the gates run no engine on, and G1's probes on every node. Nodes whose lines are the
same but for their own name and host are printed once, named together."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from harness.config.inventory import Inventory, Node
from harness.platforms import get_platform


def _ray_lines(node: Node, plans: Sequence[Mapping[str, Any]]) -> list[str]:
    lines: list[str] = []
    for d in plans:
        ray = d.get("ray") or {}
        for name, argv in ray.get("commands", ()):
            if name == node.name:
                lines.append(f"  ray      [{d['arm']}/{d['instance_index']}] {shlex.join(argv)}")
        if node.name in [n for n, _ in ray.get("commands", ())]:
            files, dirs = ", ".join(d["files"]) or "none", ", ".join(d["kv_dirs"]) or "none"
            lines.append(f"  files    [{d['arm']}/{d['instance_index']}] {files}; KV dirs {dirs}")
    return lines


def node_lines(node: Node, head: Node, plans: Sequence[Mapping[str, Any]], client: str) -> list[str]:
    """The lines of one node (its own name and host included: ``grouped`` factors them out)."""
    lines: list[str] = []
    if node.name == head.name:
        lines.append("  engine   the engine and LMCache server commands of every arm above (head node)")
    ray = _ray_lines(node, plans)
    if ray:
        lines.append(f"  role     Ray worker of {head.name}'s engine")
        lines += ray
    elif node.name != head.name and "server" in node.roles:
        lines.append(f"  role     server without an engine: G2-G4 run engines on the first server node, {head.name}")
    if node.name == client:
        lines.append("  load     kvgate's node agent (python zipapp) sends every point's requests from here")
    tools = ", ".join(get_platform(str(node.platform)).accelerator_tools) or "no accelerator tools"
    targets = ", ".join(f"{t.name} ({t.path})" for t in node.storage) or "no storage targets"
    lines.append(f"  G1       facts ({tools}, {node.host}), fio on {targets}")
    return lines


def grouped(inventory: Inventory, head: Node, plans: Sequence[Mapping[str, Any]], client: str) -> list[str]:
    """Every node's lines, nodes with the same lines (their own name and host aside) printed once."""
    groups: dict[tuple[str, ...], list[Node]] = {}
    for node in inventory.nodes:
        key = tuple(line.replace(node.host, "<host>") for line in node_lines(node, head, plans, client))
        groups.setdefault(key, []).append(node)
    out: list[str] = []
    for key, nodes in groups.items():
        names = ", ".join(f"{n.name} ({n.host})" for n in nodes)
        out.append(f"== node{'s' if len(nodes) > 1 else ''} {names} ==")
        out += [line if len(nodes) > 1 else line.replace("<host>", nodes[0].host) for line in key]
    return out

"""The hardware half of the run fingerprint, and the inventory fingerprint G1 records.

``hardware_fingerprint`` is merged into the workload fingerprint (``harness.gates.fingerprint``)
of G2 and G3, so a baseline and a candidate measured on different hardware are refused like a
different workload. Its fields, from the node facts G1 collected in the run's campaign:

* ``kvgate.version``: the harness that measured;
* ``hardware.nodes.accelerators``, ``.cpu_model``, ``.memory``, ``.kernel``: one value per serving
  node (the nodes ``nodes.platforms`` covers), sorted, so a node's name and host never matter,
  only what it is (two identical nodes swapped, or renamed, compare equal);
* ``hardware.storage.kind``, ``.device_model``, ``.filesystem``: one value per node declaring the
  arm's storage target, sorted; the kind is the inventory's, the rest are facts.

A value not collected (no G1 facts for the node, a tool missing or failing) is :data:`UNKNOWN`, and
:func:`harness.gates.fingerprint.fingerprint_diff` counts a field holding it as differing even
when both sides hold it: two unknowns are not known to be equal. Memory is rounded to whole GiB
(firmware and kernel reservations move MemTotal by megabytes between identical machines).

``inventory_fingerprint`` is what G1 accepted: per node (by its inventory name), its platform,
roles, declared accelerators and storage targets (name, kind, device, capacity, drives, RAID,
declared cache). Locations are
not in it (host, port, paths, work directory, cluster label): the same hardware reached at another
address is the same inventory. G3 compares it with its own inventory's before it runs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any, Optional

from harness.config.inventory import Inventory, Node
from harness.facts.model import NodeFacts
from harness.platforms import get_platform

__all__ = ["UNKNOWN", "hardware_fingerprint", "inventory_fingerprint", "serving_nodes"]

UNKNOWN = "(not collected)"
_GIB = 1 << 30
# what a storage target is declared to be (not where it is, nor how probes may treat it)
_DECLARED_TARGET = {"kind", "device", "capacity", "drives", "drive_models", "raid", "raid_members", "cache_size",
                    "provisioned", "enforce"}
_DECLARED_IF_SET = ("provisioned", "enforce")


def serving_nodes(inventory: Inventory) -> list[Node]:
    """The nodes whose hardware decides the figures: the servers (every node when none is one)."""
    return [n for n in inventory.nodes if "server" in n.roles] or list(inventory.nodes)


def _accelerators(node: Node, facts: Optional[NodeFacts]) -> str:
    if facts is not None and facts.accelerators is not None:
        if not facts.accelerators:
            return "none"
        counts = Counter(a.model for a in facts.accelerators)
        return "; ".join(f"{n} x {model}" for model, n in sorted(counts.items()))
    if facts is not None and not get_platform(node.platform).accelerator_tools:
        return "none"  # a platform without accelerators (cpu): nothing to collect
    return UNKNOWN


def _node_fields(node: Node, facts: Optional[NodeFacts]) -> dict[str, str]:
    kernel = (facts.versions.get("kernel") or (facts.os.kernel if facts.os else "")) if facts else ""
    memory = facts.memory_bytes if facts else None
    return {
        "accelerators": _accelerators(node, facts),
        "cpu_model": (facts.cpu_model if facts else None) or UNKNOWN,
        "memory": f"{round(memory / _GIB)} GiB" if memory else UNKNOWN,
        "kernel": kernel or UNKNOWN,
    }


def _target_fields(node: Node, target: str, facts: Optional[NodeFacts]) -> dict[str, str]:
    spec = next(t for t in node.storage if t.name == target)
    tf = facts.targets.get(target) if facts else None
    models = tf.device_models if tf else None
    return {
        "kind": spec.kind,
        "device_model": UNKNOWN if models is None else (", ".join(models) or "(none reported)"),
        "filesystem": tf.mount.fstype if tf and tf.mount else UNKNOWN,
    }


def hardware_fingerprint(inventory: Inventory, facts: Mapping[str, Optional[NodeFacts]], *,
                         storage: Optional[str], kvgate_version: str) -> dict[str, Any]:
    """The hardware fields (see the module doc); ``facts`` by node name (None: not collected)."""
    out: dict[str, Any] = {"kvgate.version": kvgate_version}
    per_node = [_node_fields(n, facts.get(n.name)) for n in serving_nodes(inventory)]
    for key in ("accelerators", "cpu_model", "memory", "kernel"):
        out[f"hardware.nodes.{key}"] = sorted(f[key] for f in per_node)
    if storage:
        holders = [n for n in inventory.nodes if any(t.name == storage for t in n.storage)]
        per_target = [_target_fields(n, storage, facts.get(n.name)) for n in holders]
        for key in ("kind", "device_model", "filesystem"):
            out[f"hardware.storage.{key}"] = sorted(f[key] for f in per_target) or [UNKNOWN]
    return out


def inventory_fingerprint(inventory: Inventory) -> dict[str, Any]:
    """What G1 accepted, by node name, without locations (see the module doc)."""
    out: dict[str, Any] = {}
    for n in sorted(inventory.nodes, key=lambda n: n.name):
        out[f"node.{n.name}.platform"] = n.platform
        out[f"node.{n.name}.roles"] = sorted(n.roles)
        out[f"node.{n.name}.accelerators"] = n.accelerators.model_dump(mode="json") if n.accelerators else None
        for t in sorted(n.storage, key=lambda t: t.name):
            declared = t.model_dump(mode="json", include=_DECLARED_TARGET)
            for key in _DECLARED_IF_SET:  # absent when unset: a G1 recorded before they existed still matches
                if declared.get(key) is None:
                    declared.pop(key, None)
            out[f"node.{n.name}.storage.{t.name}"] = declared
    return out

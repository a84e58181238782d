"""Compare a node's facts with the inventory: the G1 measured-results subtree of one node.

``compare_facts(node, facts)`` returns the dict that goes under ``nodes.<node name>`` of the
measured results, with the metric paths of ``harness.catalog``::

    accelerators.match
    storage.<target>.drives.match | raid.match | capacity.match | mounted
    network.<interface>.speed.match | roce.match
    software.match

Each leaf is a measurement dict ``{"value": bool | None, "text": <found>, "detail": "expected X,
found Y", "evidence": [...]}``.

The rule for what gets a leaf:

* The inventory states no expectation (no ``accelerators``, a target without ``drives`` /
  ``drive_models``, ``raid``/``raid_members``, ``capacity``, an interface without ``speed`` or
  ``roce``, an empty ``software`` and no ``declared`` versions): **no leaf**. The check's wildcard
  then has nothing to match on that node, and nothing is claimed. (``mounted`` is always expected
  for a listed target.)
* An expectation exists but the fact could not be collected (tool missing, command failed,
  output not understood): the leaf is ``value: None`` with the reason in ``detail``, which the
  evaluator reports as NOT RUN, and NOT RUN never passes a blocker.
* Otherwise ``value`` is True or False, and ``detail`` says what was expected and what was found.

Tolerances: capacity within 5% (filesystem size from ``df``); device memory within 5% of the
figure read either as decimal or as binary units, because vendors print "192 GB" for 192 GiB;
link speed within 0.5%. Accelerator count matches physical cards or logical devices (partitions,
chips), since inventories count either; the detail names both.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, Optional

from harness.config.inventory import Node, StorageTarget
from harness.facts.model import Accelerator, NodeFacts, NvmeDrive
from harness.platforms import get_platform
from harness.units import format_quantity

__all__ = ["compare_facts", "model_matches", "version_matches", "CAPACITY_TOLERANCE"]

CAPACITY_TOLERANCE = 0.05
MEMORY_TOLERANCE = 0.05
SPEED_TOLERANCE = 0.005
_VENDOR_WORDS = {"amd", "instinct", "radeon", "oam", "huawei", "ascend", "nvidia", "tesla", "geforce", "sxm",
                 "pcie", "oem"}


def _leaf(value: Optional[bool], text: str, detail: str, evidence: Sequence[str]) -> dict[str, Any]:
    return {"value": value, "text": text, "detail": detail, "evidence": list(evidence)}


def _core(name: str) -> str:
    tokens = [t for t in re.split(r"[^a-z0-9]+", name.lower()) if t and t not in _VENDOR_WORDS]
    core = "".join(tokens)
    stripped = True
    while stripped:  # vendor words glued to the model, as in 'Ascend910B3'
        stripped = False
        for word in _VENDOR_WORDS:
            if core.startswith(word) and len(core) > len(word):
                core, stripped = core[len(word):], True
    return core


def model_matches(expected: str, found: str) -> bool:
    """Vendor words and punctuation aside, the found name starts with the expected one
    ('MI308X' ~ 'AMD Instinct MI308X OAM', 'Ascend910B3' ~ '910B3', 'H100' ~ 'NVIDIA H100 80GB
    HBM3'; but 'Ascend910B3' is not 'Ascend910')."""
    e, f = _core(expected), _core(found)
    return bool(e) and f.startswith(e)


def _memory_ok(expected: float, found: int) -> bool:
    return any(abs(found - e) <= MEMORY_TOLERANCE * e for e in (expected, expected * 2**30 / 10**9))


def _gib(n: Optional[int]) -> str:
    return "unknown memory" if n is None else f"{n / 2**30:.1f} GiB"


def version_matches(expected: str, found: Optional[str]) -> bool:
    """'*' = installed; otherwise the found version equals the expected one or extends it
    ('0.20.1' ~ '0.20.1+rocm6.4', '6.4' ~ '6.4.0-47')."""
    if found is None:
        return False
    if expected.strip() == "*":
        return True
    e, f = expected.strip().lower(), found.strip().lower()
    return f == e or any(f.startswith(e + sep) for sep in (".", "+", "-", "~", "_"))


def _why_missing(facts: NodeFacts, *keys: str) -> str:
    reasons = [f"{k}: {v}" for k, v in facts.errors.items() if any(key in k for key in keys)]
    missing = [t for t in facts.missing if any(key in t for key in keys)]
    if missing:
        reasons.insert(0, f"not installed on the node: {', '.join(missing)}")
    return "; ".join(reasons) or "not collected"


def _accelerators(node: Node, facts: NodeFacts, ev: Sequence[str]) -> Optional[dict[str, Any]]:
    spec = node.accelerators
    if spec is None:
        return None
    mem_text = f", {format_quantity(spec.memory, 'bytes')} each" if spec.memory else ""
    expected = f"expected {spec.model} x{spec.count}{mem_text}"
    devs = facts.accelerators
    if devs is None:
        tools = get_platform(node.platform).accelerator_tools
        why = _why_missing(facts, *tools)
        if not tools:
            why = f"platform {node.platform!r} has no accelerator tool; set the node's platform"
        return _leaf(None, "not collected", f"{expected}; accelerators could not be read: {why}", ev)
    cards = sorted({d.card for d in devs})
    models = sorted({d.model for d in devs})
    mems = sorted({d.memory_bytes for d in devs if d.memory_bytes is not None})
    found = f"{', '.join(models) or 'no devices'} x{len(cards)}"
    if len(devs) != len(cards):
        found += f" ({len(devs)} logical devices)"
    parts = sorted({d.compute_partition for d in devs if d.compute_partition})
    if parts:
        found += f", partition mode {'/'.join(parts)}"
    if mems:
        found += f", {', '.join(_gib(m) for m in mems)} each"
    problems: list[str] = []
    if spec.count not in (len(cards), len(devs)):
        problems.append(f"count {len(cards)} cards / {len(devs)} devices, not {spec.count}")
    bad_models = [d for d in devs if not model_matches(spec.model, d.model)]
    if bad_models:
        bad = bad_models[0]
        problems.append(f"model {bad.model!r} on device {bad.index} is not {spec.model!r}")
    if spec.memory:
        primaries = _primaries(devs)
        unknown = [d for d in primaries if d.memory_bytes is None]
        wrong = [d for d in primaries
                 if d.memory_bytes is not None and not _memory_ok(spec.memory, d.memory_bytes)]
        if wrong:
            problems.append(f"memory {_gib(wrong[0].memory_bytes)} on device {wrong[0].index}")
        elif unknown and not wrong:
            return _leaf(None, found, f"{expected}; found {found}; the tool reported no memory size", ev)
    detail = f"{expected}; found {found}"
    if problems:
        detail += " (" + "; ".join(problems) + ")"
    return _leaf(not problems, found, detail, ev)


def _primaries(devs: list[Accelerator]) -> list[Accelerator]:
    """Devices whose memory stands for the card: AMD partition 0 (siblings split it), every chip
    of an NPU (each chip has its own HBM)."""
    if any(d.compute_partition for d in devs):
        return [d for d in devs if d.chip == 0]
    return devs


def _base_device(dev: str) -> str:
    """/dev/nvme0n1p2 -> /dev/nvme0n1; /dev/sda1 -> /dev/sda."""
    m = re.fullmatch(r"(/dev/nvme\d+n\d+)(p\d+)?", dev)
    if m:
        return m.group(1)
    m = re.fullmatch(r"(/dev/[a-z]+)\d+", dev)
    return m.group(1) if m else dev


def _target_device(target: StorageTarget, facts: NodeFacts) -> Optional[str]:
    tf = facts.targets.get(target.name)
    if target.device:
        return target.device
    if tf and tf.mount:
        return tf.mount.source
    return None


def _drives(target: StorageTarget, facts: NodeFacts, ev: Sequence[str]) -> Optional[dict[str, Any]]:
    if target.drives is None and not target.drive_models:
        return None
    parts = []
    if target.drives is not None:
        parts.append(f"{target.drives} NVMe drive(s)")
    if target.drive_models:
        parts.append(f"model {' or '.join(target.drive_models)}")
    expected = "expected " + ", ".join(parts)
    if target.kind == "nfs":
        return _leaf(None, "not visible",
                     f"{expected}; the drives behind an NFS mount are not visible from the node", ev)
    dev = _target_device(target, facts)
    if dev is None:
        return _leaf(None, "not collected", f"{expected}; the block device behind {target.path} is unknown "
                     f"({_why_missing(facts, target.path, 'mounts')})", ev)
    if facts.nvme is None:
        return _leaf(None, "not collected",
                     f"{expected}; NVMe drives could not be listed: {_why_missing(facts, 'nvme')}", ev)
    if dev.startswith("/dev/md"):
        arr = facts.raid.get(dev)
        if arr is None:
            return _leaf(None, "not collected",
                         f"{expected}; {dev} could not be read: {_why_missing(facts, 'mdadm')}", ev)
        members = [_base_device(m) for m in arr.members]
    else:
        members = [_base_device(dev)]
    by_dev: dict[str, NvmeDrive] = {d.device: d for d in facts.nvme}
    drives = [by_dev[m] for m in members if m in by_dev]
    not_nvme = [m for m in members if m not in by_dev]
    models = sorted({d.model for d in drives})
    found = f"{len(drives)} NVMe drive(s)" + (f" ({', '.join(models)})" if models else "")
    if not_nvme:
        found += f" and non-NVMe {', '.join(not_nvme)}"
    problems = []
    if target.drives is not None and len(drives) != target.drives:
        problems.append("count differs")
    if target.drive_models:
        wanted = [w.lower() for w in target.drive_models]
        bad = [d for d in drives if not any(w in d.model.lower() for w in wanted)]
        if bad or not drives:
            problems.append("model differs")
    return _leaf(not problems, found, f"{expected} behind {dev}; found {found}", ev)


def _raid(target: StorageTarget, facts: NodeFacts, ev: Sequence[str]) -> Optional[dict[str, Any]]:
    if target.raid is None and not target.raid_members:
        return None
    want_level = target.raid or "any level"
    expected = f"expected {want_level}"
    if target.raid_members:
        expected += f" of {', '.join(target.raid_members)}"
    dev = _target_device(target, facts)
    if dev is None:
        return _leaf(None, "not collected",
                     f"{expected}; the block device behind {target.path} is unknown", ev)
    if not dev.startswith("/dev/md"):
        ok = target.raid == "none" and not target.raid_members
        return _leaf(ok, f"{dev} (no md array)", f"{expected}; found {dev}, not an md RAID array", ev)
    arr = facts.raid.get(dev)
    if arr is None:
        return _leaf(None, "not collected",
                     f"{expected}; {dev} could not be read: {_why_missing(facts, 'mdadm')}", ev)
    found = f"{arr.level} of {', '.join(arr.members)}"
    problems = []
    if target.raid not in (None, arr.level):
        problems.append("level differs")
    if target.raid_members:
        norm = {m if m.startswith("/dev/") else "/dev/" + m for m in target.raid_members}
        if norm != set(arr.members):
            problems.append("members differ")
    return _leaf(not problems, found, f"{expected}; found {found} on {dev}", ev)


def _capacity(target: StorageTarget, facts: NodeFacts, ev: Sequence[str]) -> Optional[dict[str, Any]]:
    if target.capacity is None:
        return None
    expected = f"expected {format_quantity(target.capacity, 'bytes')} within {CAPACITY_TOLERANCE:.0%}"
    tf = facts.targets.get(target.name)
    if tf is None or tf.usage is None:
        if tf is not None and not tf.exists:
            why = "the path does not exist"
        else:
            why = _why_missing(facts, "df", target.path)
        return _leaf(None, "not collected", f"{expected}; size of {target.path} unknown: {why}", ev)
    size = tf.usage.size_bytes
    found = format_quantity(size, "bytes")
    ok = abs(size - target.capacity) <= CAPACITY_TOLERANCE * target.capacity
    return _leaf(ok, found, f"{expected}; found {found} ({tf.usage.fstype} on {tf.usage.source})", ev)


def _mounted(target: StorageTarget, facts: NodeFacts, ev: Sequence[str]) -> dict[str, Any]:
    expected = f"expected {target.path} to exist and be writable"
    tf = facts.targets.get(target.name)
    if tf is None:
        return _leaf(None, "not collected", f"{expected}; {_why_missing(facts, target.path)}", ev)
    found = "writable" if tf.writable else ("exists, not writable" if tf.exists else "missing")
    if tf.mount:
        found += f" ({tf.mount.fstype} {tf.mount.source} on {tf.mount.target})"
    return _leaf(tf.exists and tf.writable, found, f"{expected}; found {found}", ev)


def _network(node: Node, facts: NodeFacts, ev: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for spec in node.network:
        entry: dict[str, Any] = {}
        if spec.speed is not None:
            expected = f"expected {format_quantity(spec.speed, 'bitrate')}"
            link = facts.links.get(spec.interface)
            if link is None:
                why = _why_missing(facts, spec.interface, "ethtool")
                leaf = _leaf(None, "not collected", f"{expected}; {spec.interface} unknown: {why}", ev)
                entry["speed"] = {"match": leaf}
            elif link.speed_bps is None:
                state = "link down" if link.link_detected is False else "speed unknown (link down?)"
                leaf = _leaf(False, state, f"{expected}; found {spec.interface}: {state}", ev)
                entry["speed"] = {"match": leaf}
            else:
                found = format_quantity(link.speed_bps, "bitrate")
                ok = abs(link.speed_bps - spec.speed) <= SPEED_TOLERANCE * spec.speed
                leaf = _leaf(ok, found, f"{expected}; found {found} on {spec.interface}", ev)
                entry["speed"] = {"match": leaf}
        if spec.roce is not None:
            want = "RoCE v2" if spec.roce == "v2" else "IB/RoCE v1"
            expected = f"expected {want} GIDs on {spec.rdma_device or spec.interface}"
            if facts.rdma is None:
                why = _why_missing(facts, "ibv_devinfo", "gid")
                leaf = _leaf(None, "not collected", f"{expected}; RDMA devices could not be read: {why}", ev)
                entry["roce"] = {"match": leaf}
            else:
                rdev = spec.rdma_device
                ports = [p for p in facts.rdma if spec.interface in p.netdevs or (rdev and p.device == rdev)]
                types = sorted({t for p in ports for t in p.gid_types})
                found = (f"{', '.join(sorted({p.device for p in ports}))}: {', '.join(types) or 'no GIDs'}"
                         if ports else "no RDMA device on this interface")
                entry["roce"] = {"match": _leaf(want in types, found, f"{expected}; found {found}", ev)}
        if entry:
            out[spec.interface] = entry
    return out


_ALIASES = {"vllm_ascend": "vllm-ascend", "torch_npu": "torch-npu", "pytorch": "torch", "python3": "python"}


def _expected_software(node: Node, declared: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(name, wanted version, who asked: blank for the inventory) from the inventory and the
    profile's engine.versions."""
    out = [(name, want, "") for name, want in node.software.items()]
    return out + [(name, want, " (profile engine.versions)") for name, want in declared.items()]


def _software(node: Node, facts: NodeFacts, ev: Sequence[str],
              declared: Mapping[str, str] = MappingProxyType({})) -> Optional[dict[str, Any]]:
    expected = _expected_software(node, declared)
    if not expected:
        return None
    lines: list[str] = []
    found_parts: list[str] = []
    mismatch = unknown = False
    for name, want, who in expected:
        key = _ALIASES.get(name.lower(), name.lower())
        if key not in facts.versions:
            unknown = True
            lines.append(f"{name}: expected {want}{who}, could not be determined")
            continue
        have = facts.versions[key]
        found = f"{name} {have or 'absent'}"
        if found not in found_parts:
            found_parts.append(found)
        if not version_matches(want, have):
            mismatch = True
            lines.append(f"{name}: expected {want}{who}, found {have or 'not installed'}")
        else:
            lines.append(f"{name}: expected {want}{who}, found {have}")
    value: Optional[bool] = False if mismatch else (None if unknown else True)
    return _leaf(value, ", ".join(found_parts) or "nothing found", "; ".join(lines), ev)


def compare_facts(node: Node, facts: NodeFacts, *, evidence: Sequence[str] = (),
                  declared: Mapping[str, str] = MappingProxyType({})) -> dict[str, Any]:
    """The measured-results subtree for ``nodes.<node.name>`` (see the module doc for the rule).
    ``declared``: the software the profile ordered on a serving node (its ``engine.versions``),
    checked beside the inventory's ``software`` in the same ``software.match`` leaf."""
    out: dict[str, Any] = {}
    acc = _accelerators(node, facts, evidence)
    if acc is not None:
        out["accelerators"] = {"match": acc}
    st: dict[str, Any] = {}
    for target in node.storage:
        entry: dict[str, Any] = {"mounted": _mounted(target, facts, evidence)}
        for name, fn in (("drives", _drives), ("raid", _raid), ("capacity", _capacity)):
            leaf = fn(target, facts, evidence)
            if leaf is not None:
                entry[name] = {"match": leaf}
        st[target.name] = entry
    if st:
        out["storage"] = st
    net = _network(node, facts, evidence)
    if net:
        out["network"] = net
    sw = _software(node, facts, evidence, declared)
    if sw is not None:
        out["software"] = {"match": sw}
    return out

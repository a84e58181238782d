"""Provisioned storage rates enforced by the kernel: a cgroup of kvgate's own with blk-throttle limits.

A storage target may declare ``provisioned: {read: 150 MB/s}`` with ``enforce: blk-throttle`` (cloud
block volumes and arrays with QoS are sold that way). Then, on the target's node:

1. ``plan_node`` resolves the block devices under each such target through its backing chain
   (``harness.probes.backing``), finds the io controller (cgroup v1 ``blkio`` or v2 ``io``) and
   refuses, before anything runs, what cannot be enforced: not root, no io controller, no block
   device under the target, a RAM-backed one, two rates for one device, or a target without
   enforcement on a throttled device (its figures would be the cap's, unlabelled).
2. ``create_cgroup`` makes ``<controller>/kvgate-<token>`` and writes the limits (v1
   ``blkio.throttle.{read,write}_bps_device``, v2 ``io.max``) on every whole device of the chain
   (the kernel throttles disks, not partitions; a partition's disk is in its chain), reads them back,
   and leaves a marker in ``STATE_DIR`` naming the controller process that owns it. Every command of
   the run on the node then starts in it (``harness.remote.cgroupjoin``).
3. ``remove_cgroup`` moves any process still in it to its parent and removes it and its marker: only
   a ``kvgate-`` directory directly under the controller root that a marker of ours names.
   ``clean_stale`` does the same for a cgroup whose owner is gone (a killed run) and says so.

Buffered writes are not throttled by cgroup v1 (writeback runs outside the cgroup); kvgate's probes
and the emulator use O_DIRECT, which is.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import socket
import time
import uuid
from dataclasses import dataclass, field
from typing import Any, Optional

from harness.config.inventory import Node, StorageTarget
from harness.probes.backing import resolve_backing
from harness.probes.errors import ProbeRefused
from harness.remote.base import CommandFailed, Executor, RemoteError
from harness.remote.scratch import remove_named_child
from harness.units import UnitKind, format_quantity

STATE_DIR = "/run/kvgate/cgroups"  # markers; a tmpfs cleared at boot, as cgroups are
PREFIX = "kvgate-"
_TOKEN = re.compile(r"^[0-9a-f]{12}\Z")
_MAJMIN = re.compile(r"^\d+:\d+\Z")
# Writes one line to a cgroup file (cgroupfs files cannot be replaced by rename). $1 file, $2 line.
_WRITE = 'printf "%s\\n" "$2" > "$1"'
_LIMIT_FILES = {1: {"read": "blkio.throttle.read_bps_device", "write": "blkio.throttle.write_bps_device"},
                2: {"read": "io.max", "write": "io.max"}}


class ThrottleRefused(ProbeRefused):
    """A target declares ``enforce: blk-throttle`` where kvgate cannot enforce it (exit 2)."""


@dataclass(frozen=True)
class IoController:
    """Where kvgate's cgroup goes: ``parent`` (a directory of the cgroup filesystem) of ``version``."""

    version: int
    parent: str


@dataclass
class DeviceLimit:
    name: str
    majmin: str
    read_bps: Optional[float] = None
    write_bps: Optional[float] = None
    targets: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"device": self.name, "majmin": self.majmin, "read_bps": self.read_bps,
                "write_bps": self.write_bps, "targets": list(self.targets)}


@dataclass
class ThrottlePlan:
    node: str
    controller: IoController
    limits: list[DeviceLimit]
    labels: list[str]


@dataclass
class Cgroup:
    """A cgroup kvgate created on a node (recorded as evidence)."""

    node: str
    path: str
    version: int
    limits: list[DeviceLimit]
    marker: str
    applied: dict[str, str] = field(default_factory=dict)  # limit file -> its content read back

    @property
    def procs_file(self) -> str:
        return posixpath.join(self.path, "cgroup.procs")

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "cgroup": self.path, "cgroup_version": self.version, "marker": self.marker,
                "limits": [d.to_json() for d in self.limits], "applied": dict(self.applied)}


def enforced_targets(node: Node) -> list[StorageTarget]:
    return [t for t in node.storage if t.enforce == "blk-throttle" and t.provisioned is not None]


def rate_text(bps: float) -> str:
    """150000000 -> "150 MB/s" (no trailing zeros: a declared rate reads as it was written)."""
    num, unit = format_quantity(bps, UnitKind.BANDWIDTH).split(" ", 1)
    return f"{num.rstrip('0').rstrip('.') if '.' in num else num} {unit}"


def label(target: StorageTarget) -> Optional[str]:
    """"local-disk: reads provisioned at 150 MB/s by blk-throttle", or None when nothing is declared."""
    rates = target.provisioned
    if rates is None:
        return None
    if rates.read is not None and rates.read == rates.write:
        parts = [f"reads and writes provisioned at {rate_text(rates.read)}"]
    else:
        parts = [f"{what} provisioned at {rate_text(v)}"
                 for what, v in (("reads", rates.read), ("writes", rates.write)) if v is not None]
    by = f" by {target.enforce}" if target.enforce else " (declared, not enforced by kvgate)"
    return f"{target.name}: {', '.join(parts)}{by}"


def _out(executor: Executor, argv: list[str]) -> str:
    res = executor.run(argv, check=False, timeout=30)
    return res.stdout if res.ok else ""


def find_io_controller(executor: Executor, root: Optional[str] = None) -> IoController:
    """The cgroup directory kvgate's cgroup goes under: ``root`` when given, else this node's v1
    ``blkio`` hierarchy (at the node's own cgroup in it) or the root of its v2 hierarchy. Raises ValueError with
    the reason when there is no io controller to use."""
    if root is not None:
        return _controller_at(executor, posixpath.normpath(root))
    mounts = _out(executor, ["cat", "/proc/self/mounts"])
    own = _own_cgroups(_out(executor, ["cat", "/proc/self/cgroup"]))
    v2_at: Optional[str] = None
    for line in mounts.splitlines():
        parts = line.split()
        if len(parts) < 4:
            continue
        where, fstype, opts = parts[1], parts[2], parts[3].split(",")
        if fstype == "cgroup" and "blkio" in opts:
            own_path = own.get("blkio", "/").lstrip("/")
            return _controller_at(executor, posixpath.normpath(posixpath.join(where, own_path)))
        if fstype == "cgroup2" and v2_at is None:
            v2_at = where
    if v2_at is None:
        raise ValueError("no cgroup filesystem with an io controller is mounted (neither v1 blkio nor cgroup2)")
    # v2: at the hierarchy's root, the one cgroup that may hand io down while it holds processes
    return _controller_at(executor, posixpath.normpath(v2_at))


def _own_cgroups(text: str) -> dict[str, str]:
    """controller -> this process's cgroup path in its v1 hierarchy (``/proc/self/cgroup``)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            for name in parts[1].split(","):
                out[name] = parts[2]
    return out


def _controller_at(executor: Executor, root: str) -> IoController:
    ok = executor.run(["test", "-e", posixpath.join(root, _LIMIT_FILES[1]["read"])], check=False).ok
    if ok:
        return IoController(1, root)
    if not executor.run(["test", "-e", posixpath.join(root, "cgroup.controllers")], check=False).ok:
        raise ValueError(f"{root} is not a cgroup directory with an io controller (no {_LIMIT_FILES[1]['read']}, "
                         "no cgroup.controllers)")
    controllers = _out(executor, ["cat", posixpath.join(root, "cgroup.controllers")]).split()
    if "io" not in controllers:
        raise ValueError(f"the cgroup v2 hierarchy at {root} has no io controller (cgroup.controllers: "
                         f"{' '.join(controllers) or 'none'}; on a hybrid system io may be bound to v1 blkio)")
    return IoController(2, root)


def plan_node(executor: Executor, node: Node, *, root: Optional[str] = None) -> Optional[ThrottlePlan]:
    """What enforcing the node's provisioned targets takes, or None when none declares enforcement;
    raises ThrottleRefused (nothing created) when it cannot be enforced (see the module docstring)."""
    targets = enforced_targets(node)
    if not targets:
        return None
    first = targets[0].name
    uid = _out(executor, ["id", "-u"]).strip()
    try:
        controller = find_io_controller(executor, root)
    except ValueError as exc:
        raise ThrottleRefused(f"enforce: blk-throttle cannot be enforced: {exc}", node=node.name,
                              target=first) from None
    if uid != "0" and not executor.run(["test", "-w", controller.parent], check=False).ok:
        raise ThrottleRefused(f"enforce: blk-throttle needs root to create a cgroup under {controller.parent}; "
                              f"kvgate runs as uid {uid or '?'} there", node=node.name, target=first)
    limits: dict[str, DeviceLimit] = {}
    for target in targets:
        for name, majmin in _whole_devices(executor, node.name, target):
            _add_limit(limits, name, majmin, target, node.name)
    _refuse_unlabelled_sharers(executor, node, limits)
    return ThrottlePlan(node.name, controller, list(limits.values()), [label(t) or t.name for t in targets])


def _whole_devices(executor: Executor, node: str, target: StorageTarget) -> list[tuple[str, str]]:
    """(name, MAJ:MIN) of every whole block device in the target's chain (partitions left out: the
    kernel throttles their disk, which the chain holds)."""
    backing = resolve_backing(executor, target.path)
    if backing.memory:
        raise ThrottleRefused(f"enforce: blk-throttle on a RAM-backed target ({backing.memory}): memory is never "
                              "provisioned storage", node=node, target=target.name)
    out = []
    for name in backing.devices:
        if executor.run(["test", "-e", f"/sys/class/block/{name}/partition"], check=False).ok:
            continue
        majmin = _out(executor, ["cat", f"/sys/class/block/{name}/dev"]).strip()
        if _MAJMIN.match(majmin):
            out.append((name, majmin))
    if not out:
        raise ThrottleRefused(f"enforce: blk-throttle needs a block device under {target.path}, and its chain has "
                              f"none ({backing.describe()})", node=node, target=target.name)
    return out


def _add_limit(limits: dict[str, DeviceLimit], name: str, majmin: str, target: StorageTarget, node: str) -> None:
    rates = target.provisioned
    assert rates is not None
    have = limits.setdefault(majmin, DeviceLimit(name, majmin))
    for what in ("read", "write"):
        new, old = getattr(rates, what), getattr(have, f"{what}_bps")
        if have.targets and old != new:  # one declaring a rate the other does not is a difference too
            raise ThrottleRefused(f"targets {', '.join(have.targets)} and {target.name} share device {name} and "
                                  f"declare different {what} rates: one device has one cap", node=node,
                                  target=target.name)
        setattr(have, f"{what}_bps", new)
    have.targets.append(target.name)


def _refuse_unlabelled_sharers(executor: Executor, node: Node, limits: dict[str, DeviceLimit]) -> None:
    """A target without enforcement on a device the cgroup throttles would be measured at the cap and
    reported as the device: refused."""
    throttled = {d.majmin for d in limits.values()}
    for target in node.storage:
        if target.enforce is not None:
            continue
        try:
            shared = [m for _, m in _whole_devices(executor, node.name, target) if m in throttled]
        except ThrottleRefused:
            continue
        if shared:
            raise ThrottleRefused(f"it shares device(s) {', '.join(shared)} with a target whose rate kvgate "
                                  "enforces, so its figures would be the cap's: declare it provisioned and enforced "
                                  "at the same rate, or move it", node=node.name, target=target.name)


def _owner(campaign: str, gate: str) -> dict[str, Any]:
    pid = os.getpid()
    return {"controller": socket.gethostname(), "boot_id": _boot_id(), "pid": pid, "pid_start": _pid_start(pid),
            "campaign": campaign, "gate": gate, "created": time.time()}


def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            return fh.read(64).strip()
    except OSError:
        return ""


def _pid_start(pid: int) -> Optional[str]:
    """The start time of ``pid`` on this machine (field 22 of its stat), None when it is not running."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            text = fh.read(4096)
    except OSError:
        return None
    fields = text.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else None


def create_cgroup(executor: Executor, plan: ThrottlePlan, *, campaign: str, gate: str,
                  state_dir: str = STATE_DIR) -> Cgroup:
    """Create the cgroup and its marker, write the plan's limits and read them back."""
    token = uuid.uuid4().hex[:12]
    path = posixpath.join(plan.controller.parent, PREFIX + token)
    marker = posixpath.join(state_dir, f"{token}.json")
    executor.run(["mkdir", "-p", "-m", "0700", state_dir], timeout=30)
    record = {**_owner(campaign, gate), "cgroup": path, "parent": plan.controller.parent,
              "version": plan.controller.version, "limits": [d.to_json() for d in plan.limits]}
    executor.write_file(marker, json.dumps(record).encode(), mode=0o600)  # before the cgroup: never one unmarked
    if plan.controller.version == 2:  # a v2 child has io.max only when its parent hands io down
        _write_line_quiet(executor, posixpath.join(plan.controller.parent, "cgroup.subtree_control"), "+io")
    executor.run(["mkdir", "--", path], timeout=30)
    cg = Cgroup(plan.node, path, plan.controller.version, plan.limits, marker)
    try:
        _write_limits(executor, cg)
    except BaseException:
        remove_cgroup(executor, cg)
        raise
    return cg


def _write_limits(executor: Executor, cg: Cgroup) -> None:
    files = _LIMIT_FILES[cg.version]
    for d in cg.limits:
        if cg.version == 2:
            rb = str(int(d.read_bps)) if d.read_bps else "max"
            wb = str(int(d.write_bps)) if d.write_bps else "max"
            _write_line(executor, posixpath.join(cg.path, files["read"]), f"{d.majmin} rbps={rb} wbps={wb}")
            continue
        for what in ("read", "write"):
            bps = getattr(d, f"{what}_bps")
            if bps:
                _write_line(executor, posixpath.join(cg.path, files[what]), f"{d.majmin} {int(bps)}")
    for name in sorted(set(files.values())):
        text = _out(executor, ["cat", posixpath.join(cg.path, name)]).strip()
        cg.applied[name] = text
    missing = [d.majmin for d in cg.limits if not any(line.startswith(d.majmin + " ")
                                                     for text in cg.applied.values() for line in text.splitlines())]
    if missing:
        raise CommandFailed(f"the kernel did not keep the limits of device(s) {', '.join(missing)} in {cg.path}",
                            host=cg.node)


def _write_line(executor: Executor, path: str, line: str) -> None:
    executor.run(["sh", "-c", _WRITE, "kvgate-cgroup-write", path, line], timeout=30)


def remove_cgroup(executor: Executor, cg: Cgroup) -> list[str]:
    """Remove the cgroup (after moving any process left in it to its parent) and its marker; what it
    did, in words."""
    return _remove(executor, cg.path, posixpath.dirname(cg.path), cg.marker)


def _remove(executor: Executor, path: str, parent: str, marker: str) -> list[str]:
    notes: list[str] = []
    if posixpath.dirname(path) != parent or not posixpath.basename(path).startswith(PREFIX):
        return [f"kept {path}: not a kvgate cgroup directly under {parent}"]
    for _ in range(5):
        if not executor.run(["test", "-d", path], check=False).ok:
            break
        pids = _out(executor, ["cat", posixpath.join(path, "cgroup.procs")]).split()
        for pid in pids:
            _write_line_quiet(executor, posixpath.join(parent, "cgroup.procs"), pid)
        if pids:
            notes.append(f"moved {len(pids)} process(es) still in {path} to its parent")
        if remove_named_child(executor, path, parent=parent, prefix=PREFIX, directory=True):
            break
        time.sleep(0.2)
    else:
        return [*notes, f"could not remove {path}: processes keep joining it"]
    remove_named_child(executor, marker, parent=posixpath.dirname(marker), suffix=".json")
    return notes


def _write_line_quiet(executor: Executor, path: str, line: str) -> None:
    executor.run(["sh", "-c", _WRITE, "kvgate-cgroup-write", path, line], check=False, timeout=30)


def _markers(executor: Executor, state_dir: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(token, marker path, record) of every marker of kvgate's form that can be read."""
    out = []
    for name in _out(executor, ["ls", "-1", "--", state_dir]).split():
        token = name.removesuffix(".json")
        if not name.endswith(".json") or not _TOKEN.match(token):
            continue
        marker = posixpath.join(state_dir, name)
        try:
            rec = json.loads(executor.read_file(marker, max_bytes=64 * 1024))
        except (ValueError, RemoteError):  # a marker that cannot be read is left alone
            continue
        if isinstance(rec, dict) and rec.get("cgroup") == posixpath.join(str(rec.get("parent")), PREFIX + token):
            out.append((token, marker, rec))
    return out


def keep_for_detached(executor: Executor, cg: Cgroup) -> None:
    """Leave ``cg`` in place for a soak that runs on after kvgate returns (``kvgate gate G4`` without
    --wait): its marker says so, ``clean_stale`` leaves it while processes are in it, and the run
    that follows the soak (``--resume``) adopts it (``adopt_detached``) and removes it at its end."""
    rec = json.loads(executor.read_file(cg.marker, max_bytes=64 * 1024))
    rec["detached"] = True
    executor.write_file(cg.marker, json.dumps(rec).encode(), mode=0o600)


def adopt_detached(executor: Executor, node: str, *, campaign: str, gate: str,
                   state_dir: str = STATE_DIR) -> Optional[Cgroup]:
    """The cgroup a detached soak of this campaign and gate runs in, now owned by this process."""
    for _, marker, rec in _markers(executor, state_dir):
        if rec.get("detached") and rec.get("campaign") == campaign and rec.get("gate") == gate \
                and executor.run(["test", "-d", str(rec["cgroup"])], check=False).ok:
            rec.update(_owner(campaign, gate), detached=False)
            executor.write_file(marker, json.dumps(rec).encode(), mode=0o600)
            limits = [DeviceLimit(str(d.get("device")), str(d.get("majmin")), d.get("read_bps"), d.get("write_bps"),
                                  list(d.get("targets") or [])) for d in rec.get("limits") or []]
            return Cgroup(node, str(rec["cgroup"]), int(rec.get("version") or 1), limits, marker)
    return None


def clean_stale(executor: Executor, *, state_dir: str = STATE_DIR) -> list[str]:
    """Remove the cgroups of kvgate runs on this controller that ended without removing them (a killed
    run): one sentence each. A marker of another controller, or of a run still alive, is left alone;
    so is a detached soak's while processes are still in it (said)."""
    out = []
    for _, marker, rec in _markers(executor, state_dir):
        why = _stale_reason(rec)
        if why is None:
            continue
        what = f"{rec['cgroup']} of {rec.get('campaign')} {rec.get('gate')}"
        if rec.get("detached") and _out(executor, ["cat", posixpath.join(str(rec["cgroup"]), "cgroup.procs")]).split():
            out.append(f"left the cgroup {what}: a soak started without --wait still runs in it")
            continue
        notes = _remove(executor, str(rec["cgroup"]), str(rec["parent"]), marker)
        out.append(f"removed a stale cgroup {what} ({why})" + (f"; {'; '.join(notes)}" if notes else ""))
    return out


def _stale_reason(rec: dict[str, Any]) -> Optional[str]:
    if rec.get("controller") != socket.gethostname():
        return None  # another controller's: not ours to judge
    if rec.get("boot_id") != _boot_id():
        return "its controller has rebooted since"
    pid = rec.get("pid")
    if not isinstance(pid, int):
        return None
    if _pid_start(pid) != rec.get("pid_start"):
        return f"its kvgate process {pid} is no longer running"
    return None

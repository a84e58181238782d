"""What really holds a storage target: the chain from its path down to the devices, read on the node.

A path lives on a filesystem; the filesystem on a block device (``stat -c %d`` -> ``/sys/dev/block/
MAJ:MIN``); a partition on its disk; a loop device on a *file* (``loop/backing_file``), which lives
on another filesystem, and so on; dm and md devices on their members (``slaves/``). The chain ends
at a disk, or at memory: a tmpfs/ramfs filesystem, ``zram*``, ``ram*`` (brd) or ``pmem*``. Looking
only at the target's own filesystem type misses ext4 on a loop device whose file is in ``/dev/shm``:
its "disk" is RAM, and fio on it measures memory (2.0 GB/s passed G3 that way).

The chain also names the block devices whose in-flight I/O the drain waits on
(``harness.probes.drain``). A chain that cannot be followed (no sysfs entry, an anonymous device as
overlayfs or NFS have) ends with what is known; it is never taken as memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

from harness.config.inventory import StorageTarget
from harness.probes.errors import ProbeRefused
from harness.remote.base import Executor

MEMORY_FILESYSTEMS = frozenset({"tmpfs", "ramfs"})
_MEMORY_DEVICES = re.compile(r"^(zram\d+|ram\d+|pmem\d+(\.\d+)?s?)$")
_MAX_DEPTH = 8  # a loop on a loop on ...: deeper than any real stack, bounded against cycles


@dataclass
class Backing:
    """The chain from a path to what holds its bytes."""

    path: str
    chain: list[str] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)  # block device names (sysfs) along the chain
    memory: Optional[str] = None  # the link of the chain that is RAM, if any

    def describe(self) -> str:
        return " -> ".join(self.chain) or self.path

    def to_json(self) -> dict[str, object]:
        return {"path": self.path, "chain": list(self.chain), "devices": list(self.devices),
                "memory": self.memory}


def _out(executor: Executor, argv: list[str]) -> Optional[str]:
    res = executor.run(argv, check=False, timeout=30)
    return res.stdout.strip() if res.ok and res.stdout.strip() else None


def _dev_numbers(executor: Executor, path: str) -> Optional[tuple[int, int]]:
    """(major, minor) of the device holding ``path``, or of ``path`` itself when it is a block device."""
    if executor.run(["test", "-b", path], check=False).ok:
        text = _out(executor, ["stat", "-L", "-c", "%t:%T", path])
        if text is None or ":" not in text:
            return None
        major, minor = text.split(":", 1)
        return int(major, 16), int(minor, 16)
    text = _out(executor, ["stat", "-c", "%d", path])
    if text is None or not text.isdigit():
        return None
    dev = int(text)
    return ((dev >> 8) & 0xFFF) | ((dev >> 32) & ~0xFFF), (dev & 0xFF) | ((dev >> 12) & ~0xFF)


def resolve_backing(executor: Executor, path: str) -> Backing:
    """Follow ``path`` down to its devices on the node (see the module docstring)."""
    backing = Backing(path)
    _resolve_path(executor, path, backing, 0)
    return backing


def _resolve_path(executor: Executor, path: str, backing: Backing, depth: int) -> None:
    block = executor.run(["test", "-b", path], check=False).ok
    if not block:
        fs = _out(executor, ["stat", "-f", "-c", "%T", path]) or "unknown filesystem"
        backing.chain.append(f"{path} ({fs})")
        if fs in MEMORY_FILESYSTEMS:
            backing.memory = backing.memory or f"{path} is on {fs}"
            return
    numbers = _dev_numbers(executor, path)
    if numbers is None or numbers[0] == 0:
        backing.chain.append("no block device" if numbers else "device not readable")
        return
    sysfs = _out(executor, ["readlink", "-f", f"/sys/dev/block/{numbers[0]}:{numbers[1]}"])
    if sysfs is None or not sysfs.startswith("/sys/"):
        backing.chain.append(f"block device {numbers[0]}:{numbers[1]} (not in sysfs)")
        return
    _walk(executor, sysfs.rsplit("/", 1)[1], backing, depth)


def _walk(executor: Executor, name: str, backing: Backing, depth: int) -> None:
    if depth > _MAX_DEPTH or name in backing.devices:
        return
    backing.devices.append(name)
    base = f"/sys/class/block/{name}"
    if executor.run(["test", "-e", f"{base}/partition"], check=False).ok:
        real = _out(executor, ["readlink", "-f", base]) or ""
        parent = real.rsplit("/", 2)[-2] if real.count("/") >= 2 else ""
        backing.chain.append(f"{name} (partition)")
        if parent:
            _walk(executor, parent, backing, depth + 1)
        return
    if _MEMORY_DEVICES.match(name):
        backing.chain.append(f"{name} (memory)")
        backing.memory = backing.memory or f"{name} is a RAM-backed block device"
        return
    loop_file = _out(executor, ["cat", f"{base}/loop/backing_file"]) if name.startswith("loop") else None
    if loop_file is not None:
        loop_file = loop_file.removesuffix(" (deleted)")
        backing.chain.append(f"{name} (loop, backing file {loop_file})")
        _resolve_path(executor, loop_file, backing, depth + 1)
        return
    members = (_out(executor, ["ls", f"{base}/slaves"]) or "").split()
    kind = "dm" if name.startswith("dm-") else "md" if name.startswith("md") else "disk"
    backing.chain.append(f"{name} ({kind}{', members ' + ' '.join(members) if members else ''})")
    for member in members:
        _walk(executor, member, backing, depth + 1)


class MemoryBackedTarget(ProbeRefused):
    """The target's bytes live in RAM (tmpfs, zram, brd, pmem, a loop file on tmpfs) and the
    inventory does not declare it ``kind: memory``."""

    def __init__(self, backing: Backing, *, node: str, target: str) -> None:
        self.backing = backing
        super().__init__(f"{backing.memory}: the target is memory-backed ({backing.describe()}), so no figure "
                         "from it is a storage figure; declare it `kind: memory` in the inventory if a RAM tier "
                         "is meant", node=node, target=target)


def check_backing(executor: Executor, target: StorageTarget) -> Backing:
    """The target's chain; refused when it ends in memory and the tier is not declared ``kind: memory``."""
    backing = resolve_backing(executor, target.path)
    if backing.memory and target.kind != "memory":
        raise MemoryBackedTarget(backing, node=executor.node, target=target.name)
    return backing

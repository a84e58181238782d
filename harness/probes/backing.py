"""What really holds a storage target: the chain from its path down to the devices, read on the node.

A path lives on a filesystem; the filesystem on a block device (``stat -c %d`` -> ``/sys/dev/block/
MAJ:MIN``); a partition on its disk; a loop device on a *file* (``loop/backing_file``), which lives
on another filesystem, and so on; dm and md devices on their members (``slaves/``). The chain ends
at a disk, or at memory: a tmpfs/ramfs filesystem, ``zram*``, ``ram*`` (brd) or ``pmem*``. Looking
only at the target's own filesystem type misses ext4 on a loop device whose file is in ``/dev/shm``:
its "disk" is RAM, and fio on it measures memory (2.0 GB/s passed G3 that way).

A loop device's file is found by the device and inode the kernel holds (``losetup``), so a file
deleted after ``losetup``, or left on a tmpfs lazily unmounted (``umount -l``), is still traced to
its filesystem, or to none. A filesystem with an anonymous device is looked up in the mount table
(``harness.probes.mountinfo``): an overlay is followed into every layer, upper and lower; a network
filesystem ends at its server; btrfs at its source device. A device made by software (under
``devices/virtual/block``) is followed into its members (``slaves/``), and one with none ends the
chain unresolved.

A chain that cannot be followed to a named device that is not memory is *unresolved*, and a target
on it is refused (:class:`BackingNotResolved`, "backing not resolved: ..."), never accepted: what
cannot be named may be RAM. The chain also names the block devices whose in-flight I/O the drain
waits on (``harness.probes.drain``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Optional

from harness.config.inventory import StorageTarget
from harness.probes.errors import ProbeRefused
from harness.probes.mountinfo import Mount, find_mount, overlay_layers, parse_mountinfo
from harness.remote.base import Executor

MEMORY_FILESYSTEMS = frozenset({"tmpfs", "ramfs", "hugetlbfs", "devtmpfs"})
# a server's export, named by its source: the chain ends there, resolved, with no local device
NETWORK_FILESYSTEMS = frozenset({"nfs", "nfs4", "cifs", "smb3", "ceph", "lustre", "glusterfs", "fuse.glusterfs",
                                 "beegfs", "gpfs", "wekafs"})
_MEMORY_DEVICES = re.compile(r"^(zram\d+|ram\d+|pmem\d+(\.\d+)?s?)$")
_MAX_DEPTH = 8  # a loop on a loop on ...: deeper than any real stack, bounded against cycles


@dataclass
class Backing:
    """The chain from a path to what holds its bytes."""

    path: str
    chain: list[str] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)  # block device names (sysfs) along the chain
    memory: Optional[str] = None  # the link of the chain that is RAM, if any
    unresolved: list[str] = field(default_factory=list)  # links that could not be followed, and why

    def describe(self) -> str:
        return " -> ".join(self.chain) or self.path

    def to_json(self) -> dict[str, object]:
        return {"path": self.path, "chain": list(self.chain), "devices": list(self.devices),
                "memory": self.memory, "unresolved": list(self.unresolved)}


def resolve_backing(executor: Executor, path: str, *, sysfs: str = "/sys",
                    mountinfo: str = "/proc/self/mountinfo") -> Backing:
    """Follow ``path`` down to its devices on the node (see the module docstring). ``sysfs`` and
    ``mountinfo``: where the node's sysfs and mount table are read (tests give captured copies)."""
    backing = Backing(path)
    _Resolver(executor, backing, sysfs.rstrip("/"), mountinfo).path(path, 0)
    return backing


def _dev_split(dev: int) -> tuple[int, int]:
    """glibc's dev_t encoding (what ``stat -c %d`` prints) as (major, minor)."""
    return ((dev >> 8) & 0xFFF) | ((dev >> 32) & ~0xFFF), (dev & 0xFF) | ((dev >> 12) & ~0xFF)


def _same_file(stat_text: str, dev: tuple[int, int], ino: int) -> bool:
    """``stat -c '%d %i'`` output names the file (``dev``, ``ino``)."""
    parts = stat_text.split()
    return len(parts) == 2 and parts[0].isdigit() and _dev_split(int(parts[0])) == dev and parts[1] == str(ino)


class _Resolver:
    """One resolution: the node, the chain being built, the mount table read once."""

    def __init__(self, executor: Executor, backing: Backing, sysfs: str, mountinfo: str) -> None:
        self.ex, self.b, self.sysfs, self.mountinfo_path = executor, backing, sysfs, mountinfo
        self._mounts: Optional[list[Mount]] = None

    def out(self, argv: list[str]) -> Optional[str]:
        res = self.ex.run(argv, check=False, timeout=30)
        return res.stdout.strip() if res.ok and res.stdout.strip() else None

    def ok(self, argv: list[str]) -> bool:
        return self.ex.run(argv, check=False, timeout=30).ok

    def memory(self, link: str, why: str) -> None:
        self.b.chain.append(link)
        self.b.memory = self.b.memory or why

    def unresolved(self, link: str, why: str) -> None:
        self.b.chain.append(link)
        self.b.unresolved.append(why)

    def mounts(self) -> list[Mount]:
        if self._mounts is None:
            self._mounts = parse_mountinfo(self.out(["cat", self.mountinfo_path]) or "")
        return self._mounts

    # -- a path ------------------------------------------------------------------------------
    def path(self, path: str, depth: int) -> None:
        if self.ok(["test", "-b", path]):  # S_ISBLK: a device node, whatever its name
            self.device_node(path, depth)
            return
        if not self.ok(["test", "-e", path]):
            self.unresolved(f"{path} (not found)", f"{path} does not exist on the node")
            return
        fs = self.out(["stat", "-f", "-c", "%T", path]) or "unknown filesystem"
        dev = self.out(["stat", "-c", "%d", path])
        if fs in MEMORY_FILESYSTEMS:
            self.memory(f"{path} ({fs})", f"{path} is on {fs}")
            return
        if dev is None or not dev.isdigit():
            self.unresolved(f"{path} ({fs})", f"the device of {path} cannot be read")
            return
        self.b.chain.append(f"{path} ({fs})")
        self.filesystem(_dev_split(int(dev)), depth)

    def device_node(self, path: str, depth: int) -> None:
        text = self.out(["stat", "-L", "-c", "%t:%T", path]) or ""
        if not re.fullmatch(r"[0-9a-f]+:[0-9a-f]+", text):
            self.unresolved(f"{path} (block device)", f"the device numbers of {path} cannot be read")
            return
        major, minor = (int(x, 16) for x in text.split(":"))
        self.block(major, minor, depth)

    # -- a filesystem, by its device number ----------------------------------------------------
    def filesystem(self, dev: tuple[int, int], depth: int) -> None:
        """The filesystem whose st_dev is ``dev``: a block device's, or an anonymous one (overlay, a
        network filesystem, btrfs) found in the mount table."""
        mount = find_mount(self.mounts(), dev)
        number = f"{dev[0]}:{dev[1]}"
        if mount is not None and mount.fstype in MEMORY_FILESYSTEMS:
            self.memory(f"filesystem {number} ({mount.fstype} on {mount.mountpoint})",
                        f"filesystem {number} is {mount.fstype}")
        elif dev[0] != 0:
            self.block(dev[0], dev[1], depth)
        elif mount is None:
            self.unresolved(f"filesystem {number} (mounted nowhere)",
                            f"filesystem {number} is not in the node's mount table (lazily unmounted, or "
                            "another mount namespace's), so what holds it cannot be named")
        elif mount.fstype == "overlay":
            self.overlay(mount, depth)
        elif mount.fstype in NETWORK_FILESYSTEMS:
            self.b.chain.append(f"{mount.source} (network filesystem {mount.fstype})")
        elif mount.source.startswith("/") and self.ok(["test", "-b", mount.source]):
            self.b.chain.append(f"{mount.fstype} on {mount.source}")
            self.device_node(mount.source, depth + 1)
        else:
            self.unresolved(f"{mount.describe()} (no block device)",
                            f"{mount.fstype} filesystem {mount.source} on {mount.mountpoint} has no block "
                            "device or server to follow")

    def overlay(self, mount: Mount, depth: int) -> None:
        """Every layer of an overlay: its writes land in the upper layer, its reads in any."""
        layers = overlay_layers(mount)
        if not layers.lower and layers.upper is None:
            self.unresolved(f"overlay on {mount.mountpoint}", f"overlay on {mount.mountpoint} names no layers")
            return
        if layers.upper is not None:
            self.b.chain.append(f"overlay upper layer {layers.upper}")
            if not self.upper_is_live(layers.upper, layers.work):
                self.unresolved(f"{layers.upper} (not the overlay's upper layer)",
                                f"overlay on {mount.mountpoint}: {layers.work}/work is not there, so the path "
                                f"{layers.upper} no longer reaches the upper layer the overlay writes to "
                                "(its filesystem unmounted?)")
            else:
                self.path(layers.upper, depth + 1)
        for lower in layers.lower:
            self.b.chain.append(f"overlay lower layer {lower}")
            self.path(lower, depth + 1)

    def upper_is_live(self, upper: str, work: Optional[str]) -> bool:
        """An overlay keeps ``work/work`` in its work directory, on the upper layer's filesystem: when the
        paths no longer show it, the layer's filesystem was unmounted under them (``umount -l``)."""
        if work is None or not self.ok(["test", "-d", f"{work}/work"]):
            return False
        devs = {self.out(["stat", "-c", "%d", p]) for p in (upper, work)}
        return len(devs) == 1 and None not in devs

    # -- block devices -----------------------------------------------------------------------
    def block(self, major: int, minor: int, depth: int) -> None:
        real = self.out(["readlink", "-f", f"{self.sysfs}/dev/block/{major}:{minor}"])
        if real is None or not real.startswith(self.sysfs + "/") or not self.ok(["test", "-d", real]):
            self.unresolved(f"block device {major}:{minor} (not in sysfs)",
                            f"block device {major}:{minor} is not in sysfs")
            return
        self.walk(real.rsplit("/", 1)[1], depth)

    def walk(self, name: str, depth: int) -> None:
        if name in self.b.devices:
            self.b.chain.append(f"{name} (as above)")
            return
        if depth > _MAX_DEPTH:
            self.unresolved(f"{name} (too deep)", f"the chain is deeper than {_MAX_DEPTH} links at {name}")
            return
        self.b.devices.append(name)
        base = f"{self.sysfs}/class/block/{name}"
        real = self.out(["readlink", "-f", base]) or ""
        if self.ok(["test", "-e", f"{base}/partition"]):
            parent = real.rsplit("/", 2)[-2] if real.count("/") >= 2 else ""
            self.b.chain.append(f"{name} (partition)")
            if parent:
                self.walk(parent, depth + 1)
            return
        if _MEMORY_DEVICES.match(name):
            self.memory(f"{name} (memory)", f"{name} is a RAM-backed block device")
        elif name.startswith("loop") and self.ok(["test", "-e", f"{base}/loop"]):
            self.loop(name, base, depth)
        else:
            self.members(name, base, "/devices/virtual/block/" in real, depth)

    def members(self, name: str, base: str, virtual: bool, depth: int) -> None:
        members = (self.out(["ls", f"{base}/slaves"]) or "").split()
        kind = "dm" if name.startswith("dm-") else "md" if name.startswith("md") else \
            "virtual" if virtual else "disk"
        link = f"{name} ({kind}{', members ' + ' '.join(members) if members else ''})"
        if virtual and not members:
            # a device made by software with nothing under it to follow (dm-zero, nbd, ublk, ...)
            self.unresolved(link, f"{name} is a virtual block device with no member devices to follow")
            return
        self.b.chain.append(link)
        for member in members:
            self.walk(member, depth + 1)

    def loop(self, name: str, base: str, depth: int) -> None:
        """A loop device's file, found by the device and inode the loop holds (``losetup``, from the
        kernel), not only by its path: a file deleted after ``losetup``, or left on a filesystem lazily
        unmounted, has no path that leads to it, yet its filesystem is still known by number."""
        shown = self.out(["cat", f"{base}/loop/backing_file"])
        if shown is None:
            self.unresolved(f"{name} (loop, no backing file)", f"{name} names no backing file")
            return
        held = self.loop_held(name)
        if held is None:
            self.unresolved(f"{name} (loop, backing file {shown})",
                            f"the device and inode of {name}'s backing file cannot be read (losetup, as root)")
            return
        dev, ino = held
        path = shown.removesuffix(" (deleted)")
        at_path = self.out(["stat", "-c", "%d %i", path]) if not shown.endswith(" (deleted)") else None
        if at_path is not None and _same_file(at_path, dev, ino):
            self.b.chain.append(f"{name} (loop, backing file {path})")
            self.path(path, depth + 1)
            return
        gone = "deleted" if shown.endswith(" (deleted)") else "not at that path"
        self.b.chain.append(f"{name} (loop, backing file {path}, {gone}: inode {ino} of filesystem {dev[0]}:{dev[1]})")
        self.filesystem(dev, depth + 1)

    def loop_held(self, name: str) -> Optional[tuple[tuple[int, int], int]]:
        """((major, minor), inode) of the file the loop device ``name`` holds, from the kernel."""
        text = self.out(["losetup", "--list", "--json", "--output", "BACK-INO,BACK-MAJ:MIN", f"/dev/{name}"])
        try:
            row = json.loads(text or "")["loopdevices"][0]
            major, minor = str(row["back-maj:min"]).strip().split(":")
            return (int(major), int(minor)), int(row["back-ino"])
        except (ValueError, KeyError, IndexError, TypeError):
            return None


class MemoryBackedTarget(ProbeRefused):
    """The target's bytes live in RAM (tmpfs, zram, brd, pmem, a loop file on tmpfs) and the
    inventory does not declare it ``kind: memory``."""

    def __init__(self, backing: Backing, *, node: str, target: str) -> None:
        self.backing = backing
        super().__init__(f"{backing.memory}: the target is memory-backed ({backing.describe()}), so no figure "
                         "from it is a storage figure; declare it `kind: memory` in the inventory if a RAM tier "
                         "is meant", node=node, target=target)


class BackingNotResolved(ProbeRefused):
    """The chain under the target could not be followed to a named device that is not memory (a loop
    device's file on a filesystem unmounted lazily, an overlay layer whose path no longer reaches it,
    a virtual device with nothing under it): what cannot be named may be RAM, so it is not measured."""

    def __init__(self, backing: Backing, *, node: str, target: str) -> None:
        self.backing = backing
        super().__init__(f"backing not resolved: {backing.describe()}: {'; '.join(backing.unresolved)}; a target "
                         "whose bytes cannot be traced to a device may be RAM, so it is not measured (declare it "
                         "`kind: memory` if a RAM tier is meant)", node=node, target=target)


def check_backing(executor: Executor, target: StorageTarget, *, sysfs: str = "/sys") -> Backing:
    """The target's chain; refused when it ends in memory, or cannot be followed to a named device,
    and the tier is not declared ``kind: memory`` (a declared RAM tier is measured as one, its chain
    recorded whatever it is)."""
    backing = resolve_backing(executor, target.path, sysfs=sysfs)
    if target.kind == "memory":
        return backing
    if backing.memory:
        raise MemoryBackedTarget(backing, node=executor.node, target=target.name)
    if backing.unresolved:
        raise BackingNotResolved(backing, node=executor.node, target=target.name)
    return backing

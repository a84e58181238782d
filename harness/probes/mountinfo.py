"""The node's mount table as the kernel states it (``/proc/self/mountinfo``), parsed: which filesystem
a device number is, where it is mounted, from what source, and an overlay's layers.

A device number found nowhere in the table is a filesystem no longer mounted in this namespace: a
tmpfs lazily unmounted (``umount -l``) under a loop device's file lives on with no path to it. The
kernel escapes blanks, tabs, newlines and backslashes in paths as octal (``\\040``); an overlay's
``lowerdir`` separates its layers with ``:`` (``::`` before data-only layers) and escapes a ``:``
inside a path (and a ``,`` in any layer's path) with a backslash, kept as the mounter wrote it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

_OCTAL = re.compile(r"\\([0-7]{3})")
_LAYER_SPLIT = re.compile(r"(?<!\\):+")


def unescape(text: str) -> str:
    """A mountinfo field with the kernel's octal escapes undone."""
    return _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), text)


@dataclass(frozen=True)
class Mount:
    """One line of mountinfo."""

    device: tuple[int, int]  # major, minor of the filesystem (st_dev of every file on it)
    root: str
    mountpoint: str
    fstype: str
    source: str
    options: tuple[str, ...]  # the superblock's options, each unescaped

    def option(self, key: str) -> list[str]:
        """Every value given for ``key`` (an overlay's ``lowerdir+`` may repeat)."""
        return [o.split("=", 1)[1] for o in self.options if o.split("=", 1)[0] == key and "=" in o]

    def describe(self) -> str:
        return f"{self.fstype} {self.source} on {self.mountpoint} ({self.device[0]}:{self.device[1]})"


def parse_mountinfo(text: str) -> list[Mount]:
    """Every well-formed line of ``text``; a malformed one is skipped (it names no device we look up)."""
    mounts = []
    for line in text.splitlines():
        fields = line.split(" ")
        if "-" not in fields[6:]:
            continue
        sep = fields.index("-", 6)
        if len(fields) < sep + 4 or not re.fullmatch(r"\d+:\d+", fields[2]):
            continue
        major, minor = fields[2].split(":")
        options = tuple(unescape(o) for o in _split_options(fields[sep + 3]))
        mounts.append(Mount((int(major), int(minor)), unescape(fields[3]), unescape(fields[4]),
                            unescape(fields[sep + 1]), unescape(fields[sep + 2]), options))
    return mounts


def _split_options(text: str) -> list[str]:
    # a ',' inside a value is escaped (\054), so a plain split is exact
    return [o for o in text.split(",") if o]


def find_mount(mounts: list[Mount], device: tuple[int, int]) -> Optional[Mount]:
    """The first mount of the filesystem ``device`` (bind mounts of it share its type and source)."""
    return next((m for m in mounts if m.device == device), None)


@dataclass(frozen=True)
class OverlayLayers:
    upper: Optional[str]
    work: Optional[str]
    lower: tuple[str, ...]  # lower and data-only layers, in order


def overlay_layers(mount: Mount) -> OverlayLayers:
    """An overlay mount's layer directories, from its options (paths as the mounter gave them)."""
    lower: list[str] = []
    for value in mount.option("lowerdir"):
        lower += [_ovl_unescape(p) for p in _LAYER_SPLIT.split(value) if p]
    lower += [_ovl_unescape(p) for key in ("lowerdir+", "datadir+") for p in mount.option(key)]
    upper, work = mount.option("upperdir"), mount.option("workdir")
    return OverlayLayers(_ovl_unescape(upper[0]) if upper else None, _ovl_unescape(work[0]) if work else None,
                         tuple(lower))


def _ovl_unescape(path: str) -> str:
    # overlay keeps a layer's path as the mounter wrote it, with "\:" and "\," for a ':' or ','
    return re.sub(r"\\(.)", r"\1", path)

"""The evidence manifest of a gate directory (``MANIFEST.sha256``) and the safe walk behind it.

* One line per regular file under the gate directory (``signatures/`` and the manifest itself
  excepted), sorted by path, in ``sha256sum`` format: ``sha256sum -c MANIFEST.sha256`` run in the
  gate directory checks it without kvgate.
* The walk never follows a symbolic link and never opens anything but a regular file: symlinks,
  FIFOs, sockets and devices are *refused* (named, never read, so a FIFO cannot make verify
  hang); an empty directory is reported, since the manifest cannot list it.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import InputError
from harness.progress import Progress

MANIFEST = "MANIFEST.sha256"
SIGNATURES = "signatures"
_LINE = re.compile(r"^(\\?)([0-9a-f]{64}) [ *](.+)$")
_CHUNK = 1 << 20
# The largest file verify reads whole (a manifest, a signature, a statement): a received folder's
# 512 MB sparse MANIFEST took 1.6 GB. A manifest line is ~100 bytes, so this is ~600k files.
MAX_READ_BYTES = 64 << 20


class ManifestError(InputError):
    """A gate directory cannot be hashed (unreadable file, refused entry)."""


@dataclass
class Tree:
    files: list[str] = field(default_factory=list)  # regular files the manifest covers
    signature_files: list[str] = field(default_factory=list)  # regular files under signatures/
    refused: list[str] = field(default_factory=list)  # "path (symlink)" ...
    empty_dirs: list[str] = field(default_factory=list)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "symlink"), (stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"),
                       (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device")):
        if test(mode):
            return name
    return "special file"


def scan(gate_dir: Path) -> Tree:
    """Every entry under ``gate_dir``, by lstat only (nothing is opened here)."""
    tree = Tree()

    def walk(d: Path, rel: str) -> None:
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError as exc:
            raise ManifestError(f"{d}: cannot list: {exc.strerror or exc}") from None
        if not entries and rel:
            tree.empty_dirs.append(rel)
        for e in entries:
            path = f"{rel}/{e.name}" if rel else e.name
            mode = e.stat(follow_symlinks=False).st_mode
            if stat.S_ISDIR(mode):
                walk(Path(e.path), path)
            elif not stat.S_ISREG(mode):
                tree.refused.append(f"{path} ({_kind(mode)})")
            elif path.startswith(SIGNATURES + "/"):
                tree.signature_files.append(path)
            elif path != MANIFEST:
                tree.files.append(path)

    walk(Path(gate_dir), "")
    return tree


def read_regular(path: Path, *, max_bytes: int = MAX_READ_BYTES) -> bytes:
    """The bytes of a regular file, opened without following a symlink and without blocking on a
    FIFO swapped in after the walk; a file over ``max_bytes`` is refused (ManifestError)."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ManifestError(f"{path}: not a regular file")
        too_big = ManifestError(f"{path}: larger than the {max_bytes} byte limit for a file verify reads whole")
        if st.st_size > max_bytes:
            raise too_big
        chunks, size = [], 0
        while chunk := os.read(fd, _CHUNK):
            size += len(chunk)
            if size > max_bytes:
                raise too_big  # it grew while being read
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def sha256_file(path: Path) -> str:
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    fd = os.open(path, flags)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ManifestError(f"{path}: not a regular file")
        h = hashlib.sha256()
        while chunk := os.read(fd, _CHUNK):
            h.update(chunk)
        return h.hexdigest()
    finally:
        os.close(fd)


def compute(gate_dir: Path, files: list[str], *, progress: bool = False) -> dict[str, str]:
    """``{relative path: sha256}`` of ``files``."""
    out: dict[str, str] = {}
    with Progress(f"hashing {Path(gate_dir).name}", total=len(files), enabled=progress) as p:
        for rel in files:
            try:
                out[rel] = sha256_file(Path(gate_dir) / rel)
            except OSError as exc:
                raise ManifestError(f"{Path(gate_dir) / rel}: cannot read: {exc.strerror or exc}") from None
            p.update(1, rel)
    return out


def _line(rel: str, digest: str) -> str:
    # sha256sum's escaping: a name with a backslash or newline gets a leading backslash.
    if "\\" in rel or "\n" in rel:
        return "\\" + digest + "  " + rel.replace("\\", "\\\\").replace("\n", "\\n")
    return f"{digest}  {rel}"


def manifest_text(entries: dict[str, str]) -> str:
    return "".join(_line(rel, entries[rel]) + "\n" for rel in sorted(entries))


def parse_manifest(text: str) -> tuple[dict[str, str], list[str]]:
    """Entries of a manifest and the problems found (line numbers of malformed lines)."""
    entries: dict[str, str] = {}
    problems: list[str] = []
    for n, line in enumerate(text.splitlines(), 1):
        m = _LINE.match(line)
        if not m:
            problems.append(f"{MANIFEST} line {n}: not '<sha256>  <path>'")
            continue
        rel = m.group(3)
        if m.group(1):
            rel = re.sub(r"\\(.)", lambda e: "\n" if e.group(1) == "n" else e.group(1), rel)
        entries[rel] = m.group(2)
    return entries, problems


def diff(old: dict[str, str], new: dict[str, str]) -> str:
    changed = sorted(k for k in old if k in new and old[k] != new[k])
    missing = sorted(k for k in old if k not in new)
    extra = sorted(k for k in new if k not in old)
    parts = []
    for label, items in (("changed", changed), ("missing", missing), ("added", extra)):
        if items:
            parts.append(f"{label}: {', '.join(items[:10])}" + (" ..." if len(items) > 10 else ""))
    return "; ".join(parts) or "manifest format differs"

"""Crash-safe file writes: whole files replaced atomically, JSON lines appended and fsync'd.

* :func:`write_atomic` writes a temporary file in the same directory, fsyncs it, renames it over
  the target and fsyncs the directory: a reader sees the old file or the new one, never half.
* :func:`append_jsonl` appends one JSON object per line and fsyncs. A process killed in the middle
  of a write leaves a torn last line; the next append first terminates it with a newline so the
  fragment stays a line of its own, and :func:`read_jsonl` skips lines that are not complete JSON
  objects. So a record is read back only if it was written whole.
"""

from __future__ import annotations

import errno
import json
import os
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from harness.deletion import remove_file
from harness.errors import StorageFull

__all__ = ["write_atomic", "fsync_dir", "append_jsonl", "read_jsonl", "iter_jsonl", "is_disk_full"]

_FULL = {errno.ENOSPC, errno.EDQUOT}


def is_disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in _FULL


def _full(path: Path, exc: OSError) -> StorageFull:
    return StorageFull(f"cannot write {path}: {exc.strerror or 'no space left on device'} (the disk is full; "
                       "free space and run again with --resume: what was recorded before is kept)", path=str(path))

# Pipelines append from several threads (one per node); one lock per file keeps records whole.
_APPEND_LOCKS: dict[str, threading.Lock] = {}
_APPEND_LOCKS_GUARD = threading.Lock()


def _append_lock(path: Path) -> threading.Lock:
    key = os.path.abspath(path)
    with _APPEND_LOCKS_GUARD:
        lock = _APPEND_LOCKS.get(key)
        if lock is None:
            lock = _APPEND_LOCKS[key] = threading.Lock()
        return lock


def fsync_dir(path: Path) -> None:
    """fsync a directory so a rename or a new file in it survives a power cut."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes | str) -> None:
    """Replace ``path`` with ``data`` atomically and durably (StorageFull when the disk is full)."""
    try:
        _write_atomic(path, data)
    except OSError as exc:
        if is_disk_full(exc):
            raise _full(path, exc) from exc
        raise


def _write_atomic(path: Path, data: bytes | str) -> None:
    payload = data.encode("utf-8") if isinstance(data, str) else data
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp.{os.getpid()}.{threading.get_ident()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            view = memoryview(payload)
            while view:
                n = os.write(fd, view)
                view = view[n:]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        remove_file(tmp, within=path.parent, marker=".tmp")  # a full disk leaves no half-written temporary behind
        raise
    fsync_dir(path.parent)


def append_jsonl(path: Path, record: Mapping[str, Any]) -> None:
    """Append ``record`` as one JSON line; flushed and fsync'd before returning."""
    line = json.dumps(record, sort_keys=True, separators=(",", ":"), allow_nan=False).encode("utf-8") + b"\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    with _append_lock(path):
        try:
            _append_locked(path, line)
        except OSError as exc:
            if is_disk_full(exc):
                raise _full(path, exc) from exc
            raise


def _append_locked(path: Path, line: bytes) -> None:
    new = not path.exists()
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size > 0 and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line  # close a line torn by a crash so this record stands alone
        view = memoryview(line)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.fsync(fd)
    finally:
        os.close(fd)
    if new:
        fsync_dir(path.parent)


def iter_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """The complete JSON-object lines of ``path``; torn or foreign lines are skipped."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return
    lines = raw.split(b"\n")
    # The last element is the text after the final newline: empty, or a line torn by a crash.
    for chunk in lines[:-1]:
        if not chunk.strip():
            continue
        try:
            obj = json.loads(chunk)
        except (ValueError, UnicodeDecodeError):
            continue
        if isinstance(obj, dict):
            yield obj


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return list(iter_jsonl(path))

"""Chunk file I/O that bypasses the page cache, so a disk-tier hit costs a real disk read.

Reads use O_DIRECT into a page-aligned mmap buffer; where the filesystem refuses O_DIRECT (tmpfs,
some network filesystems) the page cache is dropped for the file with ``posix_fadvise(DONTNEED)``
before a buffered read. Writes are buffered, fsync'd, then dropped from the page cache, so a
later read goes to the device. Which read mode was used is reported (``read_mode``).
"""

from __future__ import annotations

import errno
import os
import threading
from typing import Any, Optional

from harness.deletion import remove_file
from harness.readbuffer import HUGE_PAGE as HUGE_PAGE  # re-exported: the buffer's alignment
from harness.readbuffer import ReadBuffer

ALIGN = 4096
MAGIC = b"KVGATECHUNK1"
HEADER = 64  # magic (12) + hash (32) + padding; the rest of the file is the emulated KV payload

MODE_ODIRECT = "odirect"
MODE_FADVISE = "fadvise"


def aligned_size(n: int) -> int:
    return max(ALIGN, (n + ALIGN - 1) // ALIGN * ALIGN)


def chunk_payload(digest: bytes, size: int) -> bytes:
    """The bytes a chunk file holds: a header naming its hash, then a pattern up to ``size``."""
    head = MAGIC + digest[:32]
    head = head + b"\0" * (HEADER - len(head))
    size = aligned_size(size)
    body_unit = (digest * (ALIGN // len(digest) + 1))[:ALIGN]
    reps = (size - HEADER) // ALIGN + 1
    return (head + body_unit * reps)[:size]


_BUFFERS = threading.local()


def _buffer(size: int) -> memoryview:
    """A page-aligned buffer of at least ``size`` bytes, kept per thread: a fresh anonymous map per
    read would fault in and zero every page first (a few ms per 4 MiB chunk, on the restore path)."""
    buf: ReadBuffer | None = getattr(_BUFFERS, "buf", None)
    if buf is None or len(buf.view) < size:
        if buf is not None:
            buf.close()
        buf = ReadBuffer(aligned_size(size))
        _BUFFERS.buf = buf
    return buf.view


def _drop_cache(fd: int) -> None:
    if hasattr(os, "posix_fadvise"):
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        except OSError:
            pass


def read_chunk(path: str, expected_digest: Optional[bytes] = None,
               content: Optional[Any] = None) -> tuple[int, str]:
    """Read the whole file at ``path`` bypassing the page cache; returns (bytes read, mode).
    ``content`` (an object with ``update(bytes)``, e.g. a hashlib object), when given, is updated
    with the bytes read.

    Raises FileNotFoundError when it is gone (evicted by another instance) and ValueError when its
    header does not match ``expected_digest`` (a torn or foreign file)."""
    o_direct = getattr(os, "O_DIRECT", 0)
    fd = -1
    mode = MODE_FADVISE
    if o_direct:
        try:
            fd = os.open(path, os.O_RDONLY | o_direct)
            mode = MODE_ODIRECT
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
    if fd < 0:
        fd = os.open(path, os.O_RDONLY)
        _drop_cache(fd)
    try:
        size = os.fstat(fd).st_size
        buf = _buffer(aligned_size(size))  # page-aligned, as O_DIRECT requires (kept with the thread)
        total = 0
        view = memoryview(buf)[:aligned_size(size)]
        try:
            while total < size:
                try:
                    n = os.preadv(fd, [view[total:]], total)
                except OSError as exc:
                    if exc.errno == errno.EINVAL and mode == MODE_ODIRECT:
                        # the filesystem accepted O_DIRECT at open but not the I/O
                        os.close(fd)
                        fd = os.open(path, os.O_RDONLY)
                        _drop_cache(fd)
                        mode = MODE_FADVISE
                        continue
                    raise
                if n == 0:
                    break
                total += n
            if content is not None:
                content.update(view[:total])
            if expected_digest is not None:
                head = bytes(view[:HEADER])
                if not head.startswith(MAGIC) or head[len(MAGIC) : len(MAGIC) + 32] != expected_digest[:32]:
                    raise ValueError(f"{path}: chunk header does not match its name")
        finally:
            view.release()
        return total, mode
    finally:
        os.close(fd)


def write_chunk(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file, fsync, rename), then drop it from the
    page cache. Raises OSError (ENOSPC, EDQUOT, EFBIG...) after removing the temp file."""
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            view = memoryview(data)
            done = 0
            while done < len(data):
                done += os.write(fd, view[done:])
            os.fsync(fd)
            _drop_cache(fd)
        finally:
            os.close(fd)
        os.rename(tmp, path)
    except BaseException:
        try:
            remove_file(tmp, within=os.path.dirname(tmp) or ".", marker=".tmp")
        except OSError:
            pass
        raise

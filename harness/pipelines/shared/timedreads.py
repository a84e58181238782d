"""Retrieval-shaped reads of a tier's chunk files, each timed at ns resolution (restoreprobe).

Run on the node as ``python3 -I -S -c <this file's source> THREADS GAP_S`` with a JSON list of
groups of paths on stdin (so this module is stdlib-only and imports nothing of kvgate): each
group is one retrieval, its files read at once by ``THREADS`` threads with O_DIRECT into
page-aligned buffers, as an engine's parallel chunk reads do, timed from the first submit to the
last byte with ``perf_counter_ns``, after ``GAP_S`` seconds of idle (a provisioned rate admits a
read after idle at its burst, so every sample gets the storage's best case for its size). Prints
one JSON object: ``{"samples": [[bytes, ns], ...], "direct": true}``; exits 3 naming the file when
a read fails, O_DIRECT is refused or the files are on a RAM file system (tmpfs takes O_DIRECT since
Linux 6.6), since such a figure is not the storage's.
"""

from __future__ import annotations

import json
import mmap
import os
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

ALIGN = 4096
MAX_GROUPS = 256
MAX_FILE = 1 << 30
RAM_FS = ("tmpfs", "ramfs", "devtmpfs", "hugetlbfs")


class ReadFailed(Exception):
    """A chunk file could not be read with O_DIRECT."""


_BUFFERS = threading.local()


def _buffer(size: int) -> mmap.mmap:
    """A page-aligned buffer kept per thread and faulted in before any timed read: a fresh map per
    read would zero its pages inside the timing (the engine keeps its buffers too)."""
    buf = getattr(_BUFFERS, "buf", None)
    if buf is None or len(buf) < size:
        buf = mmap.mmap(-1, (size + ALIGN - 1) // ALIGN * ALIGN)
        buf.write(b"\0" * len(buf))
        _BUFFERS.buf = buf
    return buf


def _read_direct(path: str) -> int:
    """Read the whole file with O_DIRECT; its size in bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError as exc:
        raise ReadFailed(f"{path}: cannot open with O_DIRECT ({exc.strerror})") from None
    try:
        size = os.fstat(fd).st_size
        if not 0 < size <= MAX_FILE:
            raise ReadFailed(f"{path}: size {size} is not that of a chunk file")
        view = memoryview(_buffer(size))
        total = 0
        try:
            while total < size:
                n = os.preadv(fd, [view[total:]], total)
                if n <= 0:
                    break
                total += n
        except OSError as exc:
            raise ReadFailed(f"{path}: O_DIRECT read failed ({exc.strerror})") from None
        finally:
            view.release()
        return total
    finally:
        os.close(fd)


def _fs_type(path: str) -> str:
    """The file system type of the mount holding ``path`` (/proc/self/mountinfo; "" when unknown)."""
    real = os.path.realpath(path)
    best, fstype = "", ""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as fh:
            lines = fh.read(4 << 20).splitlines()
    except OSError:
        return ""
    for line in lines:
        fields, _, rest = line.partition(" - ")
        parts = fields.split()
        if len(parts) < 5 or not rest:
            continue
        mnt = parts[4].replace("\\040", " ")
        if (real == mnt or real.startswith(mnt.rstrip("/") + "/")) and len(mnt) >= len(best):
            best, fstype = mnt, rest.split()[0]
    return fstype


def refuse_ram(groups: list[list[str]]) -> None:
    """A RAM file system is no storage, and tmpfs accepts O_DIRECT since Linux 6.6: refuse it by type."""
    for d in sorted({os.path.dirname(p) for g in groups for p in g}):
        if _fs_type(d) in RAM_FS:
            raise ReadFailed(f"{d}: on a RAM file system ({_fs_type(d)}), not storage")


def timed_reads(groups: list[list[str]], threads: int, gap_s: float) -> list[tuple[int, int]]:
    """Per group, after ``gap_s`` of idle: (bytes read, ns from first submit to last byte)."""
    refuse_ram(groups)
    out: list[tuple[int, int]] = []
    with ThreadPoolExecutor(max_workers=threads) as pool:
        if groups:  # every thread's buffer exists before the first timed read
            largest = max(os.stat(p).st_size for g in groups for p in g) if any(groups) else ALIGN
            ready = threading.Barrier(threads)
            list(pool.map(lambda _: (_buffer(largest), ready.wait()), range(threads)))
        for group in groups[:MAX_GROUPS]:
            time.sleep(gap_s)
            start = time.perf_counter_ns()
            nbytes = sum(pool.map(_read_direct, group))
            out.append((nbytes, time.perf_counter_ns() - start))
    return out


def main(argv: list[str], stdin: Any) -> int:
    try:
        threads, gap_s = int(argv[0]), float(argv[1])
        groups = json.loads(stdin.read(16 << 20))
        if not (1 <= threads <= 64 and 0 <= gap_s <= 10 and isinstance(groups, list)):
            raise ValueError("expected THREADS (1-64), GAP_S (0-10) and a JSON list of path lists")
    except (IndexError, ValueError) as exc:
        print(f"timed reads: {exc}", file=sys.stderr)
        return 2
    try:
        samples = timed_reads([[str(p) for p in g] for g in groups], threads, gap_s)
    except (ReadFailed, OSError) as exc:  # OSError: a file gone before the buffers were sized
        print(f"timed reads: {exc}", file=sys.stderr)
        return 3
    print(json.dumps({"samples": samples, "direct": True}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], sys.stdin))

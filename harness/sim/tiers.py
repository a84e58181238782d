"""The emulator's KV tiers: an LRU standing in for HBM, a bounded CPU tier, directory tiers.

Directory tiers (LMCache's local disk, and an ``fs://`` remote) hold one file per chunk named by
its hash, so two emulator instances pointed at one directory reuse each other's chunks (R4).
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from collections import OrderedDict
from typing import Any, Optional

from harness.deletion import remove_file
from harness.sim import directio

log = logging.getLogger("kvgate.sim")

SUFFIX = ".kvchunk"


class Pins:
    """Chunks pinned in a memory tier while their write to a lower tier is pending (counted: a
    chunk may be queued twice). Thread-safe."""

    def __init__(self) -> None:
        self._n: dict[bytes, int] = {}
        self._lock = threading.Lock()

    def __contains__(self, digest: object) -> bool:
        return digest in self._n

    def lock(self, digest: bytes) -> None:
        with self._lock:
            self._n[digest] = self._n.get(digest, 0) + 1

    def unlock(self, digest: bytes) -> None:
        with self._lock:
            n = self._n.get(digest, 0) - 1
            if n > 0:
                self._n[digest] = n
            else:
                self._n.pop(digest, None)


class ChunkLRU:
    """Chunk hashes with a capacity in chunks, least recently used evicted first (HBM, CPU).
    A locked chunk (its write to a lower tier still pending) is neither evicted nor cleared, as
    LMCache's CPU backend skips objects that cannot be evicted yet."""

    def __init__(self, capacity_chunks: int) -> None:
        self.capacity = max(0, capacity_chunks)
        self._items: OrderedDict[bytes, None] = OrderedDict()
        self.pins = Pins()
        self._lock = threading.Lock()
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._items)

    def contains(self, digest: bytes) -> bool:
        with self._lock:
            return digest in self._items

    def touch(self, digest: bytes) -> None:
        with self._lock:
            if digest in self._items:
                self._items.move_to_end(digest)

    def add(self, digest: bytes) -> None:
        if self.capacity == 0:
            return
        with self._lock:
            self._items[digest] = None
            self._items.move_to_end(digest)
            for key in list(self._items):
                if len(self._items) <= self.capacity:
                    break
                if key not in self.pins:
                    del self._items[key]
                    self.evicted += 1

    def clear(self) -> int:
        """Drop every unlocked chunk; returns how many were dropped."""
        with self._lock:
            keep = [d for d in self._items if d in self.pins]
            n = len(self._items) - len(keep)
            self._items = OrderedDict((d, None) for d in keep)
            return n


class DirTier:
    """A directory of chunk files, bounded by ``max_bytes`` (0: unbounded), least recently used
    evicted first. Recency is each file's mtime, set by this tier (nanoseconds) when a chunk is
    written, read, or stored again while present, so that instances sharing a directory share one
    order. LMCache's local disk (lmcache 0.5.6 ``local_disk_backend.py``) moves a key to the end of
    its LRU on every successful load and when a store finds the key already on disk; evicting by
    write time alone (FIFO) kept a chunk LMCache had dropped whenever a hit had refreshed another."""

    def __init__(self, name: str, directory: str, max_bytes: int, *, read_delay_s: float = 0.0,
                 index_in_memory: bool = False) -> None:
        self.name = name
        self.read_delay_s = read_delay_s  # injected extra latency per chunk read (a slower tier)
        self.directory = directory
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        # LMCache's in-process local-disk backend finds chunks through a dict in the engine's memory
        # (no directory scan at start): files left by an earlier process are not hits. With
        # ``index_in_memory`` the emulator does the same, so it is never kinder than LMCache.
        self._index: Optional[set[bytes]] = set() if index_in_memory else None
        # bytes in the directory as last counted plus what we admitted since; rescanned (counting other
        # instances' files too) only when this estimate reaches the bound, not on every write
        self._used: Optional[int] = None
        # admitted (room made, as LMCache's submit_put_task does) but not yet written: digest -> bytes
        self._pending: dict[bytes, int] = {}
        self._refused: set[bytes] = set()  # submitted when no room could be made: never written
        os.makedirs(directory, exist_ok=True)

    def path(self, digest: bytes) -> str:
        return os.path.join(self.directory, digest.hex() + SUFFIX)

    def exists(self, digest: bytes) -> bool:
        if self._index is not None and digest not in self._index:
            return False
        return os.path.exists(self.path(digest))

    def read(self, digest: bytes, content: Optional[Any] = None) -> tuple[int, str]:
        if self._index is not None and digest not in self._index:
            raise FileNotFoundError(self.path(digest))  # not in this process's index: a miss
        path = self.path(digest)
        out = directio.read_chunk(path, digest, content)
        self._touch(path)  # after the load succeeded, as LMCache updates its LRU
        if self.read_delay_s > 0:
            time.sleep(self.read_delay_s)
        return out

    @staticmethod
    def _touch(path: str) -> None:
        """Make ``path`` the most recently used chunk. Writes are stamped here too: the kernel
        stamps a write from a clock that ticks every few milliseconds, so a chunk written just
        after a hit would look older than the chunk the hit refreshed."""
        now = time.time_ns()
        try:
            os.utime(path, ns=(now, now))
        except FileNotFoundError:
            pass  # evicted meanwhile (by this tier or another instance): nothing to refresh

    def usage(self) -> tuple[int, list[tuple[int, str, int]]]:
        """Bytes used by chunk files (ours and any other instance's) and the files, least recently
        used first."""
        files: list[tuple[int, str, int]] = []
        total = 0
        try:
            with os.scandir(self.directory) as it:
                for entry in it:
                    if not entry.name.endswith(SUFFIX):
                        continue
                    try:
                        st = entry.stat()
                    except FileNotFoundError:
                        continue  # evicted concurrently by another instance
                    files.append((st.st_mtime_ns, entry.path, st.st_size))
                    total += st.st_size
        except FileNotFoundError:
            os.makedirs(self.directory, exist_ok=True)
        files.sort()
        return total, files

    def _make_room(self, nbytes: int) -> int:
        """Evict the least recently used chunk files until ``nbytes`` more fit; returns how many."""
        if self.max_bytes <= 0:
            return 0
        if nbytes > self.max_bytes:
            raise OSError(errno.EFBIG, f"a chunk of {nbytes} B exceeds the {self.name} tier size {self.max_bytes} B")
        if self._used is not None and self._used + nbytes <= self.max_bytes:
            self._used += nbytes
            return 0
        total, files = self.usage()
        pending = sum(self._pending.values())  # admitted, their files not written yet: their room is taken
        if pending + nbytes > self.max_bytes:
            # LMCache refuses such a store without evicting ("Insufficient evictable disk cache space")
            raise OSError(errno.ENOSPC, f"no room in the {self.name} tier: {pending} B of stores admitted and "
                          f"not yet written, {nbytes} B more, {self.max_bytes} B in all")
        total += pending
        evicted = 0
        for _, path, size in files:
            if total + nbytes <= self.max_bytes:
                break
            try:
                remove_file(path, within=self.directory, marker=SUFFIX, missing_ok=False)
            except FileNotFoundError:
                pass
            total -= size
            evicted += 1
        self._used = total + nbytes
        return evicted

    def admit(self, digest: bytes, nbytes: int) -> tuple[bool, int]:
        """Make room for a chunk when its store is submitted, before the write: LMCache's local-disk
        ``submit_put_task`` evicts (LRU) under its lock, then writes asynchronously, so a chunk past
        the tier's size is gone as soon as the store that displaced it was submitted, however far
        behind the disk is. Evicting only at the write kept chunks LMCache had dropped and gave a
        cyclic working set over the tier's size disk hits (the demo cliff: 24.6% where LRU gives 0).
        Returns (admitted, chunks evicted); a chunk present (made the most recently used, as LMCache
        does) or already admitted is not admitted. When the stores admitted and not yet written
        leave no room, OSError ENOSPC, and the chunk's write is skipped, as LMCache skips the store."""
        with self._lock:
            if digest in self._pending:
                return False, 0
            if self._present(digest):
                self._touch(self.path(digest))
                return False, 0
            try:
                evicted = self._make_room(nbytes)
            except OSError:
                self._refused.add(digest)  # skipped, as LMCache skips it: its write is not done either
                raise
            self._pending[digest] = nbytes
            return True, evicted

    def write(self, digest: bytes, data: bytes) -> tuple[bool, int]:
        """Write a chunk, admitted first (:meth:`admit`) or, if not, admitted now; returns (written,
        chunks evicted to make room now). A chunk already present is not written again."""
        path = self.path(digest)
        with self._lock:
            if digest in self._refused:
                self._refused.discard(digest)
                return False, 0
            evicted = 0
            if digest not in self._pending:
                if self._present(digest):
                    return False, 0
                evicted = self._make_room(len(data))
            try:
                directio.write_chunk(path, data)
                self._touch(path)
            except OSError:
                self._used = None  # its room was counted: recount at the next bounded admission
                raise
            finally:
                self._pending.pop(digest, None)
            if self._index is not None:
                self._index.add(digest)
            return True, evicted

    def _present(self, digest: bytes) -> bool:
        return (self._index is None or digest in self._index) and os.path.exists(self.path(digest))

    def delete(self, digest: bytes) -> bool:
        """Remove one chunk file; returns whether it was there."""
        with self._lock:
            try:
                remove_file(self.path(digest), within=self.directory, marker=SUFFIX, missing_ok=False)
            except FileNotFoundError:
                return False
            if self._index is not None:
                self._index.discard(digest)
            self._used = None  # recount at the next bounded write
            return True

    def clear(self) -> int:
        _, files = self.usage()
        for _, path, _ in files:
            try:
                remove_file(path, within=self.directory, marker=SUFFIX, missing_ok=False)
            except FileNotFoundError:
                pass
        return len(files)


def probe_read_mode(directory: str) -> Optional[str]:
    """Which page-cache bypass reads in ``directory`` get (write and read back a probe file)."""
    path = os.path.join(directory, f".kvgate-probe-{os.getpid()}")
    try:
        directio.write_chunk(path, directio.chunk_payload(b"\0" * 32, directio.ALIGN))
        _, mode = directio.read_chunk(path)
        return mode
    except OSError as exc:
        log.warning("cannot probe %s: %s", directory, exc)
        return None
    finally:
        try:
            remove_file(path, within=directory, marker=".kvgate-probe-")
        except OSError:
            pass

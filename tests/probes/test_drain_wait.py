"""The drain wait of the gates' storage protocol (``harness.probes.drain``) on this machine's disk.

The writes go to a filesystem of the test's own (ext4 on a loop device over a file on a second such
filesystem, over a file on this machine's disk, created here as root and removed afterwards): every
fio probe's drain calls ``sync -f`` on its own directory, and on a shared filesystem any of them
flushed this test's pages before the drain's first look. ``sync -f`` flushes one filesystem only, so
theirs leave this one be. Not a ``timing`` test: it waits on the kernel, not on time."""

from __future__ import annotations

import ctypes
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.probes.backing import resolve_backing
from harness.probes.drain import QUIET_POLLS, wait_drained
from harness.remote.base import RunResult
from harness.remote.local import LocalExecutor
from tests.support.background import Background
from tests.support.loopfs import Frozen, loop_filesystem, sh


@dataclass(frozen=True)
class Stack:
    mnt: Path  # ext4 on ``loop`` ...
    loop: str  # ... whose image file is on the filesystem mounted at ``outer``
    outer: Path


@pytest.fixture
def own_filesystem(tmp_path: Path) -> Iterator[Stack]:
    """ext4 on a loop device over a 256 MiB file, which lives on ext4 on a second loop device (the
    outer filesystem, one the test may freeze). The inner loop device writes its file with direct
    I/O, so what the drain flushes leaves no second copy dirty behind."""
    outer, mnt = tmp_path / "outer", tmp_path / "mnt"
    outer.mkdir()
    mnt.mkdir()
    with loop_filesystem(tmp_path / "outer.img", "320M", outer), \
            loop_filesystem(outer / "fs.img", "256M", mnt, direct_io=True) as loop:
        yield Stack(mnt, loop.rsplit("/", 1)[-1], outer)


class _FirstLook(LocalExecutor):
    """Calls ``then`` once its first command, the drain's first look at the node, has returned."""

    def __init__(self, then: Callable[[], None]) -> None:
        super().__init__("n1")
        self._then: Callable[[], None] | None = then

    def run(self, argv: Sequence[str], **kwargs: Any) -> RunResult:
        try:
            return super().run(argv, **kwargs)
        finally:
            then, self._then = self._then, None
            if then is not None:
                then()


def _start_writeback(fd: int, nbytes: int) -> None:
    """sync_file_range(SYNC_FILE_RANGE_WRITE): submit the range's dirty pages for writeback and
    return without waiting for it (Python has no binding; the C library has)."""
    libc = ctypes.CDLL(None, use_errno=True)
    fn = libc.sync_file_range
    fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    if fn(fd, 0, nbytes, 2) != 0:  # 2 = SYNC_FILE_RANGE_WRITE
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _lay_out_before_the_freeze(path: Path, mnt: Path) -> None:
    """The writer's file, its 32 MiB allocated and on disk, and the filesystem's journal idle, before
    the freeze: after it the writer only overwrites blocks already allocated. A file created after
    the freeze waited for the thaw in a fresh-clone CI run beside a CPU hog (the test timed out at
    300 s with the writer in ``open``): the journal's periodic commit of metadata dirtied before the
    freeze (the mount's) was stuck behind the frozen filesystem, and the create needed buffers that
    commit held. Reproduced here by dirtying metadata, freezing and waiting 6 s: a create, or an
    allocating write submitted 6 s after its ``write``, waits for the thaw; overwrites of blocks laid
    out and synced before the freeze do not, even 6 s late."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, bytes(32 * 2**20))
        os.fsync(fd)
    finally:
        os.close(fd)
    sh("sync", "-f", str(mnt))  # commits the journal


def _write_behind_a_freeze(path: Path, frozen: threading.Event,
                           written: threading.Event) -> Callable[[threading.Event], None]:
    """Once the outer filesystem is frozen: 32 MiB buffered over the file laid out before the freeze,
    writeback of the first 4 MiB submitted (it cannot finish: the loop device's own writes wait on
    the freeze, so those pages stay under writeback until the thaw), then ``written`` set.
    ``posix_fadvise(DONTNEED)`` did not do: it may submit nothing (a fresh-clone CI run: the first
    look saw the 32 MiB still dirty, none under writeback); an fdatasync of all 32 MiB did not
    either: the loop device's queue takes only part of it, so the machine-wide Writeback never
    reached 32 MiB."""
    def work(stop: threading.Event) -> None:
        assert frozen.wait(60), "the outer filesystem was never frozen"
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, os.urandom(2**20) * 32)
            _start_writeback(fd, 4 * 2**20)
            written.set()
        finally:
            os.close(fd)
    return work


def _writeback_bytes() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("Writeback:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no Writeback line in /proc/meminfo")


def _writes_in_flight(loop: str) -> int:
    """Writes only: the writer's open of its file has the loop device read, and a look taken on that
    read alone came before the writes (seen: nothing dirty, nothing in flight at the first look)."""
    return int(Path(f"/sys/class/block/{loop}/inflight").read_text().split()[1])


def test_drain_waits_for_writes_in_flight_and_records_them(own_filesystem: Stack) -> None:
    """The node is busy at the drain's first look because the test holds it busy until then: the
    loop device's writes wait on a frozen filesystem, thawed once the drain has looked. Dirty pages
    written and left were not enough: when memory was short, the kernel's background threshold fell
    below the drain's idle amount and writeback had taken 96 MiB down to 52 MiB, nothing in flight,
    before the first look (a fresh-clone CI run; reproduced with ``dirty_background_bytes`` at 32 MiB,
    as was a writer still writing during the look)."""
    fs = own_filesystem
    devices = resolve_backing(LocalExecutor("n1"), str(fs.mnt)).devices
    assert fs.loop in devices and len(devices) >= 3  # this loop device, the outer one, this machine's disk
    frozen, written = threading.Event(), threading.Event()
    _lay_out_before_the_freeze(fs.mnt / "dirty", fs.mnt)
    with Background(_write_behind_a_freeze(fs.mnt / "dirty", frozen, written), name="writer") as bg, \
            Frozen(fs.outer) as freeze:
        frozen.set()
        # the data's writeback, not only a write in flight: beside a CPU hog the writer was still
        # filling its buffer while a journal write was in flight, and the first look saw 2 MiB dirty,
        # nothing under writeback. Once ``written`` is set this file's 4 MiB are under writeback
        # until the thaw. Bounded well inside the test's timeout: the block's end thaws, and a freeze
        # held for 300 s stalled other tests' syncs past their own timeouts.
        deadline = time.monotonic() + 60
        while not (written.is_set() and _writes_in_flight(fs.loop) and _writeback_bytes() > 0):
            bg.check()
            assert time.monotonic() < deadline, (
                f"60 s after the freeze: written={written.is_set()}, writes in flight on {fs.loop} "
                f"{_writes_in_flight(fs.loop)}, Writeback {_writeback_bytes()} B")
            time.sleep(0.05)  # polls a condition the kernel sets
        rec = wait_drained(_FirstLook(freeze.thaw), str(fs.mnt), devices, timeout_s=60)
    assert rec.first.inflight[fs.loop] > 0 and rec.first.writeback_bytes > 0, rec.describe()
    assert not rec.first.quiet(rec.idle_bytes)  # busy by the drain's own rule ...
    assert rec.drained and rec.last.quiet(rec.idle_bytes) and rec.sync == f"sync -f {fs.mnt}"  # ... then quiet
    assert rec.polls >= QUIET_POLLS and rec.to_json()["first"]["inflight"] == rec.first.inflight


def test_drain_is_bounded_and_says_when_it_did_not_drain(tmp_path: Path) -> None:
    # a device whose in-flight count cannot be read keeps the node "busy": the wait ends at its bound
    rec = wait_drained(LocalExecutor("n1"), str(tmp_path), ["kvgate-no-such-dev"], timeout_s=0.5)
    assert not rec.drained and 0.5 <= rec.waited_s < 10 and "NOT drained within 0.5 s" in rec.describe()

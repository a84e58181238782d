"""The drain wait of the gates' storage protocol (``harness.probes.drain``) on this machine's disk.

The dirty pages are written to a filesystem of the test's own (ext4 on a loop device over a file on
this machine's disk, created here as root and removed afterwards): every fio probe's drain calls
``sync -f`` on its own directory, and on a shared filesystem any of them flushed this test's pages
before the drain's first look (seen in fresh-clone runs: in front, all three writes of 96 MiB; behind
at load average 43, all five). ``sync -f`` flushes one filesystem only, so theirs leave this one be.
Not a ``timing`` test: it waits on the kernel, not on time."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.probes.backing import resolve_backing
from harness.probes.drain import wait_drained
from harness.remote.local import LocalExecutor
from tests.support.loopfs import loop_filesystem


@pytest.fixture
def own_filesystem(tmp_path: Path) -> Iterator[Path]:
    """ext4 on a loop device over a 256 MiB file in tmp_path, mounted at tmp_path/mnt; the loop device
    writes its file with direct I/O, so what the drain flushes leaves no second copy dirty behind."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with loop_filesystem(tmp_path / "fs.img", "256M", mnt, direct_io=True):
        yield mnt


def test_drain_waits_for_dirty_pages_and_records_them(own_filesystem: Path) -> None:
    ex = LocalExecutor("n1")
    devices = resolve_backing(ex, str(own_filesystem)).devices
    assert any(d.startswith("loop") for d in devices)  # the loop device and, under it, this machine's disk
    with open(own_filesystem / "dirty", "wb") as fh:  # buffered, never fsync'd: dirty pages
        fh.write(os.urandom(2**20) * 96)
    rec = wait_drained(ex, str(own_filesystem), devices, timeout_s=60)
    # the node was busy when the drain began (by the drain's own rule: pages past the idle amount or
    # I/O in flight), not a byte count: beside a CPU hog the kernel had already written 68 of the 96
    # MiB at the first look (28 MiB still in writeback, 27 requests in flight on the loop device)
    assert not rec.first.quiet(rec.idle_bytes), rec.describe()
    assert rec.drained and rec.last.quiet(rec.idle_bytes) and rec.sync == f"sync -f {own_filesystem}"
    assert rec.to_json()["first"]["dirty_bytes"] == rec.first.dirty_bytes


def test_drain_is_bounded_and_says_when_it_did_not_drain(tmp_path: Path) -> None:
    # a device whose in-flight count cannot be read keeps the node "busy": the wait ends at its bound
    rec = wait_drained(LocalExecutor("n1"), str(tmp_path), ["kvgate-no-such-dev"], timeout_s=0.5)
    assert not rec.drained and 0.5 <= rec.waited_s < 10 and "NOT drained within 0.5 s" in rec.describe()

"""The drain wait of the gates' storage protocol (``harness.probes.drain``) on this machine's disk.

Not a ``timing`` test on purpose: in front, three timing tests at a time run fio probes whose drains
each call ``sync``, and a sync by any other process flushes this test's dirty pages before the
drain's first look (seen in a fresh-clone run: all three writes of 96 MiB already in writeback)."""

from __future__ import annotations

import os
from pathlib import Path

from harness.probes.backing import resolve_backing
from harness.probes.drain import wait_drained
from harness.remote.local import LocalExecutor


def test_drain_waits_for_dirty_pages_and_records_them(tmp_path: Path) -> None:
    ex = LocalExecutor("n1")
    devices = resolve_backing(ex, str(tmp_path)).devices
    assert devices  # the temp directory is on a block device of this machine
    # another process's sync can still flush the pages between the write and the drain's first look:
    # the write is the test's setup, so it is made again, at most five times; the drain's record is
    # what is asserted
    for _ in range(5):
        with open(tmp_path / "dirty", "wb") as fh:  # buffered, never fsync'd: dirty pages
            fh.write(os.urandom(2**20) * 96)
        rec = wait_drained(ex, str(tmp_path), devices, timeout_s=60)
        if rec.first.pending_bytes >= 64 * 2**20:
            break
    assert rec.first.pending_bytes >= 64 * 2**20
    assert rec.drained and rec.last.quiet(rec.idle_bytes) and rec.sync.startswith("sync")
    assert rec.to_json()["first"]["dirty_bytes"] == rec.first.dirty_bytes


def test_drain_is_bounded_and_says_when_it_did_not_drain(tmp_path: Path) -> None:
    # a device whose in-flight count cannot be read keeps the node "busy": the wait ends at its bound
    rec = wait_drained(LocalExecutor("n1"), str(tmp_path), ["kvgate-no-such-dev"], timeout_s=0.5)
    assert not rec.drained and 0.5 <= rec.waited_s < 10 and "NOT drained within 0.5 s" in rec.describe()

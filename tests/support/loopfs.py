"""An ext4 filesystem on a loop device over an image file, mounted for one test (root only), and
removed afterwards: what the storage-stack tests need a real block device for; and a freeze of one
(:class:`Frozen`) that holds a loop device above it busy."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def sh(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout.strip()  # noqa: S603


@contextmanager
def loop_filesystem(image: Path, size: str, mnt: Path, *, direct_io: bool = False) -> Iterator[str]:
    """ext4 on /dev/loopN over ``image`` (made ``size`` long), mounted at ``mnt``: yields the loop
    device. ``direct_io``: the loop device writes its file with direct I/O (no second dirty copy in
    the page cache). The mount, the device and the image are removed afterwards."""
    loop, mounted = "", False
    try:
        sh("truncate", "-s", size, str(image))
        loop = sh("losetup", "-f", "--show", *(["--direct-io=on"] if direct_io else []), str(image))
        # inode tables and journal zeroed now, not by a kernel thread after the mount: its writes and
        # journal commits would land inside a test's freeze (see tests/probes/test_drain_wait.py)
        sh("mkfs.ext4", "-q", "-E", "lazy_itable_init=0,lazy_journal_init=0", loop)
        sh("mount", loop, str(mnt))
        mounted = True
        yield loop
    finally:
        if mounted:
            subprocess.run(["umount", str(mnt)], check=False)  # noqa: S603
        if loop:
            subprocess.run(["losetup", "-d", loop], check=False)  # noqa: S603
        image.unlink(missing_ok=True)


class Frozen:
    """``fsfreeze -f`` on a mounted filesystem until :meth:`thaw` (idempotent) or the block's end.

    Writes to a frozen filesystem wait, so a loop device whose image file lives on it keeps its
    requests in flight until the thaw: a block device that is busy for as long as a test needs."""

    def __init__(self, mnt: Path) -> None:
        self._mnt = mnt
        self._frozen = False
        self._lock = threading.Lock()

    def __enter__(self) -> Frozen:
        sh("fsfreeze", "-f", str(self._mnt))
        self._frozen = True
        return self

    def thaw(self) -> None:
        with self._lock:
            if self._frozen:
                self._frozen = False
                sh("fsfreeze", "-u", str(self._mnt))

    def __exit__(self, *exc: object) -> None:
        self.thaw()

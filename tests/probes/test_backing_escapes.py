"""RAM that once passed for storage because the backing chain lost its trail (issue 51, item 5), each
built here for real, as root, and torn down afterwards (loop devices detached, mounts undone, also
when the test fails): a loop device whose /dev/shm file was deleted after ``losetup``, a loop over
a file in a tmpfs unmounted with ``umount -l``, an overlay with its upper layer on tmpfs, and one
whose tmpfs upper layer was lazily unmounted under it. Each is refused unless declared ``kind:
memory``; the disk-backed twins of each stay accepted (no false refusal)."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from harness.config.inventory import StorageTarget
from harness.probes.backing import BackingNotResolved, MemoryBackedTarget, check_backing, resolve_backing
from harness.remote.local import LocalExecutor
from tests.support.loopfs import loop_filesystem, sh

EX = LocalExecutor("n1")


@contextmanager
def mounted(mnt: Path, *argv: str) -> Iterator[Path]:
    """``mount ARGV mnt`` for the block; unmounted afterwards (lazily if it is busy, never left)."""
    mnt.mkdir(parents=True, exist_ok=True)
    sh("mount", *argv, str(mnt))
    try:
        yield mnt
    finally:
        if subprocess.run(["umount", str(mnt)], check=False).returncode != 0:  # noqa: S603
            subprocess.run(["umount", "-l", str(mnt)], check=False)  # noqa: S603


def _target(path: Path, kind: str = "other") -> StorageTarget:
    return StorageTarget(name="cand", path=str(path), kind=kind)  # type: ignore[arg-type]


def test_a_loop_file_deleted_from_dev_shm_after_losetup_is_memory(tmp_path: Path) -> None:
    image = Path(f"/dev/shm/kvgate-test-{uuid.uuid4().hex[:8]}.img")
    (tmp_path / "mnt").mkdir()
    with loop_filesystem(image, "32M", tmp_path / "mnt") as loop:
        image.unlink()  # the loop device still holds the file; its path leads nowhere now
        name = loop.rsplit("/", 1)[1]
        backing = resolve_backing(EX, str(tmp_path / "mnt"))
        assert backing.chain[1].startswith(f"{name} (loop, backing file {image}, deleted: inode ")
        assert backing.chain[2].endswith("(tmpfs on /dev/shm)") and backing.memory is not None
        with pytest.raises(MemoryBackedTarget) as refused:
            check_backing(EX, _target(tmp_path / "mnt"))
        assert f"backing file {image}, deleted" in str(refused.value) and "tmpfs" in str(refused.value)
        assert check_backing(EX, _target(tmp_path / "mnt", "memory")).memory is not None


def test_a_loop_file_in_a_lazily_unmounted_tmpfs_is_not_resolved(tmp_path: Path) -> None:
    ram, mnt = tmp_path / "ram", tmp_path / "mnt"
    mnt.mkdir()
    with ExitStack() as stack:
        stack.enter_context(mounted(ram, "-t", "tmpfs", "-o", "size=64M", "kvgate-test"))
        loop = stack.enter_context(loop_filesystem(ram / "disk.img", "32M", mnt))
        sh("umount", "-l", str(ram))  # the tmpfs lives on under the loop, with no path to it
        backing = resolve_backing(EX, str(mnt))
        assert backing.memory is None and backing.unresolved
        assert "mounted nowhere" in backing.chain[-1] and loop.rsplit("/", 1)[1] in backing.chain[1]
        with pytest.raises(BackingNotResolved) as refused:
            check_backing(EX, _target(mnt))
        text = str(refused.value)
        assert text.startswith("node n1, target cand: backing not resolved: ") and "mounted nowhere" in text


def test_a_loop_file_on_disk_stays_accepted(tmp_path: Path) -> None:
    (tmp_path / "mnt").mkdir()
    with loop_filesystem(tmp_path / "disk.img", "32M", tmp_path / "mnt") as loop:
        backing = check_backing(EX, _target(tmp_path / "mnt"))
        assert backing.memory is None and not backing.unresolved
        assert backing.chain[1] == f"{loop.rsplit('/', 1)[1]} (loop, backing file {tmp_path / 'disk.img'})"
        assert backing.chain[-1].endswith("(disk)")


@contextmanager
def overlay(tmp_path: Path, upper_fs: str) -> Iterator[tuple[Path, Path]]:
    """An overlay at tmp_path/merged, its lower layer on the disk and its upper layer (and work
    directory) on ``upper_fs``: "tmpfs" (mounted here) or "disk". Yields (merged, upper's mount)."""
    lower, ram, merged = tmp_path / "lower", tmp_path / "upperfs", tmp_path / "merged"
    lower.mkdir()
    with ExitStack() as stack:
        if upper_fs == "tmpfs":
            stack.enter_context(mounted(ram, "-t", "tmpfs", "-o", "size=64M", "kvgate-test"))
        (ram / "up").mkdir(parents=True)
        (ram / "work").mkdir()
        opts = f"lowerdir={lower},upperdir={ram / 'up'},workdir={ram / 'work'}"
        stack.enter_context(mounted(merged, "-t", "overlay", "-o", opts, "overlay"))
        yield merged, ram


def test_an_overlay_with_its_upper_layer_on_tmpfs_is_memory(tmp_path: Path) -> None:
    with overlay(tmp_path, "tmpfs") as (merged, ram):
        backing = resolve_backing(EX, str(merged))
        assert backing.chain[:3] == [f"{merged} (overlayfs)", f"overlay upper layer {ram / 'up'}",
                                     f"{ram / 'up'} (tmpfs)"]
        assert f"overlay lower layer {tmp_path / 'lower'}" in backing.chain
        with pytest.raises(MemoryBackedTarget) as refused:
            check_backing(EX, _target(merged))
        assert f"{ram / 'up'} (tmpfs)" in str(refused.value)


def test_an_overlay_whose_tmpfs_upper_was_lazily_unmounted_is_not_resolved(tmp_path: Path) -> None:
    with overlay(tmp_path, "tmpfs") as (merged, ram):
        sh("umount", "-l", str(ram))  # the overlay still writes to it; its path now shows the disk below
        backing = resolve_backing(EX, str(merged))
        assert backing.memory is None and backing.unresolved
        with pytest.raises(BackingNotResolved) as refused:
            check_backing(EX, _target(merged))
        assert f"{ram / 'up'} (not the overlay's upper layer)" in str(refused.value)


def test_an_overlay_all_on_disk_stays_accepted(tmp_path: Path) -> None:
    with overlay(tmp_path, "disk") as (merged, ram):
        backing = check_backing(EX, _target(merged))
        assert backing.memory is None and not backing.unresolved and backing.devices
        assert f"{ram / 'up'} (ext2/ext3)" in backing.chain


def test_a_filesystem_with_no_device_and_no_server_is_not_resolved(tmp_path: Path) -> None:
    """An anonymous filesystem (major 0) that is neither memory by type, an overlay, a network
    filesystem nor on a block device: mqueue here (a fuse filesystem would need a daemon), whose
    bytes are in fact kernel memory. Its chain cannot name a device, so it is refused."""
    with mounted(tmp_path / "anon", "-t", "mqueue", "kvgate-test"):
        backing = resolve_backing(EX, str(tmp_path / "anon"))
        assert backing.memory is None and backing.devices == []
        assert backing.unresolved == [f"mqueue filesystem kvgate-test on {tmp_path / 'anon'} has no block device "
                                      "or server to follow"]
        with pytest.raises(BackingNotResolved, match="backing not resolved: "):
            check_backing(EX, _target(tmp_path / "anon"))

"""A storage target's backing, followed through the stack on this machine: ext4 on a loop device whose
file lives in /dev/shm is RAM, and is refused (exit 2, target and chain named) unless declared
``kind: memory``. The loop device is created here, as root, and removed afterwards."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.config.inventory import StorageTarget
from harness.probes.backing import resolve_backing
from harness.probes.fio_rounds import MemoryBackedTarget, check_backing
from harness.remote.local import LocalExecutor
from tests.support.gate1 import run_g1
from tests.support.loopfs import loop_filesystem


@pytest.fixture
def ram_backed_mount(tmp_path: Path) -> Iterator[tuple[Path, str, str]]:
    """ext4 on /dev/loopN on a file in /dev/shm, mounted under tmp_path: (mount point, loop, file)."""
    image = Path(f"/dev/shm/kvgate-test-{uuid.uuid4().hex[:8]}.img")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with loop_filesystem(image, "128M", mnt) as loop:
        yield mnt, loop, str(image)


def test_a_loop_device_on_a_tmpfs_file_is_memory(ram_backed_mount: tuple[Path, str, str]) -> None:
    mnt, loop, image = ram_backed_mount
    backing = resolve_backing(LocalExecutor("n1"), str(mnt))
    name = loop.rsplit("/", 1)[1]
    assert backing.memory is not None and "tmpfs" in backing.memory
    assert backing.chain == [f"{mnt} (ext2/ext3)", f"{name} (loop, backing file {image})", f"{image} (tmpfs)"]
    assert backing.devices == [name]
    with pytest.raises(MemoryBackedTarget) as refused:
        check_backing(LocalExecutor("n1"), StorageTarget(name="ramdisk", path=str(mnt)))
    assert "ramdisk" in str(refused.value) and f"{name} (loop, backing file {image})" in str(refused.value)
    # declared as a RAM tier on purpose: accepted, and its chain still recorded
    declared = check_backing(LocalExecutor("n1"), StorageTarget(name="ramdisk", path=str(mnt), kind="memory"))
    assert declared.memory is not None


def test_a_disk_directory_is_not_memory(tmp_path: Path) -> None:
    backing = resolve_backing(LocalExecutor("n1"), str(tmp_path))
    assert backing.memory is None and backing.devices and "(disk)" in backing.chain[-1]


@pytest.mark.parametrize("deleted", [False, True], ids=["file-in-dev-shm", "file-deleted-after-losetup"])
def test_g1_refuses_a_ram_backed_target_with_exit_2(ram_backed_mount: tuple[Path, str, str],
                                                      tmp_path: Path, deleted: bool) -> None:
    """Issue 51's end-to-end escape included: the loop's /dev/shm file deleted after ``losetup`` passed
    G1 (3.16 GB/s "storage"); it is refused before anything is measured, the deleted file named."""
    mnt, loop, image = ram_backed_mount
    if deleted:
        Path(image).unlink()
    res = run_g1(tmp_path, {"name": "ramdisk", "path": str(mnt)}, campaign="ram")
    assert res.returncode == 2, res.stdout + res.stderr
    name = loop.rsplit("/", 1)[1]
    assert "target ramdisk" in res.stderr and f"{name} (loop, backing file {image}" in res.stderr
    assert ("deleted: inode" in res.stderr and "(tmpfs on /dev/shm)" in res.stderr) if deleted else \
        f"{image} (tmpfs)" in res.stderr
    assert not (tmp_path / "r" / "ram" / "G1" / "result.json").exists() or \
        '"PASS"' not in (tmp_path / "r" / "ram" / "G1" / "result.json").read_text()

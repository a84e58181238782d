"""The backing chain through devices this kernel cannot make (no brd, zram, dm, md or pmem module, and
no module loading): the chain is walked in a sysfs tree laid out as the kernel lays it out
(``dev/block/MAJ:MIN`` and ``class/block/NAME`` link into ``devices/``; software devices live
under ``devices/virtual/block``, a dm or md device lists its members in ``slaves/``; pmem under
its ndbus region). These trees are written here from the kernel's layout, not captured from a
machine that had the devices. The target is a real block device node (mknod, as root) whose
numbers the fake tree resolves."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from harness.config.inventory import StorageTarget
from harness.probes.backing import Backing, BackingNotResolved, MemoryBackedTarget, check_backing, resolve_backing
from harness.remote.local import LocalExecutor

EX = LocalExecutor("n1")
PMEM_PARENT = "devices/LNXSYSTM:00/LNXSYBUS:00/ACPI0012:00/ndbus0/region0/namespace0.0/block"
NVME_PARENT = "devices/pci0000:00/0000:00:04.0/nvme/nvme0"


class FakeSysfs:
    def __init__(self, root: Path) -> None:
        self.root = root

    def device(self, name: str, number: str, *, parent: str = "devices/virtual/block",
               slaves: tuple[str, ...] = (), partition_of: str = "") -> None:
        where = self.root / parent / (f"{partition_of}/{name}" if partition_of else name)
        (where / "slaves").mkdir(parents=True)
        (where / "dev").write_text(number + "\n")
        if partition_of:
            (where / "partition").write_text("1\n")
        for member in slaves:
            (where / "slaves" / member).symlink_to(f"../../{member}")
        for link in (self.root / "dev/block" / number, self.root / "class/block" / name):
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(os.path.relpath(where, link.parent))


@pytest.fixture
def fake(tmp_path: Path) -> FakeSysfs:
    return FakeSysfs(tmp_path / "sys")


def _node(tmp_path: Path, major: int, minor: int) -> str:
    path = tmp_path / f"blk-{major}-{minor}"
    if not path.exists():
        os.mknod(path, stat.S_IFBLK | 0o600, os.makedev(major, minor))
    return str(path)


def _resolve(tmp_path: Path, fake: FakeSysfs, major: int, minor: int) -> Backing:
    return resolve_backing(EX, _node(tmp_path, major, minor), sysfs=str(fake.root))


def test_brd_ram_disk_is_memory(tmp_path: Path, fake: FakeSysfs) -> None:
    fake.device("ram0", "1:0")
    backing = _resolve(tmp_path, fake, 1, 0)
    assert backing.chain == ["ram0 (memory)"] and backing.memory == "ram0 is a RAM-backed block device"


def test_dm_linear_over_brd_is_memory_through_its_member(tmp_path: Path, fake: FakeSysfs) -> None:
    fake.device("ram0", "1:0")
    fake.device("dm-0", "253:0", slaves=("ram0",))
    backing = _resolve(tmp_path, fake, 253, 0)
    assert backing.chain == ["dm-0 (dm, members ram0)", "ram0 (memory)"] and backing.memory
    assert backing.devices == ["dm-0", "ram0"]


def test_md_raid_with_one_zram_member_is_memory(tmp_path: Path, fake: FakeSysfs) -> None:
    fake.device("nvme0n1", "259:0", parent=NVME_PARENT)
    fake.device("zram0", "252:0")
    fake.device("md0", "9:0", slaves=("nvme0n1", "zram0"))
    backing = _resolve(tmp_path, fake, 9, 0)
    assert backing.chain == ["md0 (md, members nvme0n1 zram0)", "nvme0n1 (disk)", "zram0 (memory)"]
    assert backing.memory == "zram0 is a RAM-backed block device"


def test_a_pmem_namespace_partition_is_memory(tmp_path: Path, fake: FakeSysfs) -> None:
    fake.device("pmem0", "259:1", parent=PMEM_PARENT)
    fake.device("pmem0p1", "259:2", parent=PMEM_PARENT, partition_of="pmem0")
    backing = _resolve(tmp_path, fake, 259, 2)
    assert backing.chain == ["pmem0p1 (partition)", "pmem0 (memory)"] and backing.memory


def test_dm_over_nvme_partitions_is_storage(tmp_path: Path, fake: FakeSysfs) -> None:
    fake.device("nvme0n1", "259:0", parent=NVME_PARENT)
    fake.device("nvme0n1p1", "259:3", parent=NVME_PARENT, partition_of="nvme0n1")
    fake.device("dm-1", "253:1", slaves=("nvme0n1p1",))
    backing = _resolve(tmp_path, fake, 253, 1)
    assert backing.chain == ["dm-1 (dm, members nvme0n1p1)", "nvme0n1p1 (partition)", "nvme0n1 (disk)"]
    assert backing.memory is None and not backing.unresolved


def test_an_nvme_multipath_head_is_a_disk_not_an_unresolved_virtual_device(tmp_path: Path, fake: FakeSysfs) -> None:
    # native NVMe multipath: the namespace head lives under devices/virtual/nvme-subsystem, not
    # devices/virtual/block, and has no slaves: it is the disk
    fake.device("nvme0n1", "259:4", parent="devices/virtual/nvme-subsystem/nvme-subsys0")
    backing = _resolve(tmp_path, fake, 259, 4)
    assert backing.chain == ["nvme0n1 (disk)"] and not backing.unresolved and backing.memory is None


def test_a_virtual_device_with_no_members_is_not_resolved(tmp_path: Path, fake: FakeSysfs) -> None:
    fake.device("dm-2", "253:2")  # dm-zero, or a table we cannot see: nothing under it to name
    fake.device("nbd0", "43:0")
    for minor, major, name in ((2, 253, "dm-2"), (0, 43, "nbd0")):
        backing = _resolve(tmp_path, fake, major, minor)
        assert backing.memory is None
        assert backing.unresolved == [f"{name} is a virtual block device with no member devices to follow"]
    with pytest.raises(BackingNotResolved) as refused:
        check_backing(EX, StorageTarget(name="t", path=_node(tmp_path, 253, 2)), sysfs=str(fake.root))
    assert "backing not resolved: dm-2 (dm): dm-2 is a virtual block device" in str(refused.value)


def test_a_device_missing_from_sysfs_is_not_resolved(tmp_path: Path, fake: FakeSysfs) -> None:
    fake.root.mkdir()
    backing = _resolve(tmp_path, fake, 8, 16)
    assert backing.unresolved == ["block device 8:16 is not in sysfs"]


def test_declared_memory_is_accepted_and_undeclared_refused(tmp_path: Path, fake: FakeSysfs) -> None:
    fake.device("ram0", "1:0")
    path = _node(tmp_path, 1, 0)
    with pytest.raises(MemoryBackedTarget):
        check_backing(EX, StorageTarget(name="t", path=path), sysfs=str(fake.root))
    declared = check_backing(EX, StorageTarget(name="t", path=path, kind="memory"), sysfs=str(fake.root))
    assert declared.memory == "ram0 is a RAM-backed block device"

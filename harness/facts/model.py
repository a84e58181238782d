"""The facts a node reports, as JSON-serialisable pydantic models.

``None`` means "could not be collected" (the tool is missing or failed: see ``NodeFacts.missing``
and ``NodeFacts.errors``); an empty list means "collected, and there are none".
"""

from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, ConfigDict, Field


class _Fact(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Accelerator(_Fact):
    """One logical accelerator device (a GPU, a GPU partition, or one chip of an NPU card)."""

    index: int = Field(description="Logical index as the tool numbers it")
    card: int = Field(description="Physical card/package ordinal; partitions and chips share it")
    chip: int = Field(default=0, description="Chip (or partition) number within the card")
    model: str = Field(description="Best product name the tool gave")
    names: list[str] = Field(default_factory=list, description="Every name the tool reported")
    memory_bytes: Optional[int] = Field(default=None, description="Device memory (HBM/VRAM) in bytes")
    bus_id: Optional[str] = None
    compute_partition: Optional[str] = Field(default=None, description="AMD: SPX, DPX, QPX, CPX")
    memory_partition: Optional[str] = Field(default=None, description="AMD: NPS1, NPS4")
    health: Optional[str] = None


class NvmeDrive(_Fact):
    device: str = Field(description="Namespace block device, e.g. /dev/nvme0n1")
    controller: Optional[str] = None
    model: str = ""
    serial: str = ""
    firmware: str = ""
    size_bytes: Optional[int] = None
    transport: Optional[str] = Field(default=None, description="pcie, rdma, tcp (NVMe-oF), when known")


class RaidArray(_Fact):
    device: str
    level: str = Field(description="raid0, raid1, raid5, raid6, raid10")
    n_devices: Optional[int] = None
    members: list[str] = Field(default_factory=list, description="Member block devices, by role")


class Mount(_Fact):
    source: str
    target: str
    fstype: str
    options: list[str] = Field(default_factory=list)


class FsUsage(_Fact):
    target: str
    source: str = ""
    fstype: str = ""
    size_bytes: int
    used_bytes: Optional[int] = None
    avail_bytes: Optional[int] = None


class StorageTargetFacts(_Fact):
    """What the node says about one storage target path of the inventory."""

    path: str
    exists: bool
    writable: bool
    mount: Optional[Mount] = None
    usage: Optional[FsUsage] = None
    device_models: Optional[list[str]] = Field(
        default=None, description="Model names of the block devices behind the mount (lsblk, the device and "
        "every device under it, e.g. a RAID's members); [] when none reports one or the mount has no block "
        "device (tmpfs, NFS); None when not collected")


class LinkInfo(_Fact):
    interface: str
    speed_bps: Optional[int] = Field(default=None, description="None when the link is down or unknown")
    link_detected: Optional[bool] = None


class RdmaPort(_Fact):
    device: str
    port: int
    state: str = ""
    link_layer: str = ""
    gid_types: list[str] = Field(default_factory=list, description="e.g. 'IB/RoCE v1', 'RoCE v2'")
    netdevs: list[str] = Field(default_factory=list, description="Network interfaces behind the GIDs")


class OsInfo(_Fact):
    id: str = ""
    version_id: str = ""
    pretty_name: str = ""
    kernel: str = ""


class NodeFacts(_Fact):
    node: str
    collected_at: str
    accelerators: Optional[list[Accelerator]] = None
    accelerator_source: Optional[str] = Field(default=None, description="The tool the accelerators came from")
    nvme: Optional[list[NvmeDrive]] = None
    raid: dict[str, RaidArray] = Field(default_factory=dict, description="By md device")
    mounts: Optional[list[Mount]] = None
    targets: dict[str, StorageTargetFacts] = Field(default_factory=dict,
                                                   description="By inventory target name")
    links: dict[str, LinkInfo] = Field(default_factory=dict)
    rdma: Optional[list[RdmaPort]] = None
    os: Optional[OsInfo] = None
    cpu_model: Optional[str] = Field(default=None, description="lscpu's model name; None when not collected")
    memory_bytes: Optional[int] = Field(default=None, description="MemTotal of /proc/meminfo; None when not "
                                        "collected")
    versions: dict[str, Optional[str]] = Field(default_factory=dict, description="None: not installed")
    missing: list[str] = Field(default_factory=list, description="Tools not found on the node")
    errors: dict[str, str] = Field(default_factory=dict, description="Command -> why its facts are absent")
    raw: dict[str, str] = Field(default_factory=dict, description="Command -> its output, as evidence")

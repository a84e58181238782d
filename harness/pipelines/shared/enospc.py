"""Disk-full lines in an engine's log are a fault of the point they happened in.

An engine that cannot write its KV tier (``No space left on device``, ``ENOSPC``, ``[Errno 28]``)
keeps serving by recomputing, so its figures look valid while the storage under test was not
used. The sweep counts such lines in every instance's stderr log before and after a point; new
ones make the point a recorded fault, and its repetition is not counted.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.engines import EngineInstance
from harness.remote.base import RemoteError

PATTERN = r"No space left on device|ENOSPC|Errno 28\]|Disk quota exceeded|EDQUOT"


def enospc_lines(instances: Sequence[EngineInstance]) -> int:
    """How many disk-full lines the instances' stderr logs hold now (0 when unreadable)."""
    total = 0
    for inst in instances:
        try:
            res = inst.executor.run(["grep", "-c", "-E", "--", PATTERN, inst.handle.stderr_path],
                                    check=False, timeout=60.0)
        except RemoteError:
            continue
        first = res.stdout.strip().splitlines()[:1]
        if res.exit_code in (0, 1) and first and first[0].isdigit():
            total += int(first[0])
    return total


class DiskFullWatch:
    """New disk-full lines across one point (populate, evict, measure). A restarted engine starts a
    fresh log, so a count lower than the last one is read as a new log holding that many lines."""

    def __init__(self, instances: Sequence[EngineInstance]) -> None:
        self.last = enospc_lines(instances)
        self.total = 0

    def check(self, instances: Sequence[EngineInstance]) -> int:
        now = enospc_lines(instances)
        self.total += now - self.last if now >= self.last else now
        self.last = now
        return self.total

"""Wait until a node's writes have drained before a bandwidth is measured, and say so as evidence.

A read measured while gigabytes of earlier writes are still being flushed measures the flush as
much as the read (G4's "after the soak" read 0.71 GB/s against 2.45 before). So before every
measurement: ``sync -f <path>`` (the target's filesystem; plain ``sync`` where ``-f`` is missing)
pushes the dirty pages out, then the node is polled until ``/proc/meminfo`` Dirty + Writeback is at
or below :data:`IDLE_DIRTY_BYTES` and every block device of the target's chain (partitions, dm and
md members, from ``harness.probes.backing``) has zero requests in flight
(``/sys/class/block/<dev>/inflight``), :data:`QUIET_POLLS` polls in a row. The wait is bounded;
a node that never drains is recorded as such (``drained: false``) and its figure is not a
signable one (the caller makes its check INCONCLUSIVE).

The idle level is an absolute figure, not "what it was before": the reading before the "after"
probe includes the soak's writes, so it is not idle. Other processes' writes on a shared node
count too: a drained state is a state of the node, which is what the figure depends on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from harness.remote.base import Executor

IDLE_DIRTY_BYTES = 64 * 2**20
QUIET_POLLS = 2
POLL_S = 0.1
DEFAULT_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class NodeIO:
    """One look at the node's write state."""

    dirty_bytes: int
    writeback_bytes: int
    inflight: dict[str, int]  # device -> reads + writes in flight

    @property
    def pending_bytes(self) -> int:
        return self.dirty_bytes + self.writeback_bytes

    def quiet(self, idle_bytes: int) -> bool:
        return self.pending_bytes <= idle_bytes and not any(self.inflight.values())

    def to_json(self) -> dict[str, object]:
        return {"dirty_bytes": self.dirty_bytes, "writeback_bytes": self.writeback_bytes,
                "inflight": dict(self.inflight)}


@dataclass(frozen=True)
class DrainRecord:
    """What the wait saw: evidence for the figure measured after it."""

    drained: bool
    waited_s: float
    timeout_s: float
    idle_bytes: int
    polls: int
    sync: str
    first: NodeIO
    last: NodeIO

    def describe(self) -> str:
        mib = 2**20
        state = "drained" if self.drained else f"NOT drained within {self.timeout_s:g} s"
        return (f"{state} after {self.waited_s:.1f} s ({self.sync}; Dirty+Writeback "
                f"{self.first.pending_bytes / mib:.0f} -> {self.last.pending_bytes / mib:.0f} MiB, "
                f"idle <= {self.idle_bytes / mib:.0f} MiB; in flight {sum(self.last.inflight.values())} "
                f"on {', '.join(self.last.inflight) or 'no known device'})")

    def to_json(self) -> dict[str, object]:
        return {"drained": self.drained, "waited_s": round(self.waited_s, 3), "timeout_s": self.timeout_s,
                "idle_bytes": self.idle_bytes, "polls": self.polls, "sync": self.sync,
                "first": self.first.to_json(), "last": self.last.to_json()}


def read_node_io(executor: Executor, devices: Sequence[str]) -> NodeIO:
    """Dirty, Writeback and the in-flight counts of ``devices`` in one command."""
    argv = ["cat", "/proc/meminfo", *(f"/sys/class/block/{d}/inflight" for d in devices)]
    res = executor.run(argv, check=False, timeout=30)
    lines = res.stdout.splitlines()
    mem = {}
    counts: list[int] = []
    for line in lines:
        if ":" in line:
            key, _, rest = line.partition(":")
            fields = rest.split()
            if fields and fields[0].isdigit():
                mem[key.strip()] = int(fields[0]) * (1024 if fields[1:2] == ["kB"] else 1)
        else:
            nums = line.split()
            if len(nums) == 2 and all(n.isdigit() for n in nums):
                counts.append(int(nums[0]) + int(nums[1]))
    # A device whose inflight file could not be read is not counted as idle: it keeps the node busy.
    inflight = {d: counts[i] if i < len(counts) else 1 for i, d in enumerate(devices)}
    return NodeIO(mem.get("Dirty", 0), mem.get("Writeback", 0), inflight)


def _sync(executor: Executor, path: str, timeout_s: float) -> str:
    if executor.run(["sync", "-f", path], check=False, timeout=timeout_s).ok:
        return f"sync -f {path}"
    executor.run(["sync"], check=False, timeout=timeout_s)
    return "sync"


def wait_drained(executor: Executor, path: str, devices: Sequence[str], *,
                 timeout_s: float = DEFAULT_TIMEOUT_S, idle_bytes: int = IDLE_DIRTY_BYTES,
                 poll_s: float = POLL_S, clock: Callable[[], float] = time.monotonic) -> DrainRecord:
    """Flush, then poll until the node is quiet (module docstring) or ``timeout_s`` has passed."""
    start = clock()
    first = read_node_io(executor, devices)
    how = _sync(executor, path, timeout_s)
    last = first
    polls = quiet = 0
    while True:
        last = read_node_io(executor, devices)
        polls += 1
        quiet = quiet + 1 if last.quiet(idle_bytes) else 0
        waited = clock() - start
        if quiet >= QUIET_POLLS or waited >= timeout_s:
            return DrainRecord(quiet >= QUIET_POLLS, waited, timeout_s, idle_bytes, polls, how, first, last)
        time.sleep(poll_s)

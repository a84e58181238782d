"""Reachability and basic facts of every node: the library behind ``kvgate ping``."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Optional

from harness.errors import InfraError
from harness.progress import Progress
from harness.remote.base import Executor, RemoteError
from harness.remote.fleet import Fleet

if TYPE_CHECKING:
    from harness.config.inventory import Inventory
    from harness.remote.ray.cluster import MappingReport

# $1 = python interpreter to ask. Prints key=value lines; every value is parsed, never evaluated.
FACTS = r"""printf 'user=%s\n' "$(id -un 2>/dev/null)"
if [ -r /etc/os-release ]; then
  grep -E '^(PRETTY_NAME|NAME|VERSION_ID)=' /etc/os-release | sed 's/^/os_/'
fi
printf 'kernel=%s %s\n' "$(uname -s)" "$(uname -r)"
if command -v -- "$1" >/dev/null 2>&1; then
  printf 'python=%s\n' "$("$1" -c 'import platform; print(platform.python_version())' 2>/dev/null)"
fi
if command -v fio >/dev/null 2>&1; then printf 'fio=%s\n' "$(fio --version 2>/dev/null)"; fi
"""

CLOCK_SAMPLES = 3


class NodesUnreachable(InfraError):
    """At least one node of the inventory could not be reached."""


@dataclass
class PingResult:
    """One node as ``kvgate ping`` sees it."""

    node: str
    reachable: bool
    rtt_ms: Optional[float] = None  # round trip of a trivial command (best of a few)
    user: Optional[str] = None
    os: Optional[str] = None
    python: Optional[str] = None
    fio: Optional[str] = None  # fio's version string, None when absent
    clock_offset_ms: Optional[float] = None  # node clock minus controller clock
    clock_uncertainty_ms: Optional[float] = None  # half the round trip of the best sample
    error: str = ""
    ray_node: Optional[str] = None  # connection: ray nodes: the mapping and the Ray node it names

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def _parse_facts(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip()] = value.strip().strip('"').strip("'")
    return out


def measure_clock(ex: Executor, samples: int = CLOCK_SAMPLES) -> tuple[float, float, float]:
    """(offset_s, uncertainty_s, best_rtt_s): NTP-style, from the sample with the shortest round
    trip; the node's time is taken as read at the midpoint of that round trip."""
    best: Optional[tuple[float, float, float]] = None
    for _ in range(samples):
        t0 = time.time()
        m0 = time.monotonic()
        res = ex.run(["date", "+%s.%N"], timeout=30.0)
        rtt = time.monotonic() - m0
        remote = float(res.stdout.strip())
        offset = remote - (t0 + rtt / 2)
        if best is None or rtt < best[2]:
            best = (offset, rtt / 2, rtt)
    assert best is not None
    return best


def ping_node(ex: Executor, *, python: str = "python3") -> PingResult:
    """Facts of one node; raises when the node cannot be reached (Fleet records it)."""
    facts = _parse_facts(ex.run(["sh", "-c", FACTS, "kvgate-ping", python], timeout=60.0).stdout)
    offset, uncertainty, rtt = measure_clock(ex)
    os_name = facts.get("os_PRETTY_NAME") or " ".join(
        x for x in (facts.get("os_NAME"), facts.get("os_VERSION_ID")) if x) or facts.get("kernel")
    return PingResult(node=ex.node, reachable=True, rtt_ms=rtt * 1000, user=facts.get("user") or None,
                      os=os_name or None, python=facts.get("python") or None, fio=facts.get("fio") or None,
                      clock_offset_ms=offset * 1000, clock_uncertainty_ms=uncertainty * 1000)


def ping_inventory(inventory: Inventory, *, accept_new_host_keys: bool = False, max_workers: int = 16,
                   timeout: float | None = None, progress: bool = False) -> list[PingResult]:
    """Ping every node in parallel; unreachable nodes come back with ``reachable=False`` and the
    reason in ``error`` (never raised here)."""
    pythons = {n.name: str(inventory.setting(n, "python") or "python3") for n in inventory.nodes}
    ray = ray_mapping(inventory)
    with Fleet(inventory, accept_new_host_keys=accept_new_host_keys) as fleet, \
            Progress("ping", total=len(pythons), enabled=progress) as prog:
        res = fleet.map(lambda ex: ping_node(ex, python=pythons[ex.node]), max_workers=max_workers,
                        timeout=timeout, progress=prog)
    out = []
    for name, outcome in res.outcomes.items():
        if outcome.ok and outcome.value is not None:
            out.append(outcome.value)
        else:
            out.append(PingResult(node=name, reachable=False,
                                  error=f"{type(outcome.error).__name__}: {outcome.reason}"))
        if ray is not None:
            out[-1].ray_node = ray.describe(name)
    return out


def ray_mapping(inventory: Inventory) -> Optional[MappingReport]:
    """The Ray mapping of an inventory's ``connection: ray`` nodes (None when it has none); an
    unreachable cluster is left to each node's ping to report."""
    if not any(n.connection == "ray" for n in inventory.nodes):
        return None
    from harness.remote.ray.cluster import mapping_report  # Ray is only imported when it is used

    try:
        return mapping_report(inventory)
    except RemoteError:
        return None


def unclaimed_lines(report: Optional[MappingReport]) -> list[str]:
    """``kvgate ping``'s note on live Ray nodes that no inventory node claims."""
    if report is None or not report.unclaimed:
        return []
    out = []
    for r in report.unclaimed:
        custom = sorted(k for k in r.resources
                        if k not in _RAY_BUILTIN and not k.startswith(("node:", "accelerator_type:")))
        out.append(f"Ray node {r.node_id[:12]} ({r.ip}; custom resources: {', '.join(custom) or 'none'}) is "
                   "claimed by no inventory node")
    return out


_RAY_BUILTIN = frozenset({"CPU", "GPU", "TPU", "NPU", "HPU", "memory", "object_store_memory"})


def raise_for_unreachable(results: list[PingResult]) -> None:
    bad = [r for r in results if not r.reachable]
    if bad:
        lines = [f"{len(bad)} of {len(results)} node(s) unreachable:"]
        lines += [f"  {r.node}: {r.error}" for r in bad]
        raise NodesUnreachable("\n".join(lines))

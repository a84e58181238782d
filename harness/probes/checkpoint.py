"""Checkpoint write probe (R1): write a snapshot of ``size`` bytes as ``files`` files with
``writers`` parallel writers, fsync every file and the directory, and report the total time and the
sustained bandwidth (bytes / time until the directory fsync returned). Optionally read the snapshot
back cold: page cache dropped when root, else O_DIRECT.

Like fio in the gates (``harness.probes.fio_rounds``): a memory-backed target is refused, the node's
writes are drained first (recorded), and the snapshot is written in rounds until the last 5 are
steady (SNIA) or ``max_rounds``; the result's figures are the median round of that window, and the
gate decides on the window's interval (a snapshot never steady is INCONCLUSIVE).

The work runs on the node through the stdlib helper of ``node_io``; the helper's JSON output is kept
as evidence. The snapshot lives under ``<target.path>/kvgate-ckpt-<run-id>/`` and is removed
afterwards, also on failure.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from harness.config.inventory import StorageTarget
from harness.config.profile import CheckpointSpec
from harness.probes.backing import check_backing
from harness.probes.drain import wait_drained
from harness.probes.errors import ProbeError, ProbeRefused
from harness.probes.fio_jobs import check_target, inspect_target
from harness.probes.node_io import DEFAULT_BLOCK, find_python, run_helper
from harness.probes.roundsrecord import InRounds
from harness.probes.steady import SteadyState, rounds_until_steady
from harness.remote.base import Executor, RemoteError
from harness.remote.scratch import create_owned_dir, remove_owned_dir

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FileTiming:
    path: str
    bytes: int
    start_s: float
    end_s: float
    fsync_s: Optional[float] = None


@dataclass(frozen=True)
class ColdRead:
    """A timed read of files after an attempt to keep the page cache out of it."""

    total_bytes: int
    total_s: float
    bw_bytes: float
    cache_dropped: bool
    direct_io: bool
    may_include_cached: bool
    how: str  # what was done to read cold, or why it may not be cold

    def to_json(self) -> dict[str, object]:
        return {
            "total_bytes": self.total_bytes,
            "total_s": self.total_s,
            "bw_bytes": self.bw_bytes,
            "bw_gb_s_decimal": self.bw_bytes / 1e9,
            "cache_dropped": self.cache_dropped,
            "direct_io": self.direct_io,
            "may_include_cached": self.may_include_cached,
            "how": self.how,
        }


@dataclass(frozen=True)
class CheckpointResult(InRounds):
    node: str
    target: str
    total_bytes: int
    files: int
    writers: int
    total_s: float
    write_bw_bytes: float  # bytes per second, fsyncs included
    dir_fsync_s: float
    per_file: tuple[FileTiming, ...]
    read_back: Optional[ColdRead]
    evidence: Path
    memory_tier: bool = False  # the target is a RAM tier declared kind: memory: a memory figure, labelled

    @property
    def write_gb_s(self) -> float:
        return self.write_bw_bytes / 1e9

    @property
    def read_back_bw_bytes(self) -> Optional[float]:
        return self.read_back.bw_bytes if self.read_back else None

    def to_json(self) -> dict[str, object]:
        return {
            "node": self.node,
            "target": self.target,
            "total_bytes": self.total_bytes,
            "files": self.files,
            "writers": self.writers,
            "total_s": self.total_s,
            "write_bw_bytes": self.write_bw_bytes,
            "write_gb_s_decimal": self.write_gb_s,
            "dir_fsync_s": self.dir_fsync_s,
            "per_file": [vars(f) for f in self.per_file],
            "read_back": self.read_back.to_json() if self.read_back else None,
            "evidence": str(self.evidence),
            "memory_tier": self.memory_tier,
            "rounds": list(self.rounds),
            "steady_state": self.steady.to_json() if self.steady else None,
            "drain": self.drain.to_json() if self.drain else None,
        }


def cold_read(
    executor: Executor,
    python: str,
    paths: list[str],
    readers: int,
    *,
    target: Optional[str],
    drop_caches: bool = True,
    timeout: Optional[float] = None,
) -> tuple[ColdRead, dict[str, Any]]:
    """Read ``paths`` with ``readers`` threads after dropping the page cache (root), else with
    O_DIRECT. Returns the figures and the helper's raw outputs (evidence)."""
    evidence: dict[str, Any] = {}
    dropped, reason = False, "page cache not dropped (asked not to)"
    if drop_caches:
        drop = run_helper(executor, python, ["drop-caches"], target=target, timeout=120)
        evidence["drop_caches"] = drop
        dropped, reason = bool(drop.get("dropped")), str(drop.get("reason", ""))
    mode = "buffered" if dropped else "direct"
    read = run_helper(
        executor,
        python,
        ["read", mode, str(readers), str(DEFAULT_BLOCK), *paths],
        target=target,
        timeout=timeout,
    )
    evidence["read"] = read
    all_direct = bool(read.get("all_direct"))
    if dropped:
        how, may_cached = f"page cache dropped ({reason}), buffered read", False
    elif all_direct:
        how, may_cached = f"O_DIRECT read ({reason})", False
    else:
        how = f"O_DIRECT refused by the filesystem, buffered read without dropping the cache ({reason})"
        may_cached = True
    total_bytes, total_s = int(read["total_bytes"]), float(read["total_s"])
    if total_bytes <= 0 or total_s <= 0:
        raise ProbeError(
            f"the read moved {total_bytes} bytes in {total_s} s; no bandwidth to report",
            node=executor.node,
            target=target,
        )
    return ColdRead(
        total_bytes, total_s, total_bytes / total_s, dropped, all_direct and not dropped, may_cached, how
    ), evidence


def _per_file(items: Any) -> tuple[FileTiming, ...]:
    return tuple(
        FileTiming(
            path=str(f["path"]),
            bytes=int(f["bytes"]),
            start_s=float(f["start_s"]),
            end_s=float(f["end_s"]),
            fsync_s=f.get("fsync_s"),
        )
        for f in items or []
    )


def make_tree(executor: Executor, path: str, owner: str, *, target: str) -> None:
    """Create the probe's directory fresh, marked for ``owner`` (harness.remote.scratch): only such a
    directory is ever removed."""
    try:
        state = create_owned_dir(executor, path, owner)
    except ValueError as exc:
        raise ProbeRefused(str(exc), node=executor.node, target=target) from None
    if state not in ("created", "ours"):
        raise ProbeRefused(f"{path} already exists and is not this run's directory ({state})",
                           node=executor.node, target=target)


def remove_tree(executor: Executor, path: str, owner: str) -> None:
    """Remove a directory this probe created and marked for ``owner`` (containment), nothing else."""
    try:
        removal = remove_owned_dir(executor, path, owner)
    except RemoteError:
        return  # the node went away; the error in flight is the one to report
    if removal.outcome in ("refused", "failed"):
        log.warning("%s", removal.describe())


def write_evidence(out_dir: Path, name: str, data: Mapping[str, Any]) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / name
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(path)
    return path


def run_checkpoint_probe(
    executor: Executor,
    target: StorageTarget,
    spec: CheckpointSpec,
    out_dir: Path,
    *,
    python: str = "python3",
    drop_caches: bool = True,
    run_id: Optional[str] = None,
    on_round: Optional[Callable[[str], None]] = None,
) -> CheckpointResult:
    """Write one checkpoint snapshot on ``target`` and time it (see the module docstring)."""
    node = executor.node
    total = int(spec.size)
    if total < spec.files:
        raise ProbeRefused(
            f"checkpoint size {total} B is smaller than its {spec.files} files", node=node, target=target.name
        )
    if spec.direct and total % (spec.files * 4096):
        raise ProbeRefused(f"checkpoint direct: true needs every file a multiple of 4 KiB ({total} B in {spec.files} "
                           "files is not)", node=node, target=target.name)
    info = inspect_target(executor, target.path)
    if info.is_block_device:
        raise ProbeRefused(
            "the checkpoint probe writes files and needs a filesystem, not a raw device",
            node=node,
            target=target.name,
        )
    check_target(executor, target, ["seq-write"], total, info)
    backing = check_backing(executor, target)
    py = find_python(executor, python)
    run_id = run_id or time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]
    directory = f"{target.path.rstrip('/')}/kvgate-ckpt-{run_id}"
    evidence: dict[str, Any] = {
        "probe": "checkpoint",
        "node": node,
        "target": target.name,
        "directory": directory,
        "spec": spec.model_dump(mode="json"),
    }
    owner = f"kvgate-ckpt-{run_id}"
    make_tree(executor, directory, owner, target=target.name)
    try:
        drain = wait_drained(executor, directory, backing.devices)
        evidence["drain"] = drain.to_json()
        write, bws, steady = _write_rounds(executor, py, directory, spec, target.name, evidence, on_round)
        total_s = float(write["total_s"])
        read_back = None
        if spec.read_back:
            paths = [str(f["path"]) for f in write["per_file"]]
            read_back, ev = cold_read(
                executor, py, paths, spec.writers, target=target.name, drop_caches=drop_caches
            )
            evidence["read_back"] = ev
    finally:
        remove_tree(executor, directory, owner)
    path = write_evidence(out_dir, f"checkpoint-{node}-{target.name}.json", evidence)
    return CheckpointResult(
        node=node,
        target=target.name,
        total_bytes=int(write["total_bytes"]),
        files=int(write["files"]),
        writers=int(write["writers"]),
        total_s=total_s,
        write_bw_bytes=int(write["total_bytes"]) / total_s,
        dir_fsync_s=float(write["dir_fsync_s"]),
        per_file=_per_file(write["per_file"]),
        read_back=read_back,
        evidence=path,
        memory_tier=target.kind == "memory",
        rounds=tuple(bws),
        steady=steady,
        drain=drain,
    )


def _write_rounds(executor: Executor, py: str, directory: str, spec: CheckpointSpec, target: str,
                  evidence: dict[str, Any], on_round: Optional[Callable[[str], None]] = None
                  ) -> tuple[Mapping[str, Any], list[float], SteadyState]:
    """Write the snapshot (the same files, overwritten) round after round until the last
    STEADY_WINDOW rounds are steady or ``spec.max_rounds``; returns the median round of the window
    (its figures are the result's), every round's bandwidth and the steady-state verdict."""

    def one_write() -> tuple[Mapping[str, Any], float]:
        write = run_helper(executor, py, ["write", directory, str(spec.files), str(int(spec.size)),
                                          str(spec.writers), str(DEFAULT_BLOCK),
                                          "direct" if spec.direct else "buffered"], target=target)
        if float(write["total_s"]) <= 0:
            raise ProbeError("the checkpoint write took no measurable time", node=executor.node, target=target)
        return write, int(write["total_bytes"]) / float(write["total_s"])

    rounds = rounds_until_steady(one_write, spec.max_rounds, "snapshot writes", on_round)
    median = rounds.taken[rounds.median]
    evidence["write"] = median
    evidence["rounds"] = [{"round": k + 1, "total_bytes": w["total_bytes"], "total_s": w["total_s"],
                           "bw_bytes": rounds.bws[k]} for k, w in enumerate(rounds.taken)]
    evidence["steady_state"] = rounds.steady.to_json()
    return median, list(rounds.bws), rounds.steady

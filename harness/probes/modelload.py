"""Model load probe (R9): read a directory tree of weights (safetensors shards, for example) with
``readers`` parallel readers, cold: the page cache is dropped first when the helper runs as root,
otherwise the files are read with O_DIRECT; a read that may have been served from the cache (no
root and a filesystem that refuses O_DIRECT) is marked ``may_include_cached``.

With ``synthetic_size`` set in the profile, shards of that total size are written first on a
storage target (fsync'd; a memory-backed target is refused), then read; they are removed afterwards.

Like the checkpoint write: the node's writes are drained first (recorded), and the weights are read
cold in rounds (the cache dropped before each) until the last 5 are steady (SNIA) or
``max_rounds``; the result's figures are the median round of that window, and the gate decides on
the window's interval (a load never steady is INCONCLUSIVE). One cold read of 128 MiB on the demo VM
came out anywhere from 0.83 to 1.52 GB/s, run to run.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Union

from harness.config.inventory import StorageTarget
from harness.config.profile import ModelLoadSpec
from harness.errors import InputError
from harness.probes.backing import check_backing, resolve_backing
from harness.probes.checkpoint import ColdRead, cold_read, make_tree, remove_tree, write_evidence
from harness.probes.drain import wait_drained
from harness.probes.errors import ProbeError, ProbeRefused
from harness.probes.fio_jobs import check_target, inspect_target
from harness.probes.node_io import DEFAULT_BLOCK, find_python, run_helper
from harness.probes.roundsrecord import InRounds
from harness.probes.steady import SteadyState, rounds_until_steady
from harness.remote.base import Executor

SYNTHETIC_SHARD = 512 * 2**20  # upper bound of one synthetic shard (real shards are 2-10 GB)


@dataclass(frozen=True)
class ModelLoadResult(InRounds):
    node: str
    source: str  # the directory read (or the target holding synthetic shards)
    synthetic: bool
    files: int
    readers: int
    total_bytes: int
    total_s: float
    read_bw_bytes: float
    cache_dropped: bool
    direct_io: bool
    may_include_cached: bool
    how: str
    evidence: Path

    @property
    def read_gb_s(self) -> float:
        return self.read_bw_bytes / 1e9

    def to_json(self) -> dict[str, object]:
        return {
            "node": self.node,
            "source": self.source,
            "synthetic": self.synthetic,
            "files": self.files,
            "readers": self.readers,
            "total_bytes": self.total_bytes,
            "total_s": self.total_s,
            "read_bw_bytes": self.read_bw_bytes,
            "read_gb_s_decimal": self.read_gb_s,
            "cache_dropped": self.cache_dropped,
            "direct_io": self.direct_io,
            "may_include_cached": self.may_include_cached,
            "how": self.how,
            "evidence": str(self.evidence),
            "rounds": list(self.rounds),
            "steady_state": self.steady.to_json() if self.steady else None,
            "drain": self.drain.to_json() if self.drain else None,
        }


def run_modelload_probe(
    executor: Executor,
    directory_or_target: Union[str, StorageTarget],
    spec: ModelLoadSpec,
    out_dir: Path,
    *,
    python: str = "python3",
    drop_caches: bool = True,
    run_id: Optional[str] = None,
    on_round: Optional[Callable[[str], None]] = None,
) -> ModelLoadResult:
    """Time cold reads of a weights directory (a path on the node), or of synthetic shards written
    on a storage target when ``spec.synthetic_size`` is set (see the module docstring)."""
    node = executor.node
    py = find_python(executor, python)
    run_id = run_id or time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]
    evidence: dict[str, Any] = {"probe": "modelload", "node": node, "spec": spec.model_dump(mode="json")}
    source, label, created = _source(executor, directory_or_target, spec, run_id)
    owner = f"kvgate-model-{run_id}"
    if created:
        make_tree(executor, created, owner, target=label)
    try:
        if created:
            total = int(spec.synthetic_size or 0)
            files = max(spec.readers, -(-total // SYNTHETIC_SHARD))
            evidence["write"] = run_helper(
                executor, py, ["write", source, str(files), str(total), str(spec.readers), str(DEFAULT_BLOCK)],
                target=label,
            )
        drain = wait_drained(executor, source, resolve_backing(executor, source).devices)
        evidence["drain"] = drain.to_json()
        median, bws, steady, any_cached = _read_rounds(executor, py, source, spec, label, drop_caches, evidence,
                                                       on_round)
    finally:
        if created:
            remove_tree(executor, created, owner)
    path = write_evidence(out_dir, f"modelload-{node}-{Path(label).name or 'root'}.json", evidence)
    read = median.read
    # a RAM tier's shards are in memory whatever the cache drop or O_DIRECT: never a storage figure
    ram = isinstance(directory_or_target, StorageTarget) and directory_or_target.kind == "memory"
    return ModelLoadResult(
        node=node, source=source, synthetic=created is not None, files=median.files, readers=median.readers,
        total_bytes=read.total_bytes, total_s=read.total_s, read_bw_bytes=read.bw_bytes,
        cache_dropped=read.cache_dropped, direct_io=read.direct_io,
        may_include_cached=any_cached or ram,
        how=f"shards on a RAM tier declared kind: memory; {read.how}" if ram else read.how, evidence=path,
        rounds=tuple(bws), steady=steady, drain=drain,
    )


def _source(executor: Executor, directory_or_target: Union[str, StorageTarget], spec: ModelLoadSpec,
            run_id: str) -> tuple[str, str, Optional[str]]:
    """What to read, the label of errors and evidence, and the directory to create (synthetic) or None."""
    node = executor.node
    if spec.synthetic_size is not None:
        if not isinstance(directory_or_target, StorageTarget):
            raise InputError(
                "modelload.synthetic_size needs a storage target to write the shards on, not a directory"
            )
        target = directory_or_target
        info = inspect_target(executor, target.path)
        if info.is_block_device:
            raise ProbeRefused(
                "synthetic shards need a filesystem, not a raw device", node=node, target=target.name
            )
        check_target(executor, target, ["seq-write"], int(spec.synthetic_size), info)
        check_backing(executor, target)
        # the shards go in a subdirectory: the marker of the owned directory is not read as weights
        created = f"{target.path.rstrip('/')}/kvgate-model-{run_id}"
        return f"{created}/shards", target.name, created
    if isinstance(directory_or_target, StorageTarget):
        if not spec.directory:
            raise InputError("modelload needs 'directory' (weights on the node) or 'synthetic_size'")
        source, label = spec.directory, directory_or_target.name
    else:
        source, label = directory_or_target, directory_or_target
    if not executor.run(["test", "-d", source], check=False).ok:
        raise ProbeRefused(f"weights directory {source} does not exist on the node", node=node, target=label)
    return source, label, None


@dataclass(frozen=True)
class _Round:
    read: ColdRead
    files: int
    readers: int


def _read_rounds(executor: Executor, py: str, source: str, spec: ModelLoadSpec, label: str, drop_caches: bool,
                 evidence: dict[str, Any], on_round: Optional[Callable[[str], None]] = None
                 ) -> tuple[_Round, list[float], SteadyState, bool]:
    """Read the weights cold round after round until the last STEADY_WINDOW rounds are steady or
    ``spec.max_rounds``; returns the median round of the window, every round's bandwidth, the
    steady-state verdict and whether any round may have been served from the page cache."""
    raws: list[dict[str, Any]] = []

    def one_read() -> tuple[_Round, float]:
        read, ev = cold_read(executor, py, [source], spec.readers, target=label, drop_caches=drop_caches)
        raw = ev["read"]
        if int(raw["total_bytes"]) != int(raw["expected_bytes"]):
            raise ProbeError(
                f"read {raw['total_bytes']} bytes of {raw['expected_bytes']} (files changed while being read?)",
                node=executor.node, target=label,
            )
        raws.append(ev)
        return _Round(read, int(raw["files"]), int(raw["readers"])), read.bw_bytes

    rounds = rounds_until_steady(one_read, spec.max_rounds, "cold reads", on_round)
    evidence.update(raws[rounds.median])
    evidence["rounds"] = [{"round": k + 1, **r.read.to_json()} for k, r in enumerate(rounds.taken)]
    evidence["steady_state"] = rounds.steady.to_json()
    return (rounds.taken[rounds.median], list(rounds.bws), rounds.steady,
            any(r.read.may_include_cached for r in rounds.taken))

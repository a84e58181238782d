"""Model load probe (R9): read a directory tree of weights (safetensors shards, for example) with
``readers`` parallel readers, cold: the page cache is dropped first when the helper runs as root,
otherwise the files are read with O_DIRECT; a read that may have been served from the cache (no
root and a filesystem that refuses O_DIRECT) is marked ``may_include_cached``.

With ``synthetic_size`` set in the profile, shards of that total size are written first on a
storage target (fsync'd), the cache dropped, then read; they are removed afterwards.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

from harness.config.inventory import StorageTarget
from harness.config.profile import ModelLoadSpec
from harness.errors import InputError
from harness.probes.checkpoint import cold_read, make_tree, remove_tree, write_evidence
from harness.probes.errors import ProbeError, ProbeRefused
from harness.probes.fio_jobs import check_target, inspect_target
from harness.probes.node_io import DEFAULT_BLOCK, find_python, run_helper
from harness.remote.base import Executor

SYNTHETIC_SHARD = 512 * 2**20  # upper bound of one synthetic shard (real shards are 2-10 GB)


@dataclass(frozen=True)
class ModelLoadResult:
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
) -> ModelLoadResult:
    """Time a cold read of a weights directory (a path on the node), or of synthetic shards written
    on a storage target when ``spec.synthetic_size`` is set."""
    node = executor.node
    py = find_python(executor, python)
    run_id = run_id or time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]
    evidence: dict[str, Any] = {"probe": "modelload", "node": node, "spec": spec.model_dump(mode="json")}
    synthetic = spec.synthetic_size is not None
    created: Optional[str] = None
    if synthetic:
        if not isinstance(directory_or_target, StorageTarget):
            raise InputError(
                "modelload.synthetic_size needs a storage target to write the shards on, not a directory"
            )
        target = directory_or_target
        total = int(spec.synthetic_size or 0)
        info = inspect_target(executor, target.path)
        if info.is_block_device or target.path.startswith("/dev/"):
            raise ProbeRefused(
                "synthetic shards need a filesystem, not a raw device", node=node, target=target.name
            )
        check_target(executor, target, ["seq-write"], total, info)
        # the shards go in a subdirectory: the marker of the owned directory is not read as weights
        created = f"{target.path.rstrip('/')}/kvgate-model-{run_id}"
        source = f"{created}/shards"
        label = target.name
    else:
        if isinstance(directory_or_target, StorageTarget):
            if not spec.directory:
                raise InputError("modelload needs 'directory' (weights on the node) or 'synthetic_size'")
            source, label = spec.directory, directory_or_target.name
        else:
            source, label = directory_or_target, directory_or_target
        if not executor.run(["test", "-d", source], check=False).ok:
            raise ProbeRefused(
                f"weights directory {source} does not exist on the node", node=node, target=label
            )
    owner = f"kvgate-model-{run_id}"
    if created:
        make_tree(executor, created, owner, target=label)
    try:
        if synthetic:
            files = max(spec.readers, -(-total // SYNTHETIC_SHARD))
            evidence["write"] = run_helper(
                executor,
                py,
                ["write", source, str(files), str(total), str(spec.readers), str(DEFAULT_BLOCK)],
                target=label,
            )
        read, ev = cold_read(executor, py, [source], spec.readers, target=label, drop_caches=drop_caches)
        evidence.update(ev)
        raw = ev["read"]
        if int(raw["total_bytes"]) != int(raw["expected_bytes"]):
            raise ProbeError(
                f"read {raw['total_bytes']} bytes of {raw['expected_bytes']} (files changed while "
                "being read?)",
                node=node,
                target=label,
            )
    finally:
        if created:
            remove_tree(executor, created, owner)
    path = write_evidence(out_dir, f"modelload-{node}-{Path(label).name or 'root'}.json", evidence)
    return ModelLoadResult(
        node=node,
        source=source,
        synthetic=synthetic,
        files=int(raw["files"]),
        readers=int(raw["readers"]),
        total_bytes=read.total_bytes,
        total_s=read.total_s,
        read_bw_bytes=read.bw_bytes,
        cache_dropped=read.cache_dropped,
        direct_io=read.direct_io,
        may_include_cached=read.may_include_cached,
        how=read.how,
        evidence=path,
    )

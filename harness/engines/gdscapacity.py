"""What an unbounded directory tier (GDS, an fs:// remote) can come to hold, counted against the
storage target it lives on.

lmcache 0.5.6's GDS backend (``lmcache/v1/storage_backend/gds_backend.py``) has no size bound and no
eviction ("GDS Backend does not support eviction"), nor has its fs:// remote connector
(``connector/fs_connector.py``); ``max_local_disk_size`` configures only the local-disk backend,
which such an arm does not have: the tier keeps every chunk the gate stores until
kvgate cleans the arm's directory at its end. The sweep sends the same point workload at every
point (``pipelines/shared/loadpoint.point_workload``, built once per arm), so the distinct KV an arm stores
is at most its populate and measured requests, each at most the longest request, times the KV bytes
per token. A trace's lengths are in its file: no bound is computed from the profile alone.
"""

from __future__ import annotations

from typing import Optional

from harness.config.inventory import Node, StorageTarget
from harness.config.profile import Profile


def requests_bound(profile: Profile) -> Optional[int]:
    """Populate plus measured requests of one point workload, at most (None: a trace)."""
    load = profile.load
    n = load.prompts_per_point
    if load.workload in ("long-doc", "random"):
        return 2 * n
    if load.workload == "shared-prefix":
        return 2 * load.num_groups * max(1, n // load.num_groups)
    if load.workload == "multi-round":
        return 2 * load.num_groups  # one conversation per user, its longest request holds it all
    return None


def gds_bytes_bound(profile: Profile) -> Optional[int]:
    """The bytes one instance's GDS tier can hold by the end of an arm (None: not known)."""
    longest = profile.load.longest_request_tokens()
    requests = requests_bound(profile)
    if longest is None or requests is None:
        return None
    return requests * longest * profile.model.kv_geometry.bytes_per_token


def target_of(node: Node, path: str) -> Optional[StorageTarget]:
    """The declared storage target whose directory holds ``path`` (the longest match)."""
    found: Optional[StorageTarget] = None
    for target in node.storage:
        root = target.path.rstrip("/") or "/"
        if (path == root or path.startswith(root + "/") or root == "/") and (
                found is None or len(root) > len(found.path.rstrip("/"))):
            found = target
    return found

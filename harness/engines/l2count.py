"""What an LMCache server's fs_native L2 already holds when it starts, counted against its capacity.

lmcache 0.5.6 ``native_connector_l2_adapter.py``: an adapter's usage is the bytes of the keys its own
process stored; the files an earlier process left are found again by name (lookups hit them) but
neither counted nor tracked by its LRU, so never evicted. A server restarted with files on disk
(a cold restore by restart, a resumed run) would fill the array past ``max_capacity_gb`` by what it
found. kvgate counts them for it: before the server starts, the bytes under its L2 directory are
measured on the node and taken off the capacity it is given (shared among the servers that share
the directory), so files found plus files it stores stay within the declared size. When nothing is
left, the start is refused: the tier under test could no longer keep anything. What was found and
what the server got is the instance's ``l2_at_start`` (evidence with the instance and the restart).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Optional

from harness.engines.base import EnginePlan, EngineStartError
from harness.remote.base import Executor
from harness.remote.scratch import MARKER

GIB = 1024**3
L2_FLAG = "--l2-adapter"


def _bounded_fs_native(argv: tuple[str, ...]) -> Optional[tuple[int, dict[str, Any]]]:
    """(index of the adapter JSON, the adapter) when the server has an fs_native L2 with a capacity."""
    if L2_FLAG not in argv or argv.index(L2_FLAG) + 1 >= len(argv):
        return None
    i = argv.index(L2_FLAG) + 1
    adapter = json.loads(argv[i])
    if adapter.get("type") != "fs_native" or not adapter.get("max_capacity_gb") or not adapter.get("base_path"):
        return None
    return i, dict(adapter)


# the node's python sums the regular files (never following links) below the directory, kvgate's
# own marker aside: what a new server would find; one number out, whatever the file count
_SUM_FILES = (
    "import os, sys\n"
    "def walk(d):\n"
    "    total = 0\n"
    "    with os.scandir(d) as it:\n"
    "        for e in it:\n"
    "            if e.is_dir(follow_symlinks=False):\n"
    "                total += walk(e.path)\n"
    "            elif e.is_file(follow_symlinks=False) and e.name != sys.argv[2]:\n"
    "                total += e.stat(follow_symlinks=False).st_size\n"
    "    return total\n"
    "print(walk(sys.argv[1]) if os.path.isdir(sys.argv[1]) else 0)\n"
)


def bytes_on_disk(executor: Executor, directory: str, python: str = "python3") -> int:
    """The bytes of the files under ``directory`` on the node (0 when it is absent)."""
    res = executor.run([python, "-c", _SUM_FILES, directory, MARKER], timeout=300.0, check=False)
    if res.exit_code != 0 or not res.stdout.strip().isdigit():
        raise EngineStartError(f"could not measure the LMCache L2 directory {directory} (exit {res.exit_code})",
                               node=res.host, command=res.command, log_tail=res.stderr[-2000:])
    return int(res.stdout.strip())


def count_l2_at_start(executor: Executor, plan: EnginePlan) -> tuple[EnginePlan, Optional[dict[str, object]]]:
    """``plan`` with its LMCache server's capacity lowered by what its L2 directory holds, and the
    evidence; the plan unchanged (and None) without a bounded fs_native L2."""
    side = plan.sidecar
    found = _bounded_fs_native(side.argv) if side is not None else None
    if side is None or found is None:
        return plan, None
    i, adapter = found
    declared = float(adapter["max_capacity_gb"])
    used = bytes_on_disk(executor, str(adapter["base_path"]), plan.python)
    share = used / GIB / max(side.l2_sharers, 1)  # each sharer takes its part of what is there
    left = declared - share
    evidence: dict[str, object] = {"l2_dir": adapter["base_path"], "bytes_on_disk": used,
                                   "sharers": side.l2_sharers, "declared_capacity_gb": declared,
                                   "capacity_gb": left}
    if used == 0:
        return plan, evidence
    if left <= 0:
        raise EngineStartError(
            f"LMCache L2 directory {adapter['base_path']} already holds {used / GIB:.3f} GiB, which a new LMCache "
            f"server finds but neither counts nor evicts (lmcache 0.5.6 native_connector_l2_adapter.py): nothing is "
            f"left of its {declared:g} GiB. The tier would keep nothing; start from an empty directory, or use "
            "engine.dev_mode so a cold restore does not restart the server", node=plan.node, command=side.argv)
    adapter["max_capacity_gb"] = left
    argv = (*side.argv[:i], json.dumps(adapter, separators=(",", ":")), *side.argv[i + 1:])
    return dataclasses.replace(plan, sidecar=dataclasses.replace(side, argv=argv)), evidence

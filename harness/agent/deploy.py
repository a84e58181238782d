"""Put the agent zipapp on a node, once per content.

The remote name carries the first 16 hex digits of the sha256 (``kvgate-agent-<sha>.pyz``): a
zipapp is read lazily by ``zipimport`` while it runs, so an agent in use must never be rewritten
in place, and two controllers with different versions can share a node's workdir. The copy is
skipped when a file of that name with the same sha256 is already there.
"""

from __future__ import annotations

import atexit
import hashlib
import posixpath
import shutil
import tempfile
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from harness.agent.bundle import build_bytes

if TYPE_CHECKING:
    from harness.remote.base import Executor

_lock = threading.Lock()
_cache: dict[str, tuple[Path, str]] = {}  # built once per controller process


def local_agent() -> tuple[Path, str]:
    """The agent zipapp built from this source tree (cached for the process) and its sha256."""
    with _lock:
        data = build_bytes()
        digest = hashlib.sha256(data).hexdigest()
        hit = _cache.get(digest)
        if hit is not None and hit[0].exists():
            return hit
        d = Path(tempfile.mkdtemp(prefix="kvgate-agent-"))
        # the directory this process created, removed when it exits: every kvgate command builds
        # one, and the controller's /tmp gathered hundreds (a killed process still leaves its own)
        atexit.register(shutil.rmtree, d, True)
        path = d / f"kvgate-agent-{digest[:16]}.pyz"
        path.write_bytes(data)
        path.chmod(0o755)
        _cache[digest] = (path, digest)
        return path, digest


def remote_sha256(executor: Executor, path: str) -> Optional[str]:
    """sha256 of a file on the node, or None when it does not exist."""
    res = executor.run(["sha256sum", "--", path], check=False, timeout=60)
    if res.exit_code == 0 and res.stdout.split():
        return res.stdout.split()[0]
    res = executor.run(["test", "-f", path], check=False, timeout=30)
    if res.exit_code != 0:
        return None
    py = executor.run(["python3", "-I", "-S", "-c",
                       "import hashlib,sys;print(hashlib.sha256(open(sys.argv[1],'rb').read()).hexdigest())", path],
                      check=False, timeout=60)
    return py.stdout.strip() or None if py.exit_code == 0 else None


def ensure_agent(executor: Executor, workdir: str) -> str:
    """Make sure the node has this controller's agent under ``workdir``; return its remote path."""
    from harness.remote.detached import ensure_workdir

    local, digest = local_agent()
    remote = posixpath.join(workdir, local.name)
    # Checked before anything is read or written there: a workdir another user owns or can write
    # (a planted /tmp/kvgate) is refused, never used.
    ensure_workdir(executor, workdir)
    if remote_sha256(executor, remote) == digest:
        return remote
    executor.put(str(local), remote, mode=0o700)
    return remote

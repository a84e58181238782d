"""Deploying the agent: copied once per content, re-copied when the node's file differs."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from harness.agent.deploy import ensure_agent, local_agent
from harness.remote.local import LocalExecutor


class CountingExecutor(LocalExecutor):
    def __init__(self) -> None:
        super().__init__("local")
        self.puts = 0

    def put(self, local_path: str, remote_path: str, **kw: Any) -> None:
        self.puts += 1
        super().put(local_path, remote_path, **kw)


def test_ensure_agent_copies_only_when_needed(tmp_path: Path) -> None:
    ex = CountingExecutor()
    workdir = str(tmp_path / "node" / "kvgate")
    path = ensure_agent(ex, workdir)
    _, digest = local_agent()
    assert path == f"{workdir}/kvgate-agent-{digest[:16]}.pyz" and ex.puts == 1
    assert hashlib.sha256(Path(path).read_bytes()).hexdigest() == digest
    assert ensure_agent(ex, workdir) == path and ex.puts == 1  # same bytes already there
    Path(path).write_bytes(b"truncated")
    assert ensure_agent(ex, workdir) == path and ex.puts == 2
    assert hashlib.sha256(Path(path).read_bytes()).hexdigest() == digest


def test_the_local_build_is_removed_when_the_process_exits(tmp_path: Path) -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    code = "from harness.agent.deploy import local_agent; p, _ = local_agent(); print(p); assert p.exists()"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,  # noqa: S603
                         cwd=root, check=False,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(root), "TMPDIR": str(tmp_path)})
    assert res.returncode == 0, res.stderr
    built = Path(res.stdout.strip())
    assert built.parent.parent == tmp_path and built.name.startswith("kvgate-agent-")
    assert not built.parent.exists() and list(tmp_path.iterdir()) == []

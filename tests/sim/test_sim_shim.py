"""The `vllm` shim: a script on PATH that runs the emulator with vLLM's command line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from harness.cli.main import run as kvgate_run
from harness.ports import free_port
from harness.sim.vllm_shim import SHIM_VERSION, write_vllm_shim
from tests.sim.simhelpers import CONNECTOR, lmcache_yaml, port_is_free, words


def test_shim_runs_vllm_serve_with_vllm_flags(tmp_path: Path) -> None:
    shim = write_vllm_shim(tmp_path / "bin", sys.executable)
    assert os.access(shim, os.X_OK)
    env = {"PATH": f"{shim.parent}:{os.environ['PATH']}"}
    out = subprocess.run(["vllm", "--version"], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == SHIM_VERSION
    port = free_port()
    cfg = lmcache_yaml(
        tmp_path / "lmc.yaml", chunk_size=256, local_disk=f"file://{tmp_path}/disk/", max_local_disk_size=1
    )
    log = open(tmp_path / "vllm.log", "wb")
    proc = subprocess.Popen(  # noqa: S603 - fixed argv, test code
        [
            "vllm",
            "serve",
            "org/Model-7B",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--tensor-parallel-size",
            "2",
            "--served-model-name",
            "m7",
            "--max-model-len",
            "8192",
            "--kv-transfer-config",
            CONNECTOR,
            "--gpu-memory-utilization",
            "0.9",
            "--enforce-eager",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, **env, "LMCACHE_CONFIG_FILE": str(cfg)},
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2) as r:
                    models = json.load(r)
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "vllm.log").read_text()
                time.sleep(0.05)
        assert models["data"][0]["id"] == "m7"
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/completions",
            method="POST",
            data=json.dumps({"model": "m7", "prompt": words(512, "s"), "max_tokens": 2}).encode(),
            headers={"content-type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=10) as r:
            assert json.load(r)["usage"]["prompt_tokens"] == 512
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)
        log.close()
    assert proc.returncode == 0
    text = (tmp_path / "vllm.log").read_text()
    assert "connector=LMCacheConnectorV1" in text and "--enforce-eager" in text
    assert port_is_free(port)


def test_shim_rejects_other_vllm_subcommands(tmp_path: Path) -> None:
    shim = write_vllm_shim(tmp_path, sys.executable)
    r = subprocess.run([str(shim), "bench", "serve"], capture_output=True, text=True)  # noqa: S603 - fixed argv, test code
    assert r.returncode == 2 and "only `vllm serve" in r.stderr


def test_kvgate_sim_command_dispatches_to_the_emulator(tmp_path: Path) -> None:
    assert kvgate_run(["sim", "serve", "m", "--kv-scale", "3"]) == 2
    assert kvgate_run(["sim", "frobnicate"]) == 2
    assert kvgate_run(["sim", "shim", str(tmp_path / "bin")]) == 0
    out = subprocess.run([str(tmp_path / "bin" / "vllm"), "--version"], capture_output=True, text=True)  # noqa: S603
    assert out.stdout.strip() == SHIM_VERSION


def test_emulator_runs_from_a_zipapp_with_bare_python(tmp_path: Path) -> None:
    """The agent bundles harness/sim into a zipapp run with `python3 -I -S`: no site-packages, no
    source tree. A minimal zipapp of the same files proves the emulator needs nothing else."""
    import zipapp

    from harness.agent.bundle import source_files

    src = tmp_path / "app"
    (src / "harness" / "sim").mkdir(parents=True)
    # the agent's top-level stdlib modules (exitcodes, errors, ...) and harness/sim, nothing else
    for name, path in source_files():
        if name.count("/") == 1 or name.startswith("harness/sim/"):
            (src / name).write_text(path.read_text())
    (src / "__main__.py").write_text("import sys\nfrom harness.sim.cli import main\nsys.exit(main(sys.argv[1:]))\n")
    pyz = tmp_path / "sim.pyz"
    zipapp.create_archive(src, pyz)
    port = free_port()
    log = open(tmp_path / "zip.log", "wb")
    proc = subprocess.Popen(  # noqa: S603 - fixed argv, test code
        [sys.executable, "-I", "-S", str(pyz), "serve", "m", "--host", "127.0.0.1", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=str(tmp_path),
        env={"PATH": os.environ["PATH"]},
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    assert r.status == 200
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "zip.log").read_text()
                time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
        log.close()
    assert proc.returncode == 0

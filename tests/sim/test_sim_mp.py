"""The emulator's LMCache modes behave as the real ones do where kvgate can see it (issue 18
item 5): multiprocess mode (``kvgate sim lmcache-server``) against the signature captured from a
real vLLM CPU server + ``lmcache server`` (tests/real_engine checks that capture is current); the
reset endpoint needs dev mode. (In-process mode losing its disk index on restart:
tests/engines/test_lifecycle.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from harness.config.profile import Profile
from harness.engines import get_engine
from harness.engines.lifecycle import http_request
from harness.ports import free_ports
from harness.remote.local import LocalExecutor
from harness.sim.cli import per_instance
from harness.sim.lmcache_config import build_config
from tests.real_engine.conftest import local_node, real_profile
from tests.real_engine.scenario import DOC_TOKENS, DOCS, diff, run_scenario
from tests.real_engine.test_cold_restore import REAL_SIGNATURE
from tests.sim.simhelpers import REPO
from tests.support.procs import HANG_GUARD_S


def test_multiprocess_mode_gives_the_real_servers_counter_movements_and_files(tmp_path: Path) -> None:
    port = free_ports(3)
    rec = run_scenario(real_profile(tmp_path, port=port, mp_port=port + 1, kind="sim"),
                       local_node(tmp_path / "tier"))
    real = json.loads(REAL_SIGNATURE.read_text())
    assert diff(real, rec.signature()) == []
    # and the figures behind the signature: every restore read all of its chunks from L2 files
    for fig in rec.key_figures:
        assert fig["lmcache_mp_l2_hit_tokens"] == DOCS * DOC_TOKENS
        # as on the real server: vLLM computes each prompt's last token itself (3069 of 3072 there)
        assert fig["engine_prefix_hit_tokens"] == 0 and fig["offload_hit_tokens"] == DOCS * (DOC_TOKENS - 1)
        assert fig["lmcache_hit_tokens"] is None  # no in-process LMCache counters in this mode


def _in_process_profile(tmp: Path, port: int, *, dev_mode: bool) -> Profile:
    arm = {"name": "ip", "storage": "fast", "lmcache": {"mode": "in_process", "chunk_size": 256, "local_cpu": False,
                                                         "max_local_disk_size": 1}}
    return real_profile(tmp, port=port, mp_port=port + 1, kind="sim", dev_mode=dev_mode, more_arms=[arm],
                        cold_restore=False)


def test_reset_endpoint_is_404_without_dev_mode(tmp_path: Path) -> None:
    profile = _in_process_profile(tmp_path, free_ports(3), dev_mode=False)
    engine = get_engine("sim")
    with LocalExecutor("local") as ex:
        plan = engine.plan(local_node(tmp_path / "tier"), profile, "recompute", 0, workdir=str(tmp_path / "w"),
                           python=sys.executable)
        assert "VLLM_SERVER_DEV_MODE" not in plan.env
        inst = engine.start(ex, plan)
        try:
            engine.wait_ready(inst)
            status, _ = http_request(inst, "/reset_prefix_cache", method="POST", body=b"{}")
            assert status == 404
        finally:
            engine.stop(inst)


def test_lmcache_server_rejects_what_it_does_not_model(tmp_path: Path) -> None:
    for bad in (['--l2-adapter', '{"type":"s3","base_path":"x"}'], ["--l2-adapter", "{nope"], ["--chunk-size", "0"]):
        res = subprocess.run([sys.executable, "-m", "harness.sim.cli", "lmcache-server", "--port", "1",  # noqa: S603
                              "--http-port", "2", *bad], capture_output=True, text=True, cwd=REPO, timeout=HANG_GUARD_S,
                             check=False)
        assert res.returncode == 2, res.stderr
        assert "kvgate sim lmcache-server: error:" in res.stderr and "Traceback" not in res.stderr


def test_in_process_sizes_are_per_rank_so_the_instance_holds_tp_times_them() -> None:
    # the plan divides the arm's size by TP (LMCache applies it per rank); the emulator, one
    # process holding whole chunks, multiplies back: neither more nor less than the real instance
    cfg = build_config({"local_cpu": True, "max_local_cpu_size": 2.0, "local_disk": "file:///x/",
                        "max_local_disk_size": 1500.0})
    assert per_instance(cfg, 8).max_local_disk_size == 12000.0 and cfg.max_local_cpu_size == 16.0
    assert per_instance(build_config({"max_local_disk_size": 3.0}), 1).max_local_disk_size == 3.0


def test_the_lmcache_servers_l2_directory_is_read_back_and_a_moved_one_refused(tmp_path: Path) -> None:
    """Multiprocess mode had no tier read-back: an LMCache server whose L2 sat elsewhere than the
    plan's directory was measured under the planned tier's name. Its 'Created FS native L2 adapter:'
    line (lmcache 0.5.6 fs_native_l2_adapter.py; the emulator's server writes it too) is now read
    back at readiness, and a server started on another directory stops the start, naming both."""
    import dataclasses

    import pytest

    from harness.engines.base import EngineStartError

    port = free_ports(3)
    profile = real_profile(tmp_path, port=port, mp_port=port + 1, kind="sim")
    engine = get_engine("sim")
    planned = str(tmp_path / "tier" / "kvgate-kv" / "real-cpu" / "mp")
    moved = str(tmp_path / "elsewhere")
    with LocalExecutor("local") as ex:
        plan = engine.plan(local_node(tmp_path / "tier"), profile, "mp", 0, workdir=str(tmp_path / "w"),
                           python=sys.executable)
        assert plan.kv_dirs == (planned,) and plan.sidecar is not None
        honest = engine.start(ex, plan)
        try:
            engine.wait_ready(honest, 120)
            assert honest.tier_readback == {"planned": planned, "read_back": True, "effective": [planned]}
        finally:
            engine.stop(honest)
        argv = tuple(a.replace(f'"base_path":"{planned}"', f'"base_path":"{moved}"') for a in plan.sidecar.argv)
        assert argv != plan.sidecar.argv
        leaky = dataclasses.replace(plan, sidecar=dataclasses.replace(plan.sidecar, argv=argv))
        inst = engine.start(ex, leaky)
        try:
            with pytest.raises(EngineStartError, match=f"L2 directory is {moved}, not the planned {planned}"):
                engine.wait_ready(inst, 120)
        finally:
            engine.stop(inst)

"""An LMCache server restarted over an fs_native L2 finds the files there but neither counts nor
evicts them (lmcache 0.5.6 native_connector_l2_adapter.py: usage is what its own process stored),
so with a restart per point the array filled past max_capacity_gb. kvgate measures the directory
before each start and gives the server what is left (issue 48 item 3). Real du on real files; the
restart through the emulator's `lmcache server`, which counts as LMCache does."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness.config.inventory import Node
from harness.config.profile import Profile
from harness.engines import get_engine
from harness.engines.base import EnginePlan, EngineStartError
from harness.engines.l2count import GIB, count_l2_at_start
from harness.engines.lifecycle import restart
from harness.ports import free_ports
from harness.remote.local import LocalExecutor

MIB = 1024**2


def _profile(port: int, *, instances: int = 1, shared: bool = False, size_gib: float = 0.01) -> Profile:
    return Profile.model_validate({
        "name": "l2count",
        "model": {"name": "test/l2", "served_name": "l2", "max_model_len": 8192, "instances_per_node": instances,
                  "geometry": {"layers": 2, "kv_heads": 4, "head_dim": 32, "dtype_bytes": 4}},
        "engine": {"kind": "sim", "port": port, "dev_mode": True, "ready_timeout": "60s",
                   "sim": {"prefill_tokens_per_s": 20000, "decode_tokens_per_s": 2000, "hbm_tokens": 65536}},
        "arms": [{"name": "recompute", "offload": False},
                 {"name": "mp", "storage": "fast",
                  "lmcache": {"mode": "multiprocess", "mp_port": port + instances, "mp_l1_size_gb": 0.25,
                              "mp_shared_l2": shared, "max_local_disk_size": size_gib}}],
        "baseline": "recompute", "candidate": "mp", "recompute": "recompute",
    })


def _node(tmp: Path) -> Node:
    return Node.model_validate({"name": "local", "host": "127.0.0.1", "connection": "local", "platform": "cpu",
                                "storage": [{"name": "fast", "path": str(tmp / "tier")}]})


def _plan(tmp: Path, profile: Profile, index: int = 0) -> EnginePlan:
    return get_engine("sim").plan(_node(tmp), profile, "mp", index, workdir=str(tmp / "w"), python=sys.executable)


def _capacity(plan: EnginePlan) -> float:
    assert plan.sidecar is not None
    argv = list(plan.sidecar.argv)
    return float(json.loads(argv[argv.index("--l2-adapter") + 1])["max_capacity_gb"])


def _leave(plan: EnginePlan, name: str, nbytes: int) -> None:
    d = Path(plan.kv_dirs[0])
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(b"k" * nbytes)


def test_files_on_disk_at_start_are_taken_off_the_capacity(tmp_path: Path) -> None:
    plan = _plan(tmp_path, _profile(8000))
    with LocalExecutor("local") as ex:
        same, evidence = count_l2_at_start(ex, plan)
        assert same == plan and evidence is not None and evidence["bytes_on_disk"] == 0  # absent: nothing found
        _leave(plan, "chunk-a", 4 * MIB)
        counted, evidence = count_l2_at_start(ex, plan)
    assert evidence is not None
    assert evidence["bytes_on_disk"] == 4 * MIB
    assert _capacity(counted) == pytest.approx(0.01 - 4 * MIB / GIB)
    assert evidence["capacity_gb"] == pytest.approx(_capacity(counted)) and evidence["declared_capacity_gb"] == 0.01
    assert _capacity(plan) == 0.01  # the plan itself is as planned: a restart counts again from it


def test_a_directory_already_full_refuses_the_start(tmp_path: Path) -> None:
    plan = _plan(tmp_path, _profile(8000))
    _leave(plan, "chunk-a", 11 * MIB)
    with LocalExecutor("local") as ex, pytest.raises(EngineStartError, match="neither counts nor evicts"):
        count_l2_at_start(ex, plan)


def test_servers_sharing_a_directory_each_take_their_part_of_what_is_there(tmp_path: Path) -> None:
    profile = _profile(8000, instances=2, shared=True, size_gib=0.02)
    plans = [_plan(tmp_path, profile, i) for i in (0, 1)]
    assert plans[0].kv_dirs == plans[1].kv_dirs
    _leave(plans[0], "chunk-a", 4 * MIB)
    with LocalExecutor("local") as ex:
        counted = [count_l2_at_start(ex, p) for p in plans]
    caps = [_capacity(c[0]) for c in counted]
    assert [c[1]["bytes_on_disk"] for c in counted if c[1]] == [4 * MIB, 4 * MIB]
    assert caps == pytest.approx([0.01 - 2 * MIB / GIB] * 2)
    assert sum(caps) + 4 * MIB / GIB == pytest.approx(0.02)  # files found + what the servers may store


def _store(inst: Any) -> None:
    from harness.engines.lifecycle import http_request

    body = json.dumps({"model": "l2", "prompt": " ".join(f"w{i}" for i in range(1024)), "max_tokens": 2}).encode()
    status, answer = http_request(inst, "/v1/completions", method="POST", body=body, timeout=120.0)
    assert status == 200, answer[:300]


def test_a_restarted_server_gets_what_its_files_leave(tmp_path: Path) -> None:
    """Populate through the emulated server, restart both processes (a cold restore by restart):
    the second start finds the populate's files and its server gets the capacity less them."""
    engine = get_engine("sim")
    plan = _plan(tmp_path, _profile(free_ports(3), size_gib=1.0))
    with LocalExecutor("local") as ex:
        inst = engine.start(ex, plan)
        try:
            engine.wait_ready(inst)
            assert inst.l2_at_start is not None and inst.l2_at_start["bytes_on_disk"] == 0
            _store(inst)
            kv = Path(plan.kv_dirs[0])
            deadline = time.monotonic() + 60  # the L2 write runs behind the response, as LMCache's does
            while not any(p.is_file() and p.stat().st_size for p in kv.rglob("*")):
                assert time.monotonic() < deadline, "the emulated server wrote no L2 file"
                time.sleep(0.2)
            inst = restart(engine, inst)
            found = inst.l2_at_start
            assert found is not None and int(str(found["bytes_on_disk"])) > 0
            assert float(str(found["capacity_gb"])) == pytest.approx(1.0 - int(str(found["bytes_on_disk"])) / GIB)
            assert inst.to_json()["l2_at_start"] == dict(found)  # kept with the instance's evidence
        finally:
            engine.stop(inst, remove_kv_files=True)

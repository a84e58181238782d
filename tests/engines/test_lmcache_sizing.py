"""How much storage each LMCache process is told it may use, against what the arm declares:
MLA models stored by one rank (in-process), a shared multiprocess L2 split between its servers,
and multiprocess transfer that must reach workers on other nodes (issue 48 item 3)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.config import load_inventory
from harness.config.inventory import Node
from harness.config.profile import Profile
from harness.engines import EnginePlan, get_engine
from harness.engines.planning import kv_dir_for
from harness.errors import InputError
from harness.estimate.geometry import ModelGeometry
from harness.estimate.plan import EstimateInputs, capacity_plan
from harness.pipelines.cliff.run import tier_capacities
from harness.sim.cli import per_instance
from harness.sim.lmcache_config import parse_flat_yaml

REPO = Path(__file__).resolve().parents[2]
GIB = 1024**3
MLA_GEOMETRY = {"layers": 61, "latent_dim": 576, "dtype_bytes": 2}  # DeepSeek-V3: kv_lora_rank 512 + rope 64


def _node() -> Node:
    return load_inventory(REPO / "inventory" / "mi308x-8gpu.example.yaml").node("node1")


def _profile(name: str, **edit: Any) -> Profile:
    data = yaml.safe_load((REPO / "profiles" / name).read_text())
    for path, value in edit.items():
        *head, last = path.split("__")
        d = data
        for key in head:
            d = d[int(key)] if isinstance(d, list) else d[key]
        if value is None:
            d.pop(last)
        else:
            d[last] = value
    return Profile.model_validate(data)


def _in_process_tp8(geometry: bool, **lm: object) -> Profile:
    """moe-480b-tp8 with in-process candidate LMCache (no CPU tier), MLA geometry or its preset."""
    edits: dict[str, Any] = {"arms__2__lmcache": {"chunk_size": 256, "local_cpu": False,
                                                   "max_local_disk_size": 8000, **lm}}
    if geometry:
        edits.update(model__preset=None, model__geometry=MLA_GEOMETRY)
    return _profile("moe-480b-tp8.yaml", **edits)


def _lmcache_file(plan: EnginePlan) -> dict[str, Any]:
    ((_, text),) = plan.files.items()
    data = yaml.safe_load(text)
    assert parse_flat_yaml(text) == data  # the emulator reads what LMCache reads
    return dict(data)


def test_mla_disk_tier_is_not_divided_by_tp() -> None:
    """lmcache 0.5.6 cache_engine.py: with MLA only the first rank stores (save_only_first_rank defaults
    to use_mla), so the one storing rank must get the whole declared size, not 1/8 of it."""
    mla = get_engine("vllm").plan(_node(), _in_process_tp8(True), "candidate", 0)
    cfg = _lmcache_file(mla)
    assert cfg["max_local_disk_size"] == 8000.0
    assert cfg["extra_config"]["save_only_first_rank"] is True
    standard = _lmcache_file(get_engine("vllm").plan(_node(), _in_process_tp8(False), "candidate", 0))
    assert standard["max_local_disk_size"] == 1000.0 and "save_only_first_rank" not in standard.get("extra_config", {})
    # every rank stores when the profile turns first-rank saving off: divided again
    off = _in_process_tp8(True, extra_config={"save_only_first_rank": False})
    assert _lmcache_file(get_engine("vllm").plan(_node(), off, "candidate", 0))["max_local_disk_size"] == 1000.0


def test_mla_cliff_markers_and_estimate_follow_the_undivided_size() -> None:
    profile = _in_process_tp8(True)
    bpt = 61 * 576 * 2  # every rank holds the whole latent: one rank's share is a token's KV
    tokens = tier_capacities(profile, profile.arm("candidate"))["local_disk"]["tokens"]
    assert tokens == int(8000 * GIB // (bpt * 256)) * 256
    standard = _in_process_tp8(False)
    per_rank = 2 * 62 * 8 * 128 * 2 / 8  # 8 KV heads over 8 ranks
    assert tier_capacities(standard, standard.arm("candidate"))["local_disk"]["tokens"] == \
        int(1000 * GIB // (per_rank * 256)) * 256
    geom = ModelGeometry("mla", 61, "mla", kv_dtype_bytes=2, kv_lora_rank=576)
    request = geom.bytes_for_context(65536)
    cap = capacity_plan(profile, EstimateInputs(geometry=geom), request)
    assert cap["arms"]["candidate"]["disk_bytes"] == 8000 * GIB
    assert cap["arms"]["candidate"]["disk_requests"] == int(8000 * GIB // request)


def test_emulator_holds_an_mla_tier_once() -> None:
    """The emulator multiplies per-rank sizes by TP; for a first-rank-only MLA tier that would hold 8x
    what the real instance holds (kinder than the engine)."""
    from harness.sim.lmcache_config import LMCacheConfig

    mla = LMCacheConfig(max_local_disk_size=8000.0, extra={"extra_config.save_only_first_rank": True})
    assert per_instance(mla, 8).max_local_disk_size == 8000.0
    assert per_instance(LMCacheConfig(max_local_disk_size=1000.0), 8).max_local_disk_size == 8000.0


def _two_instances(shared: bool) -> Profile:
    return _profile("tp4x2.yaml", arms__1__lmcache__mp_shared_l2=shared)


def _l2(plan: EnginePlan) -> dict[str, Any]:
    assert plan.sidecar is not None
    argv = list(plan.sidecar.argv)
    return dict(json.loads(argv[argv.index("--l2-adapter") + 1]))


def test_shared_l2_servers_together_hold_the_declared_size() -> None:
    """Each `lmcache server` counts and evicts only the keys it stored (lmcache 0.5.6
    native_connector_l2_adapter.py): with one shared directory, the sum of their max_capacity_gb is the
    declared size, never N times it."""
    engine, node = get_engine("vllm"), _node()
    shared = _two_instances(True)
    adapters = [_l2(engine.plan(node, shared, "candidate", i)) for i in range(2)]
    assert {a["base_path"] for a in adapters} == {kv_dir_for(node, shared, shared.arm("candidate"))}
    assert sum(a["max_capacity_gb"] for a in adapters) == 6000.0
    assert all(a["eviction"] == {"eviction_policy": "LRU"} for a in adapters)
    notes = " ".join(engine.plan(node, shared, "candidate", 0).notes)
    assert "each gets 3000 GiB of the arm's 6000 GiB" in notes
    separate = _two_instances(False)
    adapters = [_l2(engine.plan(node, separate, "candidate", i)) for i in range(2)]
    assert len({a["base_path"] for a in adapters}) == 2  # instance-0/, instance-1/
    assert [a["max_capacity_gb"] for a in adapters] == [6000.0, 6000.0]


def test_shipped_profiles_share_a_directory_exactly_when_they_say_so() -> None:
    node = _node()
    for path in sorted((REPO / "profiles").glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        profile = Profile.model_validate(data)
        if profile.model.instances_per_node < 2 or profile.engine.kind != "vllm":
            continue
        says = "shar" in (profile.description or "").lower()
        for arm in profile.arms:
            if not arm.offload or arm.storage is None or node.target(arm.storage) is None:
                continue
            dirs = {d for i in range(profile.model.instances_per_node)
                    for d in get_engine("vllm").plan(node, profile, arm, i).kv_dirs}
            assert (len(dirs) == 1) == says, (path.name, arm.name, dirs)


def _spanning(mode: str) -> Profile:
    return _profile("moe-480b-tp8.yaml", model__nodes_per_instance=2, arms__2__lmcache__mp_bind="node",
                    arms__2__lmcache__mp_transfer_mode=mode)


@pytest.mark.parametrize("mode", ["auto", "lmcache_driven"])
def test_mp_bind_node_with_lmcache_driven_transfer_is_refused(mode: str) -> None:
    """LMCache#4213: lmcache-driven transfer (CUDA IPC / SHM) serves workers on the server's own node
    only, and `auto` is lmcache-driven on GPUs (lmcache 0.5.6 platform/devices/cuda)."""
    node = _node()
    peer = node.model_copy(update={"name": "node2", "host": "10.0.0.12"})
    with pytest.raises(InputError, match="LMCache#4213") as err:
        get_engine("vllm").plan(node, _spanning(mode), "candidate", 0, peers=[peer])
    assert "mp_transfer_mode: engine_driven" in str(err.value)


def test_mp_bind_node_with_engine_driven_transfer_plans_it_for_every_worker() -> None:
    node = _node()
    peer = node.model_copy(update={"name": "node2", "host": "10.0.0.12"})
    plan = get_engine("vllm").plan(node, _spanning("engine_driven"), "candidate", 0, peers=[peer])
    assert plan.env["LMCACHE_MP_TRANSFER_MODE"] == "engine_driven"
    assert plan.ray is not None and plan.ray.env_for("node2")["LMCACHE_MP_TRANSFER_MODE"] == "engine_driven"
    one_node = get_engine("vllm").plan(node, _profile("moe-480b-tp8.yaml"), "candidate", 0)
    assert "LMCACHE_MP_TRANSFER_MODE" not in one_node.env  # auto: the device's own default


def test_the_transfer_mode_cannot_be_set_around_the_refusal() -> None:
    """engine.env LMCACHE_MP_TRANSFER_MODE would change the transfer behind the plan's back (the refusal
    reads lmcache.mp_transfer_mode): the profile may not set it."""
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="LMCACHE_MP_TRANSFER_MODE.*mp_transfer_mode"):
        _profile("moe-480b-tp8.yaml", engine__env={"LMCACHE_MP_TRANSFER_MODE": "engine_driven"})

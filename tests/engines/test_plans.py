"""Engine plans (pure): the exact vLLM / emulator command, environment and LMCache file for each
platform, checked against the documented forms of vLLM, vllm-ascend, LMCache-Ascend and LMCache."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import yaml

from harness.config import load_inventory, load_profile
from harness.config.inventory import Node
from harness.config.profile import Arm, Profile
from harness.engines import EnginePlan, get_engine
from harness.engines.lmcache import ascend_connector_for
from harness.errors import InputError
from harness.sim.lmcache_config import parse_flat_yaml

REPO = Path(__file__).resolve().parents[2]
LMCACHE_V1 = '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'
LMCACHE_MP = (
    '{"kv_connector":"LMCacheMPConnector","kv_role":"kv_both","kv_connector_extra_config":'
    '{"lmcache.mp.host":"tcp://127.0.0.1","lmcache.mp.port":5555}}'
)


def _node(inv: str, name: str) -> Node:
    return load_inventory(REPO / "inventory" / inv).node(name)


def _profile(name: str) -> Profile:
    return load_profile(REPO / "profiles" / name)


def _yaml_of(plan: EnginePlan) -> dict[str, object]:
    ((path, text),) = plan.files.items()
    assert plan.env["LMCACHE_CONFIG_FILE"] == path
    data = yaml.safe_load(text)
    assert parse_flat_yaml(text) == data  # the emulator reads exactly what LMCache would
    return dict(data)


def test_rocm_mi308x_tp8_candidate_multiprocess_lmcache() -> None:
    node, profile = _node("mi308x-8gpu.example.yaml", "node1"), _profile("moe-480b-tp8.yaml")
    plan = get_engine("vllm").plan(node, profile, "candidate", 0, workdir="/var/tmp/kvgate")
    assert plan.argv == (
        "vllm",
        "serve",
        "/models/Qwen3-Coder-480B-A35B-Instruct",
        "--host",
        "127.0.0.1",
        "--port",
        "8000",
        "--served-model-name",
        "moe-480b",
        "--tensor-parallel-size",
        "8",
        "--max-model-len",
        "131072",
        "--kv-transfer-config",
        LMCACHE_MP,
        "--gpu-memory-utilization",
        "0.90",
        "--enable-prefix-caching",
    )
    assert plan.env["HIP_VISIBLE_DEVICES"] == plan.env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"
    assert plan.env["VLLM_SERVER_DEV_MODE"] == "1" and plan.reset_endpoint
    assert "LMCACHE_CONFIG_FILE" not in plan.env and not plan.files  # no YAML in multiprocess mode
    assert "PROMETHEUS_MULTIPROC_DIR" not in plan.env  # the LMCache server has its own /metrics
    assert plan.lmcache_mode == "multiprocess" and plan.sidecar is not None
    side = plan.sidecar
    assert (side.port, side.http_port, side.metrics_port) == (5555, 5556, 5556)
    assert side.argv[:2] == ("lmcache", "server")
    args = dict(zip(side.argv[2::2], side.argv[3::2]))
    assert args["--l1-size-gb"] == "100.0" and args["--eviction-policy"] == "LRU"
    # the profile declares lmcache 0.4.6 (the seeds' vLLM 0.20.1): its server's flags (connectorwiring.py)
    assert args["--transfer-mode"] == "gpu" and args["--chunk-size"] == "256"
    assert json.loads(args["--l2-adapter"]) == {
        "type": "fs_native",
        "base_path": "/mnt/fx100/kvgate-kv/moe-480b-tp8/candidate",
        "use_odirect": True,
        "max_capacity_gb": 12000.0,
        # fs_native only accounts max_capacity_gb without it (lmcache 0.5.6 fs_native_l2_adapter.py)
        "eviction": {"eviction_policy": "LRU"},
    }
    assert plan.kv_dirs == ("/mnt/fx100/kvgate-kv/moe-480b-tp8/candidate",)
    assert plan.devices == tuple(range(8)) and plan.endpoint_url == "http://127.0.0.1:8000"
    assert any("cold restore" in n and "POST /clear-cache" in n for n in plan.notes)
    # the evidence line is a shell line that re-parses to the same command
    line = plan.command_line()
    assert shlex.split(line)[-len(plan.argv) :] == list(plan.argv)
    assert "'" + LMCACHE_MP + "'" in line
    # like for like: the baseline arm gets the same L1 and O_DIRECT
    base = get_engine("vllm").plan(node, profile, "baseline", 0)
    assert base.sidecar is not None
    b_args = dict(zip(base.sidecar.argv[2::2], base.sidecar.argv[3::2]))
    assert b_args["--l1-size-gb"] == args["--l1-size-gb"]
    assert json.loads(b_args["--l2-adapter"])["use_odirect"] is True


def test_in_process_disk_size_is_per_rank_and_capacity_checked() -> None:
    node, profile = _node("mi308x-8gpu.example.yaml", "node1"), _profile("moe-480b-tp8.yaml")
    arm = profile.arm("candidate").model_copy(update={"lmcache": profile.arm("candidate").lmcache.model_copy(
        update={"mode": "in_process", "local_cpu": False})})
    plan = get_engine("vllm").plan(node, profile, arm, 0)
    data = _yaml_of(plan)
    # LMCache applies max_local_disk_size per TP rank: 12000 GB per instance over 8 ranks
    assert data["max_local_disk_size"] == 1500.0
    assert data["local_disk"] == "file:///mnt/fx100/kvgate-kv/moe-480b-tp8/candidate/"
    target = node.target("fx100")
    assert target is not None
    small = node.model_copy(update={"storage": [target.model_copy(update={"capacity": 1e12})]})
    with pytest.raises(InputError, match="exceeds storage target 'fx100'"):
        get_engine("vllm").plan(small, profile, arm, 0)


def test_capacity_is_counted_in_gib_as_lmcache_counts_it() -> None:
    """LMCache sizes its tiers as GB x 1024**3 (local_disk_backend.py; the L2 adapters): 950 "GB"
    is 1.02e12 bytes and does not fit a 1e12-byte target, which a 1e9-byte GB let through."""
    node, profile = _node("mi308x-8gpu.example.yaml", "node1"), _profile("moe-480b-tp8.yaml")
    target = node.target("fx100")
    assert target is not None
    small = node.model_copy(update={"storage": [target.model_copy(update={"capacity": 1e12})]})
    for gib, fits in ((950.0, False), (931.0, True)):  # 931 GiB = 0.9997e12 bytes
        arm = profile.arm("candidate").model_copy(update={"lmcache": profile.arm("candidate").lmcache.model_copy(
            update={"max_local_disk_size": gib})})
        if fits:
            get_engine("vllm").plan(small, profile, arm, 0)
        else:
            with pytest.raises(InputError, match="950 GiB x 1 instance.*LMCache counts 1024\\*\\*3"):
                get_engine("vllm").plan(small, profile, arm, 0)


def test_unsafe_cold_restores_are_refused_before_any_node_is_touched() -> None:
    from harness.engines.coldrestore import UnsafeColdRestore, cold_restore_plan

    node, profile = _node("mi308x-8gpu.example.yaml", "node1"), _profile("moe-480b-tp8.yaml")
    lm = profile.arm("candidate").lmcache
    def arm_with(**kw: object) -> Arm:
        return profile.arm("candidate").model_copy(update={"lmcache": lm.model_copy(update=kw)})

    # in-process with a CPU tier: only a restart empties it, and a restart loses the disk index
    with pytest.raises(UnsafeColdRestore, match="loses the local-disk index"):
        get_engine("vllm").plan(node, profile, arm_with(mode="in_process", local_cpu=True), 0)
    # in-process without dev mode: the prefix cache could only be emptied by a restart
    no_dev = profile.model_copy(update={"engine": profile.engine.model_copy(update={"dev_mode": False})})
    with pytest.raises(UnsafeColdRestore, match="engine.dev_mode"):
        cold_restore_plan(no_dev, arm_with(mode="in_process", local_cpu=False))
    # multiprocess without L2: L1 is all there is, and the cold restore clears it
    with pytest.raises(UnsafeColdRestore, match="without an L2 tier"):
        cold_restore_plan(profile, arm_with(mp_l2="none"))
    # valid: multiprocess (with or without dev mode: a restart keeps the L2 files), in-process
    # without a CPU tier and with dev mode, a remote tier, and the recompute arm
    assert cold_restore_plan(profile, arm_with()).steps[1].startswith("LMCache server POST /cache/clear")
    assert cold_restore_plan(no_dev, arm_with()).restarts_engine
    assert not cold_restore_plan(profile, arm_with(mode="in_process", local_cpu=False)).restarts_engine
    assert cold_restore_plan(no_dev, arm_with(mode="in_process", local_cpu=True, remote_url="lm://h:1")).mode
    assert cold_restore_plan(no_dev, profile.arm("recompute")).steps[0].startswith("restart vLLM")
    # a profile without cold restore plans nothing of the kind
    warm = profile.model_copy(update={"load": profile.load.model_copy(update={"cold_restore": False})})
    plan = get_engine("vllm").plan(node, warm, arm_with(mode="in_process", local_cpu=True), 0)
    assert not any("cold restore" in n for n in plan.notes)


def test_recompute_arm_runs_without_connector() -> None:
    node, profile = _node("mi308x-8gpu.example.yaml", "node1"), _profile("moe-480b-tp8.yaml")
    plan = get_engine("vllm").plan(node, profile, "recompute")
    assert "--kv-transfer-config" not in plan.argv
    assert "LMCACHE_CONFIG_FILE" not in plan.env and not plan.files and not plan.kv_dirs
    assert plan.offload is False and any("recompute" in n for n in plan.notes)


def test_vllm_sockets_live_in_the_instance_directory() -> None:
    node, profile = _node("mi308x-8gpu.example.yaml", "node1"), _profile("moe-480b-tp8.yaml")
    engine = get_engine("vllm")
    plan = engine.plan(node, profile, "candidate")
    assert plan.env["VLLM_RPC_BASE_PATH"] == plan.instance_dir
    # a workdir too long for <dir>/<uuid4> in a unix socket's 107 bytes: vLLM's own default
    deep = engine.plan(node, profile, "candidate", workdir="/srv/" + "w" * 80)
    assert len(deep.instance_dir) + 37 > 107 and "VLLM_RPC_BASE_PATH" not in deep.env
    # the profile's engine.env wins
    mine = profile.model_copy(update={"engine": profile.engine.model_copy(
        update={"env": {**profile.engine.env, "VLLM_RPC_BASE_PATH": "/run/vllm"}})})
    assert engine.plan(node, mine, "candidate").env["VLLM_RPC_BASE_PATH"] == "/run/vllm"


def test_tp4x2_two_instances_split_devices_and_ports() -> None:
    node, profile = _node("mi308x-8gpu.example.yaml", "node1"), _profile("tp4x2.yaml")
    engine = get_engine("vllm")
    a, b = (engine.plan(node, profile, "candidate", i) for i in (0, 1))
    assert (a.port, b.port) == (8000, 8001)
    assert a.env["HIP_VISIBLE_DEVICES"] == "0,1,2,3" and b.env["HIP_VISIBLE_DEVICES"] == "4,5,6,7"
    assert a.env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3" and b.env["CUDA_VISIBLE_DEVICES"] == "4,5,6,7"
    assert a.instance_dir != b.instance_dir and a.name != b.name
    # one directory per instance: separate LMCache servers (or in-process indexes) on one directory
    # would neither share nor stay safe from each other's eviction
    assert a.kv_dirs == ("/mnt/fx100/kvgate-kv/tp4x2/candidate/instance-0",)
    assert b.kv_dirs == ("/mnt/fx100/kvgate-kv/tp4x2/candidate/instance-1",)
    assert a.sidecar is not None and b.sidecar is not None
    assert (a.sidecar.port, b.sidecar.port) == (5555, 5557)  # 2 ports per LMCache server
    with pytest.raises(InputError, match="instance index 2"):
        engine.plan(node, profile, "candidate", 2)
    small = node.model_copy(update={"accelerators": node.accelerators.model_copy(update={"count": 6})})  # type: ignore[union-attr]
    with pytest.raises(InputError, match="needs devices 4-7 but the inventory lists 6"):
        engine.plan(small, profile, "candidate", 1)


def test_ascend_910b_dynamic_connector_and_hash_seed() -> None:
    node, profile = _node("atlas-910b.example.yaml", "atlas1"), _profile("deepseek-load-910b.yaml")
    plan = get_engine("vllm").plan(node, profile, "candidate", 0)
    assert plan.env["ASCEND_RT_VISIBLE_DEVICES"] == "0,1,2,3"
    assert "CUDA_VISIBLE_DEVICES" not in plan.env and "HIP_VISIBLE_DEVICES" not in plan.env
    assert plan.env["PYTHONHASHSEED"] == "0"
    i = plan.argv.index("--kv-transfer-config")
    assert json.loads(plan.argv[i + 1]) == {
        "kv_connector": "LMCacheAscendConnectorV1Dynamic",
        "kv_role": "kv_both",
        "kv_connector_module_path": "lmcache_ascend.integration.vllm.lmcache_ascend_connector_v1",
    }
    assert plan.argv[2] == "/mnt/fx100/models/DeepSeek-R1-Distill-Qwen-32B"  # model.path
    assert _yaml_of(plan)["local_disk"] == "file:///mnt/fx100/kvgate-kv/deepseek-load-910b/candidate/"
    assert _yaml_of(plan)["local_cpu"] is False  # no CPU tier: the cold restore needs no restart
    assert _yaml_of(plan)["max_local_disk_size"] == 125.0  # 500 GB per instance over 4 ranks
    assert plan.env["VLLM_SERVER_DEV_MODE"] == "1"
    # LMCache's in-process metrics are visible only through multi-process Prometheus
    prom = plan.env["PROMETHEUS_MULTIPROC_DIR"]
    assert prom == "/tmp/kvgate/engines/deepseek-load-910b/candidate-0/prometheus-multiproc"
    # vllm-ascend 0.17 registers the connector itself
    v017 = node.model_copy(update={"software": {"vllm-ascend": "0.17.0rc1"}})
    plan17 = get_engine("vllm").plan(v017, profile, "candidate", 0)
    i = plan17.argv.index("--kv-transfer-config")
    assert json.loads(plan17.argv[i + 1]) == {"kv_connector": "LMCacheAscendConnector", "kv_role": "kv_both"}
    assert any("builtin" in n for n in plan17.notes)
    assert [ascend_connector_for(v) for v in ("0.17.0", "v0.17.1", "0.11.0", None, "*")] == [
        "builtin",
        "builtin",
        "dynamic",
        "dynamic",
        "dynamic",
    ]


def test_cuda_and_cpu_device_environment() -> None:
    node, profile = _node("mi308x-8gpu.example.yaml", "node1"), _profile("tp4x2.yaml")
    cuda = get_engine("vllm").plan(node.model_copy(update={"platform": "cuda"}), profile, "baseline", 1)
    assert cuda.env["CUDA_VISIBLE_DEVICES"] == "4,5,6,7" and "HIP_VISIBLE_DEVICES" not in cuda.env
    assert cuda.platform == "cuda"
    cpu = get_engine("vllm").plan(node, profile, "baseline", 0, "cpu")
    assert not any(k.endswith("VISIBLE_DEVICES") for k in cpu.env) and cpu.devices == ()


def _spanning(profile: Profile, bind: str = "node") -> Profile:
    """``profile`` over two nodes, its multiprocess LMCache servers bound to ``bind``."""
    lm = {"mp_bind": bind, "mp_transfer_mode": "engine_driven"}  # lmcache-driven IPC cannot reach node2
    arms = [a.model_copy(update={"lmcache": a.lmcache.model_copy(update=lm)}) for a in profile.arms]
    return profile.model_copy(update={"arms": arms,
                                      "model": profile.model.model_copy(update={"nodes_per_instance": 2})})


def test_multi_node_engine_over_ray() -> None:
    inv = load_inventory(REPO / "inventory" / "mi308x-8gpu.example.yaml")
    head = inv.node("node1")
    peer = head.model_copy(update={"name": "node2", "host": "10.0.0.12"})
    # multiprocess LMCache on loopback: the workers on node2 could never reach the head's server
    with pytest.raises(InputError, match="binds 127.0.0.1 on the head node"):
        get_engine("vllm").plan(head, _spanning(_profile("moe-480b-tp8.yaml"), "loopback"), "candidate", 0,
                                peers=[peer])
    profile = _spanning(_profile("moe-480b-tp8.yaml"))
    plan = get_engine("vllm").plan(head, profile, "candidate", 0, peers=[peer])
    assert plan.sidecar is not None and plan.sidecar.host == "10.0.0.11"  # the head's inventory address
    assert plan.sidecar.argv[plan.sidecar.argv.index("--host") + 1] == "10.0.0.11"
    i = plan.argv.index("--kv-transfer-config")
    assert json.loads(plan.argv[i + 1])["kv_connector_extra_config"]["lmcache.mp.host"] == "tcp://10.0.0.11"
    i = plan.argv.index("--pipeline-parallel-size")
    assert plan.argv[i : i + 4] == ("--pipeline-parallel-size", "2", "--distributed-executor-backend", "ray")
    assert plan.ray is not None and plan.ray.head_address == "10.0.0.11:6379"
    assert plan.ray.commands == (
        (
            "node1",
            (
                "ray",
                "start",
                "--head",
                "--port",
                "6379",
                "--node-ip-address",
                "10.0.0.11",
                "--disable-usage-stats",
            ),
        ),
        (
            "node2",
            (
                "ray",
                "start",
                "--address",
                "10.0.0.11:6379",
                "--node-ip-address",
                "10.0.0.12",
                "--disable-usage-stats",
            ),
        ),
    )
    assert plan.ray.env_for("node2")["HIP_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"
    # interface settings before `ray start`, per node (ROCm: RCCL reads NCCL_SOCKET_IFNAME)
    worker = plan.ray.env_for("node2")
    assert worker["VLLM_HOST_IP"] == "10.0.0.12" and worker["NCCL_SOCKET_IFNAME"] == "ens1f0"
    assert worker["GLOO_SOCKET_IFNAME"] == "ens1f0"
    assert plan.env["VLLM_HOST_IP"] == "10.0.0.11"  # the engine on the head has the head's
    with pytest.raises(InputError, match="needs 1 peer node"):
        get_engine("vllm").plan(head, profile, "candidate", 0)


def test_multi_node_ascend_ray_environment() -> None:
    inv = load_inventory(REPO / "inventory" / "atlas-910b.example.yaml")
    head = inv.node("atlas1")
    peer = head.model_copy(update={"name": "atlas2", "host": "10.0.1.22"})
    profile = _profile("deepseek-load-910b.yaml")
    profile = profile.model_copy(update={"model": profile.model.model_copy(update={"nodes_per_instance": 2})})
    plan = get_engine("vllm").plan(head, profile, "candidate", 0, peers=[peer])
    assert plan.ray is not None
    worker = plan.ray.env_for("atlas2")
    assert worker["HCCL_IF_IP"] == "10.0.1.22" and worker["RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES"] == "1"
    assert worker["TP_SOCKET_IFNAME"] == worker["GLOO_SOCKET_IFNAME"] == "enp189s0f0"
    assert "NCCL_SOCKET_IFNAME" not in worker


def test_input_errors_name_what_is_wrong() -> None:
    node, profile = _node("mi308x-8gpu.example.yaml", "node1"), _profile("moe-480b-tp8.yaml")
    no_fx = node.model_copy(update={"storage": [t for t in node.storage if t.name != "fx100"]})
    with pytest.raises(
        InputError,
        match=r"storage target 'fx100', which node node1 does not have \(its targets: "
        r"local-nvme, nfs\)",
    ):
        get_engine("vllm").plan(no_fx, profile, "candidate")
    with pytest.raises(InputError, match="no arm named 'nope'; known: recompute, baseline, candidate"):
        get_engine("vllm").plan(node, profile, "nope")
    bad_env = profile.model_copy(
        update={"engine": profile.engine.model_copy(update={"env": {"CUDA_VISIBLE_DEVICES": "3"}})}
    )
    with pytest.raises(InputError, match="engine.env may not set CUDA_VISIBLE_DEVICES: kvgate manages it"):
        get_engine("vllm").plan(node, bad_env, "candidate")
    with pytest.raises(InputError, match="unknown engine kind 'sglang'; known: sim, vllm"):
        get_engine("sglang")


def test_sim_plan_carries_emulator_flags_and_geometry() -> None:
    node, profile = _node("localhost.yaml", "local"), _profile("demo.yaml")
    plan = get_engine("sim").plan(node, profile, "candidate", 0, agent_path="/tmp/kvgate/kvgate-agent.pyz")
    assert plan.argv[:5] == ("python3", "-I", "-S", "/tmp/kvgate/kvgate-agent.pyz", "sim")
    args = plan.argv[5:]
    assert args[:4] == ("serve", "demo/tiny-moe", "--host", "127.0.0.1")
    flags = dict(zip(args[4::2], args[5::2]))
    assert flags["--port"] == "18000" and flags["--kv-transfer-config"] == LMCACHE_V1
    assert flags["--kv-bytes-per-token"] == "2048"  # tiny: 2 x 4 layers x 2 heads x 64 x 2 B
    assert (
        flags["--prefill-tokens-per-s"],
        flags["--decode-tokens-per-s"],
        flags["--max-batch"],
        flags["--hbm-tokens"],
        flags["--kv-scale"],
    ) == ("20000.0", "400.0", "8", "4096", "1.0")
    fast = node.target("fast-disk")
    assert fast is not None
    assert _yaml_of(plan)["local_disk"] == f"file://{fast.path}/kvgate-kv/demo/candidate/"
    local = get_engine("sim").plan(node, profile, "baseline", 0)
    assert local.argv[:3] == ("python3", "-m", "harness.sim.cli") and "PYTHONPATH" in local.env
    assert "--kv-transfer-config" not in local.argv
    assert any("emulator" in n for n in local.notes)


def test_plan_json_is_complete_evidence() -> None:
    node, profile = _node("mi308x-8gpu.example.yaml", "node1"), _profile("moe-480b-tp8.yaml")
    plan = get_engine("vllm").plan(node, profile, "baseline")
    data = json.loads(json.dumps(plan.to_json()))
    assert data["argv"] == list(plan.argv) and data["env"] == dict(plan.env)
    assert data["command_line"] == plan.command_line()
    assert list(data["files"].values()) == list(plan.files.values())


def test_plan_node_and_json_roundtrip() -> None:
    from harness.engines import EngineInstance, plan_node
    from harness.remote.base import DetachedHandle
    from harness.remote.local import LocalExecutor

    node, profile = _node("mi308x-8gpu.example.yaml", "node1"), _profile("tp4x2.yaml")
    plans = plan_node(get_engine("vllm"), node, profile, "candidate")
    assert [(p.port, p.devices) for p in plans] == [(8000, (0, 1, 2, 3)), (8001, (4, 5, 6, 7))]
    assert EnginePlan.from_json(json.loads(json.dumps(plans[1].to_json()))) == plans[1]
    peer = node.model_copy(update={"name": "node2", "host": "10.0.0.12"})
    big = _spanning(_profile("moe-480b-tp8.yaml"))
    ray_plan = get_engine("vllm").plan(node, big, "candidate", peers=[peer])
    assert EnginePlan.from_json(json.loads(json.dumps(ray_plan.to_json()))) == ray_plan
    handle = DetachedHandle(
        node="node1",
        pid=42,
        pgid=42,
        start_time=1.0,
        marker="m",
        workdir="/w",
        stdout_path="/w/o",
        stderr_path="/w/e",
        pid_path="/w/p",
        exit_path="/w/x",
        command=plans[0].argv,
    )
    inst = EngineInstance(plan=plans[0], handle=handle, executor=LocalExecutor("node1"), started_at=5.0)
    back = EngineInstance.from_json(json.loads(json.dumps(inst.to_json())), LocalExecutor("node1"))
    assert back.plan == inst.plan and back.handle == inst.handle and back.started_at == 5.0
    assert back.endpoint_url == "http://127.0.0.1:8000"


def test_arms_that_are_not_like_for_like_are_reported() -> None:
    from harness.engines.coldrestore import unlike_settings

    node, profile = _node("mi308x-8gpu.example.yaml", "node1"), _profile("moe-480b-tp8.yaml")
    assert unlike_settings(profile) == []  # the shipped profile compares storage alone
    arms = [a if a.name != "baseline" else a.model_copy(update={"lmcache": a.lmcache.model_copy(
        update={"extra_config": {}, "mp_l1_size_gb": 50.0})}) for a in profile.arms]
    odd = profile.model_copy(update={"arms": arms})
    diffs = unlike_settings(odd)
    assert diffs == ["lmcache.mp_l1_size_gb: baseline 50.0 vs candidate 100.0",
                     "lmcache.extra_config.use_odirect: baseline None vs candidate True"]
    plan = get_engine("vllm").plan(node, odd, "candidate", 0)
    assert sum(n.startswith("NOT like for like") for n in plan.notes) == 2


def test_ray_workers_get_lmcache_settings_through_ray_start() -> None:
    """Issue 33 item 8: vLLM copies LMCACHE_* and PYTHONHASHSEED to Ray workers only in recent
    versions (0.32: vllm/ray/ray_env.py) and never PROMETHEUS_MULTIPROC_DIR: without them a worker
    runs LMCache's defaults (5 GB CPU tier, no disk, a random hash seed). Every raylet carries them."""
    inv = load_inventory(REPO / "inventory" / "mi308x-8gpu.example.yaml")
    head = inv.node("node1")
    peer = head.model_copy(update={"name": "node2", "host": "10.0.0.12"})
    profile = _spanning(_profile("moe-480b-tp8.yaml"))
    lm = profile.arm("candidate").lmcache.model_copy(update={"mode": "in_process", "local_cpu": False})
    arm = profile.arm("candidate").model_copy(update={"lmcache": lm})
    plan = get_engine("vllm").plan(head, profile, arm, 0, peers=[peer])
    assert plan.ray is not None
    for node in ("node1", "node2"):
        env = plan.ray.env_for(node)
        for key in ("LMCACHE_CONFIG_FILE", "PROMETHEUS_MULTIPROC_DIR", "PYTHONHASHSEED"):
            assert env[key] == plan.env[key], (node, key)
    mp = get_engine("vllm").plan(head, profile, "candidate", 0, peers=[peer])  # multiprocess: the seed
    assert mp.ray is not None and mp.ray.env_for("node2")["PYTHONHASHSEED"] == "0"


def test_kvgate_plan_shows_the_ray_start_environment(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from harness.cli.main import run

    data = yaml.safe_load((REPO / "profiles" / "moe-480b-tp8.yaml").read_text())
    data["model"]["nodes_per_instance"] = 2
    for arm in data["arms"]:
        if arm.get("lmcache", {}).get("mode") == "multiprocess":
            arm["lmcache"].update(mp_bind="node", mp_transfer_mode="engine_driven")
    inv = yaml.safe_load((REPO / "inventory" / "mi308x-8gpu.example.yaml").read_text())
    second = {**inv["nodes"][0], "name": "node2", "host": "10.0.0.12"}
    inv["nodes"] = [inv["nodes"][0], second]
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(data))
    (tmp_path / "i.yaml").write_text(yaml.safe_dump(inv))
    assert run(["plan", "--inventory", str(tmp_path / "i.yaml"), "--profile", str(tmp_path / "p.yaml"),
                "--arm", "candidate"]) == 0
    out = capsys.readouterr().out
    assert "ray env [node2] PYTHONHASHSEED=0" in out and "ray env [node1] PYTHONHASHSEED=0" in out


def _gds_arm(profile: Profile, **lm: object) -> Arm:
    base = profile.arm("candidate")
    settings = base.lmcache.model_copy(update={"mode": "in_process", "local_cpu": True, **lm})
    return Arm.model_validate({**base.model_dump(), "lmcache": settings.model_dump()})  # validated


def test_gds_arm_has_no_local_disk_backend_and_the_platform_gds_library() -> None:
    """lmcache 0.5.6 creates a LocalDiskBackend whenever local_disk is set and a GdsBackend whenever
    gds_path is: both at once wrote every chunk twice and read the local disk first. LMCache's default
    gds_backend is cufile, which MI308X cannot load (hipfile)."""
    node, profile = _node("mi308x-8gpu.example.yaml", "node1"), _profile("moe-480b-tp8.yaml")
    plan = get_engine("vllm").plan(node, profile, _gds_arm(profile, use_gds=True), 0)
    data = _yaml_of(plan)
    tier = "/mnt/fx100/kvgate-kv/moe-480b-tp8/candidate"
    assert "local_disk" not in data and "max_local_disk_size" not in data
    assert data["gds_path"] == tier and data["use_gds"] is True and data["gds_backend"] == "hipfile"
    assert plan.kv_dirs == (tier,)  # created, marked and cleaned as a disk tier
    cuda = node.model_copy(update={"platform": "cuda"})
    on_cuda = get_engine("vllm").plan(cuda, profile, _gds_arm(profile, use_gds=True), 0)
    assert _yaml_of(on_cuda)["gds_backend"] == "cufile"
    mine = _gds_arm(profile, gds_path="/mnt/gds", gds_backend="cufile")
    own = _yaml_of(get_engine("vllm").plan(node, profile, mine, 0))
    assert own["gds_path"] == "/mnt/gds" and own["gds_backend"] == "cufile" and "local_disk" not in own


def test_gds_tier_keeps_a_cpu_tier_across_a_restart_and_is_refused_where_it_cannot_work() -> None:
    """The GDS backend rescans its directory at start (gds_backend.py _scan_metadata), so a restart
    is a valid evict with a CPU tier; the local-disk backend's index would be lost."""
    from pydantic import ValidationError

    from harness.engines.coldrestore import cold_restore_plan

    profile = _profile("moe-480b-tp8.yaml")
    restore = cold_restore_plan(profile, _gds_arm(profile, use_gds=True))
    assert restore.restarts_engine and restore.steps[0].startswith("restart vLLM")
    with pytest.raises(ValidationError, match="multiprocess server takes L2 adapters"):
        _gds_arm(profile, use_gds=True, mode="multiprocess")
    with pytest.raises(ValidationError, match="gds_backend is set but GDS is off"):
        _gds_arm(profile, gds_backend="hipfile")
    with pytest.raises(ValidationError, match="contains '..'"):
        _gds_arm(profile, gds_path="/mnt/x/../victim")


def test_gds_tier_is_counted_by_what_the_sweep_stores_since_it_never_evicts() -> None:
    """lmcache 0.5.6's GDS backend has no size bound or eviction, and max_local_disk_size configures
    only the local-disk backend: kvgate counted that size (12000 GiB, under the 14 TB array) for a
    GDS arm. It now counts what the arm can store: 2 x prompts_per_point requests x the longest
    request x KV bytes per token, against the target the GDS directory is on."""
    node, profile = _node("mi308x-8gpu.example.yaml", "node1"), _profile("moe-480b-tp8.yaml")
    per_token = profile.model.kv_geometry.bytes_per_token
    longest = profile.load.longest_request_tokens()
    assert longest is not None and profile.load.prompts_per_point == 128
    plan = get_engine("vllm").plan(node, profile, _gds_arm(profile, use_gds=True), 0)
    bound = 2 * 128 * longest * per_token  # 4.28 TB
    assert any(n.startswith("LMCache's GDS backend has no size bound or eviction") and f"{bound:.4g} bytes" in n
               and "within target 'fx100'" in n for n in plan.notes)
    bigger = profile.model_copy(update={"load": profile.load.model_copy(update={"prompts_per_point": 512})})
    with pytest.raises(InputError, match=r"GDS backend keeps every chunk .* exceeds storage target 'fx100'"):
        get_engine("vllm").plan(node, bigger, _gds_arm(bigger, use_gds=True), 0)
    # a gds_path on no declared target is not counted, and the plan says so
    elsewhere = get_engine("vllm").plan(node, bigger, _gds_arm(bigger, gds_path="/scratch/gds"), 0)
    assert any("in /scratch/gds, on no storage target with a declared capacity: not counted" in n
               for n in elsewhere.notes)


def test_an_fs_remote_tier_is_counted_like_gds_against_the_target_it_is_on() -> None:
    """lmcache 0.5.6's fs:// remote connector has no size bound or eviction either: its directory
    was created and cleaned by kvgate but counted against no capacity."""
    node, profile = _node("mi308x-8gpu.example.yaml", "node1"), _profile("moe-480b-tp8.yaml")

    def remote_arm(p: Profile) -> Arm:
        base = p.arm("candidate").model_dump()
        base.pop("storage")
        base["lmcache"] = {"mode": "in_process", "remote_url": "fs:///mnt/fx100/shared-kv"}
        return Arm.model_validate(base)

    plan = get_engine("vllm").plan(node, profile, remote_arm(profile), 0)
    assert "/mnt/fx100/shared-kv" in plan.kv_dirs
    assert any(n.startswith("LMCache's fs:// remote connector has no size bound or eviction") and
               "within target 'fx100'" in n for n in plan.notes)
    bigger = profile.model_copy(update={"load": profile.load.model_copy(update={"prompts_per_point": 512})})
    with pytest.raises(InputError, match=r"fs:// remote connector keeps every chunk .* exceeds storage target"):
        get_engine("vllm").plan(node, bigger, remote_arm(bigger), 0)


def test_rocm_plans_record_that_an_inherited_rocr_visible_devices_is_cleared() -> None:
    node, profile = _node("mi308x-8gpu.example.yaml", "node1"), _profile("tp4x2.yaml")
    plan = get_engine("vllm").plan(node, profile, "candidate", 1)
    assert any(n.startswith("ROCR_VISIBLE_DEVICES: an inherited value is cleared") and "=4,5,6,7 " in n
               for n in plan.notes)
    assert "ROCR_VISIBLE_DEVICES" not in plan.env  # cleared, not set
    atlas = _node("atlas-910b.example.yaml", "atlas1")
    assert not any("ROCR" in n for n in get_engine("vllm").plan(atlas, _profile("deepseek-load-910b.yaml"),
                                                                 "candidate", 0).notes)

"""Engines end to end on this machine: the vLLM adapter launching the emulator through the `vllm`
shim (vLLM itself cannot run here), and the sim kind, through the real LocalExecutor and a real
loopback OpenSSH node: start, wait ready, load, scrape, evict, stop, port free."""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from harness.config.inventory import Inventory, Node
from harness.config.profile import Profile
from harness.engines import (
    EngineInstance,
    EngineStartError,
    MetricsSnapshot,
    delta,
    drop_page_cache,
    get_engine,
    http_request,
    port_free,
)
from harness.engines.coldrestore import UnsafeColdRestore
from harness.load.runner import LoadConfig, run_load
from harness.load.workloads import Workload, build_workload
from harness.ports import free_port
from harness.remote.base import Executor
from harness.remote.local import LocalExecutor
from harness.sim.vllm_shim import write_vllm_shim

# 256-token chunks of 16 KiB/token = 4 MiB per chunk: a 2048-token document is 32 MiB of real reads
EMULATOR_ARGS = ["--prefill-tokens-per-s", "10000", "--decode-tokens-per-s", "2000", "--hbm-tokens", "65536"]


def _profile(
    tmp: Path,
    *,
    kind: str,
    command: str | None,
    port: int,
    extra: list[str],
    env: dict[str, str] | None = None,
    more_arms: tuple[dict[str, Any], ...] = (),
    dev_mode: bool | None = None,
) -> Profile:
    return Profile.model_validate(
        {
            "name": "e2e",
            "model": {
                "name": "test/long-ctx",
                "served_name": "long-ctx",
                "max_model_len": 16384,
                "geometry": {"layers": 16, "kv_heads": 4, "head_dim": 64, "dtype_bytes": 2},
            },  # 16 KiB/token
            "engine": {
                "kind": kind,
                "command": command,
                "port": port,
                "ready_timeout": "20s",
                # the in-process disk tier survives only an in-place prefix-cache reset (no restart)
                "dev_mode": kind == "vllm" if dev_mode is None else dev_mode,
                "extra_args": extra,
                "env": env or {},
                "sim": {"prefill_tokens_per_s": 10000, "decode_tokens_per_s": 2000, "hbm_tokens": 65536},
            },
            "arms": [
                {"name": "recompute", "offload": False},
                {"name": "disk", "storage": "fast", "lmcache": {"chunk_size": 256, "max_local_disk_size": 1}},
                *more_arms,
            ],
            "baseline": "recompute",
            "candidate": "disk",
            "recompute": "recompute",
        }
    )


def _node(tmp: Path, name: str = "local", host: str = "localhost") -> Node:
    return Node.model_validate(
        {
            "name": name,
            "host": host,
            "connection": "local",
            "platform": "cpu",
            "storage": [{"name": "fast", "path": str(tmp / "tier")}],
        }
    )


def _load(inst: EngineInstance, workload: Workload, out: Path) -> dict[str, Any]:
    cfg = LoadConfig(
        endpoint=inst.external_url,
        model=inst.plan.served_model_name,
        api="completions",
        concurrency=2,
        run_warmup=False,
        progress=False,
        timeout_s=30.0,
    )
    summary = run_load(cfg, out, workload=workload)
    assert summary["completed"] == len(workload.measured), summary.to_dict()
    return summary.to_dict()


def _wait_stored(engine: Any, inst: EngineInstance, tokens: float) -> None:
    deadline = time.monotonic() + 15
    while (engine.scrape_metrics(inst).value("lmcache:num_stored_tokens") or 0) < tokens:
        assert time.monotonic() < deadline
        time.sleep(0.05)


def _cold_restore_point(
    engine: Any, ex: Executor, profile: Profile, node: Node, arm: str, tmp: Path, workdir: str
) -> tuple[dict[str, Any], Any, MetricsSnapshot]:
    """Populate, evict (engine restart for vllm), drop the page cache, measure; returns the summary,
    the metrics delta of the measured part and the final scrape."""
    wl = build_workload(
        "long-doc",
        {"num_docs": 6, "doc_len": 2048, "query_len": 8, "num_queries": 6, "output_len": 4},
        seed=3,
    )
    populate = Workload("long-doc", wl.params, wl.seed, list(wl.warmup), [])
    plan = engine.plan(node, profile, arm, 0, workdir=workdir, python=sys.executable)
    inst = engine.start(ex, plan)
    try:
        engine.wait_ready(inst, 20)
        _load(inst, populate, tmp / f"{arm}-populate")
        if plan.offload:
            _wait_stored(engine, inst, 6 * 2048)
        inst = engine.evict(inst).instance
        drop_page_cache(ex)
        before = engine.scrape_metrics(inst)
        summary = _load(inst, wl, tmp / f"{arm}-measure")
        after = engine.scrape_metrics(inst)
        engine.collect_logs(inst, tmp / "evidence")
        return summary, delta(before, after), after
    finally:
        engine.stop(inst, remove_kv_files=True)
        assert port_free(ex, plan.host, plan.port)


def test_ttft_falls_from_recompute_to_disk_arm_through_the_vllm_adapter(tmp_path: Path) -> None:
    shim = write_vllm_shim(tmp_path / "bin", sys.executable)
    port = free_port()
    profile = _profile(
        tmp_path,
        kind="vllm",
        command=str(shim),
        port=port,
        # 2 MiB of KV a query. Recompute is emulated time; a restore is real reads and a real CRC
        # pass over them, which slow down when the CPU is shared: at 8 MiB a query the disk arm took
        # 15 ms alone, 22-51 ms beside ten busy sessions and 143 ms in a CI run beside a CPU hog
        # (against recompute's 210); at 2 MiB 8-24 ms beside the ten
        extra=EMULATOR_ARGS + ["--kv-bytes-per-token", "1024"],
    )
    node = _node(tmp_path)
    engine = get_engine("vllm")
    with LocalExecutor("local") as ex:
        rec, rec_delta, _ = _cold_restore_point(
            engine, ex, profile, node, "recompute", tmp_path, str(tmp_path / "w")
        )
        disk, disk_delta, after = _cold_restore_point(
            engine, ex, profile, node, "disk", tmp_path, str(tmp_path / "w")
        )
    # every measured query asks for one of the 6 populated 2048-token documents: recompute costs
    # 0.2 s of emulated prefill, the disk arm reads 8 chunks of 256 KiB from the tier instead
    assert rec["median_ttft_ms"] >= 200
    assert disk["median_ttft_ms"] < 0.6 * rec["median_ttft_ms"], (
        disk["median_ttft_ms"],
        rec["median_ttft_ms"],
    )
    assert rec_delta.counters["vllm:external_prefix_cache_hits"] == 0
    assert disk_delta.counters["lmcache:num_hit_tokens"] == 6 * 2048
    # ...and the disk arm's gain comes from real reads of the tier's bytes
    assert disk_delta.counters["kvgate_sim:tier_read_bytes"] == 6 * 2 * 2**20
    assert disk_delta.key_figures()["external_prefix_cache_hit_rate"] == pytest.approx(6 * 2048 / (6 * 2056))
    assert disk_delta.histograms["vllm:time_to_first_token_seconds"].count == 6
    assert after.value("kvgate_sim:emulator_info") == 1.0
    # evidence: the logs name each request, the plan records the exact command
    ev = tmp_path / "evidence"
    plan_json = json.loads((ev / "local-engine-disk-0.plan.json").read_text())
    assert plan_json["plan"]["argv"][0] == str(shim) and "--kv-transfer-config" in plan_json["plan"]["argv"]
    assert "local_disk:" in (ev / "local-engine-disk-0.lmcache.yaml").read_text()
    assert "request ld-q" in (ev / "local-engine-disk-0.stderr.log").read_text()
    assert not (tmp_path / "tier" / "kvgate-kv" / "e2e" / "disk").exists()  # removed on request


def test_sim_kind_start_evict_stop_and_failures(tmp_path: Path) -> None:
    port = free_port()
    profile = _profile(tmp_path, kind="sim", command=None, port=port, extra=[])
    node = _node(tmp_path)
    engine = get_engine("sim")
    with LocalExecutor("local") as ex:
        plan = engine.plan(node, profile, "disk", 0, workdir=str(tmp_path / "w"), python=sys.executable)
        inst = engine.start(ex, plan)
        try:
            waited = engine.wait_ready(inst)
            assert waited < 10
            # a second start on the same port is refused before anything runs
            with pytest.raises(EngineStartError, match=f"port {port} on 127.0.0.1 is already in use"):
                engine.start(ex, plan)
            body = json.dumps(
                {"model": "long-ctx", "prompt": " ".join(f"w{i}" for i in range(512)), "max_tokens": 2}
            ).encode()
            assert http_request(inst, "/v1/completions", method="POST", body=body)[0] == 200
            res = engine.evict(inst)
            assert res.method == "admin-endpoint" and res.instance is inst
            assert '"hbm": 3' in res.detail  # the prompt's 2 chunks and the probe's one
            assert res.reset_verified is True  # the probe re-sent after it found 0 prefix hits
            snap = engine.scrape_metrics(inst)
            assert snap.value("vllm:prefix_cache_queries") == 512 + 3 * 300  # + the probe, three times
        finally:
            state = engine.stop(inst)
        assert state.exit_code == 0  # SIGTERM: the emulator drained and exited cleanly
        assert port_free(ex, "127.0.0.1", port)
        assert (tmp_path / "tier" / "kvgate-kv" / "e2e" / "disk").is_dir()  # kept unless asked


def test_engine_that_dies_reports_its_log_tail(tmp_path: Path) -> None:
    profile = _profile(tmp_path, kind="sim", command=None, port=free_port(), extra=["--kv-scale", "7"])
    node = _node(tmp_path)
    engine = get_engine("sim")
    with LocalExecutor("local") as ex:
        inst = engine.start(
            ex, engine.plan(node, profile, "disk", 0, workdir=str(tmp_path / "w"), python=sys.executable)
        )
        with pytest.raises(EngineStartError) as info:
            engine.wait_ready(inst, 10)
        engine.stop(inst)
    msg = str(info.value)
    assert "engine exited before it was ready (exited with code 2)" in msg
    assert "--kv-scale must be <= 1" in msg and "command: " in msg


def test_missing_engine_binary_is_named(tmp_path: Path) -> None:
    profile = _profile(tmp_path, kind="vllm", command="vllm-not-installed-here", port=free_port(), extra=[])
    with (
        LocalExecutor("local") as ex,
        pytest.raises(EngineStartError, match="'vllm-not-installed-here' is not on"),
    ):
        get_engine("vllm").start(
            ex, get_engine("vllm").plan(_node(tmp_path), profile, "disk", 0, workdir=str(tmp_path / "w"))
        )


def test_not_ready_in_time_gives_the_last_observation(tmp_path: Path) -> None:
    # an engine that never listens: `sleep` standing in for a model that takes forever to load
    profile = _profile(tmp_path, kind="vllm", command="/bin/sleep", port=free_port(), extra=[])
    engine = get_engine("vllm")
    with LocalExecutor("local") as ex:
        plan = engine.plan(
            _node(tmp_path), profile, "recompute", 0, workdir=str(tmp_path / "w"), python=sys.executable
        )
        plan = type(plan)(**{**plan.__dict__, "argv": ("/bin/sleep", "30")})
        inst = engine.start(ex, plan)
        with pytest.raises(EngineStartError, match=r"not ready after 0.5 s \(last: .*Connection refused"):
            engine.wait_ready(inst, 0.5)
        engine.stop(inst, grace=2)


@pytest.mark.ssh
def test_vllm_adapter_over_loopback_ssh(tmp_path: Path, ssh_cluster: Any) -> None:
    from harness.remote.connect import executor_for

    cluster = ssh_cluster(1)
    inv: Inventory = cluster.inventory
    ssh_node = inv.nodes[0]
    node = ssh_node.model_copy(update={"storage": _node(tmp_path).storage})
    shim = write_vllm_shim(tmp_path / "bin", sys.executable)
    port = free_port()
    profile = _profile(
        tmp_path,
        kind="vllm",
        command=str(shim),
        port=port,
        extra=EMULATOR_ARGS + ["--kv-bytes-per-token", "16384"],
        dev_mode=False,  # no reset endpoint: the recompute arm's cold restore is a restart
    )
    engine = get_engine("vllm")
    ex = executor_for(inv, node.name)
    try:
        plan = engine.plan(node, profile, "recompute", 0, workdir=str(tmp_path / "w"), python=sys.executable)
        inst = engine.start(ex, plan)
        try:
            engine.wait_ready(inst, 20)
            wl = build_workload(
                "long-doc", {"num_docs": 2, "doc_len": 1024, "num_queries": 4, "output_len": 4}, seed=1
            )
            before = engine.scrape_metrics(inst)
            _load(
                inst,
                Workload("long-doc", wl.params, wl.seed, list(wl.warmup) + list(wl.measured), []),
                tmp_path / "ssh-load",
            )
            d = delta(before, engine.scrape_metrics(inst))
            assert d.histograms["vllm:time_to_first_token_seconds"].count == 6
            assert d.counters["vllm:prefix_cache_hits"] > 0  # the queries re-used the warmed documents
            # a POST through the node (the request body travels on the SSH channel's stdin)
            body = json.dumps({"model": "long-ctx", "prompt": "a b c", "max_tokens": 2}).encode()
            status, answer = http_request(inst, "/v1/completions", method="POST", body=body)
            assert status == 200 and json.loads(answer)["usage"]["prompt_tokens"] == 3
            first = inst
            inst = engine.evict(inst).instance  # vLLM: a restart through SSH
            assert inst.handle.pid != first.handle.pid
            assert engine.scrape_metrics(inst).value("vllm:prefix_cache_hits") == 0
        finally:
            engine.stop(inst, remove_kv_files=True)
        assert port_free(ex, "127.0.0.1", port)
        assert not ex.poll(inst.handle).running
    finally:
        ex.close()


def test_ray_cluster_start_and_stop_commands(tmp_path: Path) -> None:
    """Ray cannot run here: a fake `ray` records each call (argv and device variables) so the
    start/stop sequencing and the failure path are tested for real through executors."""
    from harness.engines.ray import plan_ray_cluster, start_ray_cluster, stop_ray_cluster

    calls = tmp_path / "calls.log"
    fake = tmp_path / "ray"
    fake.write_text(
        "#!/bin/sh\n"
        f'echo "$KVGATE_NODE $* HIP=$HIP_VISIBLE_DEVICES" >> {calls}\n'
        "case \"$*\" in *10.0.0.13*) echo 'worker cannot reach head' >&2; exit 1;; esac\n"
    )
    fake.chmod(0o755)

    def mk(name: str, host: str) -> Node:
        return Node.model_validate(
            {
                "name": name,
                "host": host,
                "platform": "mi308x",
                "accelerators": {"model": "MI308X", "count": 8},
            }
        )

    head, w1, w2 = mk("n1", "10.0.0.11"), mk("n2", "10.0.0.12"), mk("n3", "10.0.0.13")

    class Tagged(LocalExecutor):
        def run(self, argv: Any, *, env: Any = None, **kw: Any) -> Any:
            return super().run(argv, env={**(env or {}), "KVGATE_NODE": self.node}, **kw)

    exs = {n: Tagged(n) for n in ("n1", "n2", "n3")}
    plan = plan_ray_cluster(head, [w1], platform="mi308x", devices_per_node=8, ray=str(fake))
    start_ray_cluster(plan, exs)
    assert stop_ray_cluster(plan, exs) == {"n2": 0, "n1": 0}
    lines = calls.read_text().splitlines()
    assert lines[0].startswith("n1 start --head --port 6379 --node-ip-address 10.0.0.11")
    assert lines[1].startswith("n2 start --address 10.0.0.11:6379") and lines[1].endswith(
        "HIP=0,1,2,3,4,5,6,7"
    )
    assert lines[2:] == ["n2 stop --force HIP=", "n1 stop --force HIP="]
    calls.unlink()
    bad = plan_ray_cluster(head, [w1, w2], platform="mi308x", devices_per_node=8, ray=str(fake))
    with pytest.raises(EngineStartError, match="ray start failed") as info:
        start_ray_cluster(bad, exs)
    assert "worker cannot reach head" in str(info.value)
    # what was started is stopped again, workers first
    assert [ln.split()[:2] for ln in calls.read_text().splitlines()[3:]] == [["n2", "stop"], ["n1", "stop"]]


def test_median_helper_sanity() -> None:
    assert statistics.median([3.0, 1.0, 2.0]) == 2.0


def test_vllm_evict_in_place_when_dev_mode_and_no_cpu_tier(tmp_path: Path) -> None:
    shim = write_vllm_shim(tmp_path / "bin", sys.executable)
    cpu_arm = {"name": "cpu", "storage": "fast", "lmcache": {"local_cpu": True, "max_local_cpu_size": 1}}
    profile = _profile(
        tmp_path,
        kind="vllm",
        command=str(shim),
        port=free_port(),
        extra=EMULATOR_ARGS,
        more_arms=(cpu_arm,),
    )
    engine = get_engine("vllm")
    with LocalExecutor("local") as ex:
        inst = engine.start(
            ex,
            engine.plan(
                _node(tmp_path), profile, "disk", 0, workdir=str(tmp_path / "w"), python=sys.executable
            ),
        )
        try:
            engine.wait_ready(inst, 20)
            res = engine.evict(inst)
            assert res.method == "reset_prefix_cache" and res.instance is inst  # no reload
            assert res.reset_verified is True and res.steps[0]["probe_prefix_hits_after"] == 0
            assert res.steps[0]["probe_prefix_hits_before"] > 0  # the probe was cached before the reset
        finally:
            engine.stop(inst)
        # the CPU tier lives in the engine: only a restart empties it, and the restart loses the
        # in-process disk index, so a cold-restore profile refuses the arm before starting anything
        with pytest.raises(UnsafeColdRestore, match="loses the local-disk index"):
            engine.plan(_node(tmp_path), profile, "cpu", 0, workdir=str(tmp_path / "w"), python=sys.executable)
        warm = profile.model_copy(update={"load": profile.load.model_copy(update={"cold_restore": False})})
        plan = engine.plan(_node(tmp_path), warm, "cpu", 0, workdir=str(tmp_path / "w"), python=sys.executable)
        assert plan.cpu_tier
        inst = engine.start(ex, plan)
        try:
            engine.wait_ready(inst, 20)
            res = engine.evict(inst)  # LMCache's CPU tier lives in the engine: only a restart empties it
            assert res.method == "restart" and res.instance.handle.pid != inst.handle.pid
            inst = res.instance
        finally:
            engine.stop(inst)


def test_emulator_loses_the_in_process_disk_index_on_restart_as_lmcache_does(tmp_path: Path) -> None:
    """LMCache's in-process local-disk backend keeps its index in the engine's memory: after a
    restart the files are still there but are not hits. The emulator used to find them by file
    existence (kinder than LMCache); an fs:// remote tier does survive."""
    remote = tmp_path / "remote"
    arm = {"name": "both",  # one tier under test per arm: the remote one here
           "lmcache": {"chunk_size": 256, "max_local_disk_size": 1, "remote_url": f"fs://{remote}"}}
    profile = _profile(tmp_path, kind="sim", command=None, port=free_port(), extra=[], more_arms=(arm,))
    node = _node(tmp_path)
    engine = get_engine("sim")
    body = json.dumps({"model": "long-ctx", "prompt": " ".join(f"w{i}" for i in range(1024)), "max_tokens": 2}).encode()

    def one_request(arm_name: str) -> tuple[float, float]:
        with LocalExecutor("local") as ex:
            plan = engine.plan(node, profile, arm_name, 0, workdir=str(tmp_path / "w"), python=sys.executable)
            inst = engine.start(ex, plan)
            try:
                engine.wait_ready(inst, 20)
                before = engine.scrape_metrics(inst)
                assert http_request(inst, "/v1/completions", method="POST", body=body)[0] == 200
                d = delta(before, engine.scrape_metrics(inst))
                if d.counters["lmcache:num_hit_tokens"] == 0:
                    _wait_stored(engine, inst, 1024)  # the chunks are on disk before the next restart
                return d.counters["lmcache:num_hit_tokens"], d.counters.get("kvgate_sim:tier_read_bytes", 0.0)
            finally:
                engine.stop(inst)

    assert one_request("disk")[0] == 0  # cold: nothing stored yet
    files = list((tmp_path / "tier" / "kvgate-kv" / "e2e" / "disk").glob("*.kvchunk"))
    assert len(files) == 4  # written, and kept across the restart
    assert one_request("disk") == (0, 0)  # ...but a new process does not know them
    assert one_request("both")[0] == 0  # first run of this arm: stores to the remote tier
    hits, read = one_request("both")
    assert hits == 1024 and read > 0  # the remote tier is found again after the restart


def test_controller_lmcache_local_disk_no_longer_reaches_the_emulator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 33: with LMCACHE_LOCAL_DISK=file:///dev/shm/x/ in the controller's environment, the
    local executor passed it to the emulator, whose disk tier moved into RAM (G3 PASSed on it).
    The engine now starts with only what its plan declares: the chunks land in the plan's tier."""
    ram = tmp_path / "shm-x"
    monkeypatch.setenv("LMCACHE_LOCAL_DISK", f"file://{ram}/")
    monkeypatch.setenv("LMCACHE_MAX_LOCAL_DISK_SIZE", "5")
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "7")
    monkeypatch.setenv("ROCR_VISIBLE_DEVICES", "3")  # ROCm would number HIP devices within it
    profile = _profile(tmp_path, kind="sim", command=None, port=free_port(), extra=[])
    engine = get_engine("sim")
    body = json.dumps({"model": "long-ctx", "prompt": " ".join(f"w{i}" for i in range(1024)), "max_tokens": 2})
    with LocalExecutor("local") as ex:
        plan = engine.plan(_node(tmp_path), profile, "disk", 0, workdir=str(tmp_path / "w"), python=sys.executable)
        inst = engine.start(ex, plan)
        try:
            engine.wait_ready(inst, 20)
            pid = inst.handle.pid  # the detached wrapper; the engine is its child
            child = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()[0]
            environ = Path(f"/proc/{child}/environ").read_bytes().split(b"\0")
            assert b"harness.sim.cli" in Path(f"/proc/{child}/cmdline").read_bytes()
            leaked = (b"LMCACHE_LOCAL_DISK", b"HIP_VISIBLE", b"ROCR_VISIBLE", b"LMCACHE_MAX")
            assert not [v for v in environ if v.startswith(leaked)]
            assert f"LMCACHE_CONFIG_FILE={plan.env['LMCACHE_CONFIG_FILE']}".encode() in environ  # declared
            assert http_request(inst, "/v1/completions", method="POST", body=body.encode())[0] == 200
            _wait_stored(engine, inst, 1024)
        finally:
            engine.stop(inst)
    assert not ram.exists()
    assert len(list((tmp_path / "tier" / "kvgate-kv" / "e2e" / "disk").glob("*.kvchunk"))) == 4


def test_ray_start_carries_lmcache_settings_and_nothing_inherited(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """Each raylet (whose environment every Ray worker inherits) gets the engine's LMCache settings
    and none of the controller's engine variables (a fake `ray` prints what it was given)."""
    from harness.engines.ray import plan_ray_cluster, start_ray_cluster, with_engine_env

    calls = tmp_path / "calls.log"
    fake = tmp_path / "ray"
    line = "$KVGATE_NODE cfg=$LMCACHE_CONFIG_FILE seed=$PYTHONHASHSEED disk=$LMCACHE_LOCAL_DISK"
    fake.write_text(f'#!/bin/sh\necho "{line}" >> {calls}\n')
    fake.chmod(0o755)
    monkeypatch.setenv("LMCACHE_LOCAL_DISK", "file:///dev/shm/x/")
    monkeypatch.setenv("PYTHONHASHSEED", "77")

    class Tagged(LocalExecutor):
        def run(self, argv: Any, *, env: Any = None, **kw: Any) -> Any:
            return super().run(argv, env={**(env or {}), "KVGATE_NODE": self.node}, **kw)

    def mk(name: str, host: str) -> Node:
        return Node.model_validate({"name": name, "host": host, "platform": "cpu"})

    plan = plan_ray_cluster(mk("n1", "10.0.0.11"), [mk("n2", "10.0.0.12")], platform="cpu", devices_per_node=1,
                            ray=str(fake))
    plan = with_engine_env(plan, {"LMCACHE_CONFIG_FILE": "/w/lmcache.yaml", "PYTHONHASHSEED": "0", "OTHER": "x"})
    start_ray_cluster(plan, {n: Tagged(n) for n in ("n1", "n2")})
    assert calls.read_text().splitlines() == ["n1 cfg=/w/lmcache.yaml seed=0 disk=",
                                              "n2 cfg=/w/lmcache.yaml seed=0 disk="]


@pytest.mark.parametrize("kind", ["sim", "vllm"])
def test_an_engine_whose_disk_tier_moved_is_refused_at_readiness(kind: str, tmp_path: Path) -> None:
    """The scenario that would measure the wrong tier under the planned one's name: the engine's
    environment moves LMCache's disk tier (here set in the plan itself, as a leak would). The
    emulator's tier_dir_info metric (sim) and LMCache's 'Local disk cache path' log line (vllm,
    the emulator behind the vLLM launcher) are read back at readiness: the start fails, naming both."""
    import dataclasses

    moved = tmp_path / "elsewhere"
    shim = write_vllm_shim(tmp_path / "bin", sys.executable) if kind == "vllm" else None
    profile = _profile(tmp_path, kind=kind, command=str(shim) if shim else None, port=free_port(),
                       extra=EMULATOR_ARGS if kind == "vllm" else [])
    engine = get_engine(kind)
    with LocalExecutor("local") as ex:
        plan = engine.plan(_node(tmp_path), profile, "disk", 0, workdir=str(tmp_path / "w"), python=sys.executable)
        honest = engine.start(ex, plan)
        try:
            engine.wait_ready(honest, 60)
            assert honest.tier_readback == {"planned": str(tmp_path / "tier" / "kvgate-kv" / "e2e" / "disk"),
                                            "read_back": True,
                                            "effective": [str(tmp_path / "tier" / "kvgate-kv" / "e2e" / "disk")]}
        finally:
            engine.stop(honest)
        leaky = dataclasses.replace(plan, env={**plan.env, "LMCACHE_LOCAL_DISK": f"file://{moved}/"})
        inst = engine.start(ex, leaky)
        try:
            with pytest.raises(EngineStartError, match=f"disk tier is {moved}, not the planned .*kvgate-kv/e2e/disk"):
                engine.wait_ready(inst, 60)
        finally:
            engine.stop(inst)

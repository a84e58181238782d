"""G1 and G2 through a local Ray cluster (run by tests/remote/test_ray.py inside its network
namespace; this file's name keeps it out of the ordinary collection): the node is a Ray node
actor, the engine the KV emulator from the node agent started detached through it, the load the
agent too, exactly as over SSH (tests/pipelines/test_gates_ssh.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from harness.cli.main import run
from tests.pipelines.conftest import free_port, small_profile
from tests.remote.ray_inventory import ray_inventory_data


def test_g1_g2_through_ray(tmp_path: Path, write_yaml: Callable[[str, dict[str, Any]], Path]) -> None:
    tier = tmp_path / "tier"
    tier.mkdir()
    data = ray_inventory_data()
    node = data["nodes"][1]  # ray-b: the extra raylet
    node.update(storage=[{"name": "tier", "path": str(tier)}], roles=["server", "client"])
    data["nodes"] = [node]
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump(data, sort_keys=False))
    prof = write_yaml("profile.yaml", small_profile(free_port()))
    reports = tmp_path / "reports"
    common = ["--inventory", str(inv), "--profile", str(prof), "--campaign", "ray", "--reports", str(reports),
              "--no-progress"]
    assert run(["gate", "G1", *common]) == 0
    assert run(["gate", "G2", *common]) == 0
    g2 = json.loads((reports / "ray" / "G2" / "result.json").read_text())
    assert g2["verdict"] == "PASS"
    # the records were written on the node by the agent (through the Ray node actor) and pulled back
    assert list((reports / "ray" / "G2" / "evidence" / "sweep" / "baseline").glob("c2/rep1/measure/records.jsonl"))
    plan = json.loads((reports / "ray" / "G2" / "evidence" / "engine" / "baseline" / "instance0-plan.json")
                      .read_text())
    assert plan["node"] == "ray-b" and "-I" in plan["argv"]  # the emulator ran from the agent zipapp

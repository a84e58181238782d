"""`kvgate plan` says what every node of the inventory runs, not only the engine's node: Ray workers
with their own `ray start`, servers without an engine, the load client, G1's probes; nodes whose
lines differ only in their own host are printed once (issue 48 item 4)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.cli.main import run

REPO = Path(__file__).resolve().parents[2]


def test_plan_prints_every_nodes_part_grouped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = yaml.safe_load((REPO / "profiles" / "moe-480b-tp8.yaml").read_text())
    data["model"]["nodes_per_instance"] = 2
    for arm in data["arms"]:
        if arm.get("lmcache", {}).get("mode") == "multiprocess":
            arm["lmcache"].update(mp_bind="node", mp_transfer_mode="engine_driven")
    inv = yaml.safe_load((REPO / "inventory" / "mi308x-8gpu.example.yaml").read_text())
    first = inv["nodes"][0]
    inv["nodes"] = [first] + [{**first, "name": f"node{i}", "host": f"10.0.0.1{i}"} for i in (2, 3, 4)]
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(data))
    (tmp_path / "i.yaml").write_text(yaml.safe_dump(inv))
    assert run(["plan", "--inventory", str(tmp_path / "i.yaml"), "--profile", str(tmp_path / "p.yaml"),
                "--arm", "candidate"]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    nodes = out[out.index("== node node1"):]
    head, worker, rest = nodes.split("== node")[1:]
    assert head.startswith(" node1 (10.0.0.11) ==") and "engine   the engine and LMCache server" in head
    assert worker.startswith(" node2 (10.0.0.12) ==") and "role     Ray worker of node1's engine" in worker
    assert "  ray      [candidate/0] ray start" in worker and "10.0.0.12" in worker
    # node3 and node4 run the same (their hosts aside): printed once
    assert rest.startswith("s node3 (10.0.0.13), node4 (10.0.0.14) ==")
    assert "server without an engine" in rest and "facts (amd-smi, rocm-smi, <host>)" in rest

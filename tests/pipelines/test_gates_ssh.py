"""G1 -> G2 -> G3 on a loopback OpenSSH node: the same pipeline a test cluster runs.

The node is this machine behind a real sshd; the engine is the KV emulator shipped in the node
agent and started detached over SSH, and the load runs on the node through the agent too.
`make gate-G3` is run for G3, as an operator would.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.cli.main import run
from harness.ports import free_port
from tests.pipelines.conftest import small_profile
from tests.support.storagenoise import not_passed_beyond_unsteady_storage

pytestmark = [pytest.mark.ssh, pytest.mark.fio, pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]


def test_gates_over_loopback_ssh(tmp_path: Path, ssh_cluster: Any,
                                 write_yaml: Callable[[str, dict[str, Any]], Path]) -> None:
    cluster = ssh_cluster(1)
    tier = tmp_path / "tier"
    tier.mkdir()
    inv_data = cluster.inventory.model_dump(mode="json", exclude_none=True)
    inv_data["nodes"][0]["storage"] = [{"name": "tier", "path": str(tier)}]
    inv_data["nodes"][0]["roles"] = ["server", "client"]
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump(inv_data, sort_keys=False))
    # 2 s fio rounds (not the small profile's 1 s): over SSH on this VM's disk, 1 s rounds wandered
    # by 30% of their mean for 25 rounds and G1 was honestly INCONCLUSIVE (SNIA's rounds are long).
    # Longer rounds are no cure for the wander beside `make test`'s other sessions (4 s rounds
    # wandered as much as 2 s ones; CPU hogs alone move the rate by 20-30%): the small profile's
    # limit of 100 rounds is (tests/pipelines/conftest.py)
    data = small_profile(free_port())
    data["probes"]["fio"]["runtime"] = "2s"
    prof = write_yaml("profile.yaml", data)
    reports = tmp_path / "reports"
    common = ["--inventory", str(inv), "--profile", str(prof), "--campaign", "ssh", "--reports", str(reports),
              "--no-progress"]
    assert run(["gate", "G1", *common]) == 0
    assert run(["gate", "G2", *common]) == 0
    g2 = json.loads((reports / "ssh" / "G2" / "result.json").read_text())
    assert g2["verdict"] == "PASS"
    node = cluster.nodes[0].name
    # the records were written on the node by the agent and pulled back
    assert list((reports / "ssh" / "G2" / "evidence" / "sweep" / "baseline").glob("c2/rep1/measure/records.jsonl"))
    env = dict(os.environ, PATH=f"{ROOT / '.venv' / 'bin'}:{os.environ.get('PATH', '')}")
    proc = subprocess.run(  # noqa: S603 - fixed argv, test-made paths
        ["make", "--no-print-directory", "-C", str(ROOT), "gate-G3", f"INVENTORY={inv}", f"PROFILE={prof}",
         "CAMPAIGN=ssh", f"KVGATE_FLAGS=--reports {reports} --no-progress --allow-unsigned-baseline"],
        capture_output=True, text=True, timeout=600, env=env)
    g3_result = reports / "ssh" / "G3" / "result.json"
    assert g3_result.exists(), (proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:])
    g3 = json.loads(g3_result.read_text())
    red = next(c for c in g3["checks"] if c["id"] == "ttft_p50_reduction")
    assert red["verdict"] == "PASS", (proc.stdout[-3000:], proc.stderr[-3000:])
    # G3's own fio rounds may never steady beside the other timing tests' disk I/O: INCONCLUSIVE with
    # that reason, and nothing else short of PASS. make turns any failing command into its own exit
    # code 2 and names the command's in "Error N" (kvgate's 3: INCONCLUSIVE)
    assert not_passed_beyond_unsteady_storage(g3["checks"]) == [], proc.stdout[-3000:]
    if g3["verdict"] == "PASS":
        assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    else:
        assert g3["verdict"] == "INCONCLUSIVE" and proc.returncode == 2 and "gate-G3] Error 3" in proc.stderr
    assert "G3 Main gate" in proc.stdout
    plan_file = reports / "ssh" / "G3" / "evidence" / "engine" / "candidate" / "instance0-plan.json"
    plan = json.loads(plan_file.read_text())
    assert plan["node"] == node and "-I" in plan["argv"]  # the emulator ran from the agent zipapp

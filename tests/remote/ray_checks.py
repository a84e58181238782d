"""Ray executor checks that need the Ray test session's cluster (run by tests/remote/test_ray.py,
inside its network namespace; this file's name keeps it out of the ordinary collection): ping's
mapping report, secrets kept out of argv and Ray's files, a node's facts in a few actor calls, and a
node actor killed under a command and a detached process reattached by a new actor and by another
controller."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.config.inventory import Node
from harness.facts.collect import collect_facts
from harness.remote.base import ConnectionLost, DetachedHandle
from harness.remote.local import LocalExecutor
from harness.remote.ray import cluster
from harness.remote.ray.executor import RayExecutor
from tests.facts.test_facts_collect import _comparable
from tests.remote.ray_inventory import ray_inventory, ray_inventory_data, ray_nodes
from tests.support.procs import alive, argv, wait_for

ROOT = Path(__file__).resolve().parents[2]

# one worker of the Ray session runs these one after another: the killed-actor check kills ray-b's
# actor, under which G1 and G2 run (the soak, on ray-c, runs beside them: ray_soak_checks.py)
pytestmark = pytest.mark.xdist_group("ray-b")


def _kvgate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "harness.cli.main", *args], capture_output=True,  # noqa: S603
                          text=True, timeout=240, cwd=ROOT)


def test_ping_reports_mapping_unmapped_and_unclaimed(tmp_path: Path) -> None:
    data = ray_inventory_data()
    data["nodes"] = [data["nodes"][0], {"name": "ghost", "host": "127.0.0.1",
                                        "ray": {"resource": "kvgate-node:ghost"}}]
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump(data))
    assert _kvgate("validate", str(inv)).returncode == 0
    proc = _kvgate("ping", "-i", str(inv), "--json")
    assert proc.returncode == 4, proc.stderr
    got = {r["node"]: r for r in json.loads(proc.stdout)}
    head = next(n for n in ray_nodes() if "kvgate-node:a" in n["resources"])
    other = next(n for n in ray_nodes() if "kvgate-node:b" in n["resources"])
    assert got["ray-a"]["reachable"] and got["ray-a"]["python"]
    assert got["ray-a"]["ray_node"] == f"resource kvgate-node:a -> {head['node_id'][:12]} (127.0.0.1)"
    assert not got["ghost"]["reachable"]
    assert "no live Ray node has resource kvgate-node:ghost" in got["ghost"]["error"]
    assert got["ghost"]["ray_node"] == "resource kvgate-node:ghost -> none"
    # the extra raylet (kvgate-node:b) is claimed by no node of this inventory
    assert f"Ray node {other['node_id'][:12]} (127.0.0.1; custom resources: kvgate-node:b)" in proc.stderr
    assert head["node_id"][:12] not in proc.stderr


def test_secrets_stay_out_of_argv_and_ray_files(tmp_path: Path) -> None:
    secret = "kvgate-secret-" + uuid.uuid4().hex
    ex = RayExecutor.from_inventory(ray_inventory(), "ray-a")
    # every command line on the machine, read while the command holding the secret runs
    argvs = ex.run(["sh", "-c", 'case "$TOKEN" in kvgate-secret-*) ;; *) exit 9 ;; esac; '
                    'cat /proc/[0-9]*/cmdline | tr "\\0" " "'], env={"TOKEN": secret}, timeout=60)
    assert argvs.stdout and secret not in argvs.stdout
    h = ex.start_detached(["sh", "-c", 'printf %s "$TOKEN" > "$0"; sleep 30', str(tmp_path / "seen")],
                          workdir=str(tmp_path / "work"), name="secret", env={"TOKEN": secret})
    try:
        wait_for(lambda: (tmp_path / "seen").exists() and (tmp_path / "seen").read_text() == secret, 10.0,
                 "the command to see the secret", poll=0.05)
        assert secret not in Path(f"/proc/{h.pid}/cmdline").read_text()
        assert secret not in json.dumps(h.to_json())
    finally:
        ex.stop(h, grace=1)
    temp = Path(os.environ["KVGATE_RAY_TEMP"])
    leaked = subprocess.run(["grep", "-rlF", secret, str(temp)], capture_output=True, text=True)  # noqa: S603, S607
    assert leaked.returncode == 1, f"the secret is in Ray's files: {leaked.stdout}"
    # the search covered the node actor's own log files (what Ray's dashboard serves)
    pid = json.loads(cluster.ray_module().get(ex.actor().where.remote()))["pid"]  # JSON bytes (replies)
    assert list(temp.glob(f"session_*/logs/worker-*-{pid}.*")), "the node actor's logs were not searched"


class CountingRayExecutor(RayExecutor):
    """Counts the exchanges with the node actor (every ``ray.get`` of a call's answer)."""

    calls = 0

    def _get(self, ref: Any, timeout: float | None, what: str, command: Any = None) -> Any:
        self.calls += 1
        return super()._get(ref, timeout, what, command)


def test_facts_through_ray_take_a_few_actor_calls(tmp_path: Path) -> None:
    """A node's facts come in batches (run_many on the node actor), not a call per look-up and
    command, and are the facts the node's own LocalExecutor finds one command at a time (the actor
    runs on this machine)."""
    target = tmp_path / "tier"
    target.mkdir()
    node = Node.model_validate({"name": "ray-a", "host": "127.0.0.1", "connection": "ray",
                                "ray": {"resource": "kvgate-node:a"},
                                "storage": [{"name": "tier", "path": str(target)}],
                                "network": [{"interface": "lo"}], "software": {"fio": "*", "python": "3"}})
    ex = CountingRayExecutor.from_inventory(ray_inventory(), "ray-a")
    ex.actor()  # found (or started): the placement check is one call, the facts' calls follow
    before = ex.calls
    through_ray = collect_facts(ex, node)
    assert ex.calls - before <= 3, f"{ex.calls - before} actor calls for one node's facts"
    assert through_ray.targets["tier"].writable and through_ray.versions["fio"]
    assert _comparable(through_ray) == _comparable(collect_facts(LocalExecutor("ray-a"), node))


def test_killed_actor_is_lost_and_detached_work_reattaches(tmp_path: Path) -> None:
    inv = ray_inventory()
    ex = RayExecutor.from_inventory(inv, "ray-b")
    # long enough to outlive a loaded machine's actor restart and second controller (seen: "sleep 60"
    # had ended by then); stopped below
    h = ex.start_detached(["sleep", "600"], workdir=str(tmp_path / "work"), name="survivor")
    errors: list[BaseException] = []

    def long_command() -> None:
        try:
            ex.run(["sleep", "30"], timeout=60)
        except BaseException as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)

    t = threading.Thread(target=long_command)
    t.start()
    wait_for(lambda: any("sleep 30" in " ".join(argv(p)) for p in _pids()), 10.0, "the long command to run", poll=0.05)
    cluster.ray_module().kill(ex.actor(), no_restart=True)
    t.join(60)
    assert errors and isinstance(errors[0], ConnectionLost), errors
    assert "node actor died" in str(errors[0])
    # the detached process outlived its actor; a new actor (started on the next call) finds it
    assert alive(h.pid)
    assert ex.poll(h).running
    # and so does another controller process, from the handle's JSON alone
    code = ("import json,sys; from harness.remote.base import DetachedHandle; "
            "from harness.remote.ray.executor import RayExecutor; "
            "from tests.remote.ray_inventory import ray_inventory; "
            "ex = RayExecutor.from_inventory(ray_inventory(), 'ray-b'); "
            "h = DetachedHandle.from_json(json.loads(sys.argv[1])); print(ex.poll(h).running); "
            "print(ex.stop(h, grace=1).exit_code)")
    other = subprocess.run([sys.executable, "-c", code, json.dumps(h.to_json())], capture_output=True,  # noqa: S603
                           text=True, timeout=240, cwd=ROOT)
    assert other.stdout.split() == ["True", "143"], other.stderr[-2000:]
    assert not ex.poll(DetachedHandle.from_json(h.to_json())).running


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]

"""#50 items 1 and 4: another user of the Ray cluster squats kvgate's node actor (run by
tests/security/test_ray_squat.py inside its network and PID namespace, with a local Ray cluster up;
this file's name keeps it out of the ordinary collection).

The squatter is another driver (a process of its own) that creates a detached actor in kvgate's
namespace under the name kvgate would use: its class carries an attribute whose unpickling runs a
command, its ``where()`` answers the real Ray node id, and its ``run()`` returns an object whose
``__reduce__`` runs a command. The command touches ``PWNED.<pid of the process that unpickled
it>``; the squatter's own worker unpickles its class, so the checks look for the *controller's*
pid only. Before #50, ``kvgate ping`` found the actor by its fixed name and ran the squatter's code
(its ``ray.get_actor`` alone unpickled the class from the cluster)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from harness.errors import InfraError
from harness.remote.ray import cluster
from harness.remote.ray.actorbook import ActorBook, ActorRecord, book_key
from harness.remote.ray.cluster import ForeignActor
from harness.remote.ray.executor import RayExecutor
from harness.remote.ray.replies import MalformedReply
from tests.remote.ray_inventory import ray_inventory, ray_inventory_data, ray_nodes

ROOT = Path(__file__).resolve().parents[2]
ADDRESS = os.environ.get("KVGATE_RAY_ADDRESS", "")
KEY = book_key(ADDRESS, "kvgate", "ray-a")

# Another driver of the cluster: argv = name, Ray node id, marker directory, mode ("squat": as in
# the red team's repro; "squat-as-kvgate": the same under kvgate's own class name (so that only
# the ActorID tells it apart); "where-empty" / "ok-none": kvgate's class name, malformed answers).
SQUATTER = r'''
import json, os, sys
import ray

name, node_id, marks, mode = sys.argv[1:5]

class Trap:
    def __reduce__(self):
        return (os.system, ("touch " + marks + "/PWNED.$PPID",))

ray.init(address=os.environ["KVGATE_RAY_ADDRESS"], namespace="kvgate", log_to_driver=False)

class NodeAgent:
    trap = Trap()  # unpickled by whoever loads this class: its own worker, and any driver that looks it up

    def __init__(self, *a):
        pass

    def where(self):
        open(marks + "/CALLED.where", "w").close()
        if mode == "where-empty":
            return b"{}"
        if mode.startswith("squat"):
            return {"node_id": node_id, "actor_id": "", "hostname": "n1", "pid": 1, "ip": "127.0.0.1", "time": 0}
        return json.dumps({"node_id": node_id}).encode()

    def run(self, *a):
        open(marks + "/CALLED.run", "w").close()
        return Trap()

    def run_many(self, *a):
        open(marks + "/CALLED.run_many", "w").close()
        return json.dumps({"ok": None}).encode() if mode == "ok-none" else Trap()

if mode != "squat":  # claim kvgate's class, so that kvgate's class guard lets the handle be made
    NodeAgent.__module__ = "harness.remote.ray.actor"
cls = ray.remote(NodeAgent).options(name=name, lifetime="detached", num_cpus=0,
                                    resources={"kvgate-node:a": 0.001})
actor = cls.remote()
ray.get(actor.__ray_ready__.remote())
print(actor._actor_id.hex())
'''


def _node_id() -> str:
    return str(next(n for n in ray_nodes() if "kvgate-node:a" in n["resources"])["node_id"])


def _squat(name: str, marks: Path, mode: str = "squat") -> str:
    """Start the squatter's actor from another driver; its ActorID."""
    marks.mkdir(exist_ok=True)
    proc = subprocess.run([sys.executable, "-c", SQUATTER, name, _node_id(), str(marks), mode],  # noqa: S603
                          capture_output=True, text=True, timeout=240, cwd="/")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.split()[-1]


def _pwned(marks: Path, pid: int) -> bool:
    return (marks / f"PWNED.{pid}").exists()


KILLER = r'''
import os, sys
import ray

ray.init(address=os.environ["KVGATE_RAY_ADDRESS"], namespace="kvgate", log_to_driver=False)
try:
    ray.kill(ray.get_actor(sys.argv[1]), no_restart=True)
except ValueError:
    pass
'''


def _kill(name: str) -> None:
    """Kill an actor by name from a driver of its own: the squatter's class unpickles (runs its
    trap) in whatever process looks it up, and this test's process refuses to (classguard)."""
    subprocess.run([sys.executable, "-c", KILLER, name], capture_output=True, timeout=240, check=True,  # noqa: S603
                   cwd="/")


def _inventory_file(tmp_path: Path) -> Path:
    data = ray_inventory_data()
    data["nodes"] = [data["nodes"][0]]  # ray-a
    path = tmp_path / "inventory.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _kvgate(args: list[str], state: Path) -> tuple[subprocess.CompletedProcess[str], int]:
    """A kvgate controller process, with its own record of its actors (``state``); and its pid."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), KVGATE_STATE_DIR=str(state))
    with subprocess.Popen([sys.executable, "-m", "harness.cli.main", *args], cwd=ROOT, env=env,  # noqa: S603
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        out, err = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(proc.args, proc.returncode or 0, out, err), proc.pid


def test_a_squat_under_the_old_fixed_name_runs_no_code_and_is_never_called(tmp_path: Path) -> None:
    """The red team's repro: the squatter takes ``kvgate-node-ray-a``, the name kvgate used before
    #50. kvgate ping starts its own actor under a name nobody could know, and runs nothing of the
    squatter's (before: PWNED.<ping's pid>, its class unpickled by the look-up)."""
    marks = tmp_path / "marks"
    _squat(cluster.ACTOR_PREFIX + "ray-a", marks)
    try:
        proc, pid = _kvgate(["ping", "-i", str(_inventory_file(tmp_path)), "--json"], tmp_path / "state")
        assert proc.returncode == 0, proc.stderr
        assert json.loads(proc.stdout)[0]["reachable"]
        assert not _pwned(marks, pid), "the squatter's code ran in the controller"
        assert not (marks / "CALLED.where").exists() and not (marks / "CALLED.run").exists()
        name = ActorBook(tmp_path / "state" / "ray-actors.json").recall(KEY).name  # type: ignore[union-attr]
        assert name.startswith(cluster.ACTOR_PREFIX + "ray-a-") and len(name) == len(cluster.ACTOR_PREFIX) + 6 + 32
    finally:
        _kill(cluster.ACTOR_PREFIX + "ray-a")


@pytest.mark.parametrize("mode", ["squat", "squat-as-kvgate"])
def test_a_squat_of_the_recorded_name_is_refused_naming_it(tmp_path: Path, mode: str) -> None:
    """The name is learnt once kvgate created its actor (the cluster lists it); the squatter kills
    kvgate's actor and takes the name. The next kvgate ping refuses it, exit 4 naming the actor,
    nothing of the squatter's run or called: by its class (not loaded), or, when it claims
    kvgate's class, by its ActorID (not the recorded one)."""
    state = tmp_path / "state"
    inv = _inventory_file(tmp_path)
    first, _ = _kvgate(["ping", "-i", str(inv), "--json"], state)
    assert first.returncode == 0, first.stderr
    record = ActorBook(state / "ray-actors.json").recall(KEY)
    assert record is not None
    _kill(record.name)
    marks = tmp_path / "marks"
    squatter_id = _squat(record.name, marks, mode)
    try:
        assert squatter_id != record.actor_id
        proc, pid = _kvgate(["ping", "-i", str(inv), "--json"], state)
        assert proc.returncode == 4, proc.stdout + proc.stderr
        said = proc.stdout + proc.stderr
        assert record.name in said and "refused" in said
        assert (squatter_id in said) == (mode == "squat-as-kvgate"), said
        assert "Traceback" not in proc.stderr
        assert not _pwned(marks, pid), "the squatter's code ran in the controller"
        assert not [p.name for p in marks.glob("CALLED.*")], "kvgate called the squatter"
    finally:
        _kill(record.name)


def test_resume_accepts_only_the_recorded_actor_id(tmp_path: Path) -> None:
    """A later controller (a resumed run) with the run's record: the recorded ActorID is the same
    actor again; the same name with another recorded id is refused, whatever the actor answers."""
    book = ActorBook(tmp_path / "G1" / "ray-actors.json")
    first = RayExecutor.from_inventory(ray_inventory(), "ray-a", book=book)
    assert first.run(["true"]).exit_code == 0
    record = book.recall(KEY)
    assert record is not None and record.actor_id == first.actor_id()
    try:
        again = RayExecutor.from_inventory(ray_inventory(), "ray-a", book=book)
        assert again.run(["echo", "hi"]).stdout == "hi\n"
        assert again.actor_id() == record.actor_id  # reattached, not replaced
        book.remember(KEY, ActorRecord(record.name, "f" * len(record.actor_id)))
        with pytest.raises(ForeignActor, match=record.name) as err:
            RayExecutor.from_inventory(ray_inventory(), "ray-a", book=book).run(["true"])
        assert isinstance(err.value, InfraError)  # exit 4
    finally:
        _kill(record.name)


@pytest.mark.parametrize("mode", ["where-empty", "ok-none"])
def test_malformed_replies_are_exit_4_naming_the_node(tmp_path: Path, mode: str) -> None:
    """An actor kvgate recorded (as if its own actor had been tampered with) answers ``where()``
    with ``{}``, or ``run_many()`` with ``{"ok": None}``: `kvgate facts` exits 4 with one line
    naming the node, no traceback (before: KeyError / TypeError, exit 5)."""
    marks = tmp_path / "marks"
    name = f"{cluster.ACTOR_PREFIX}ray-a-{mode}"
    actor_id = _squat(name, marks, mode)
    state = tmp_path / "state"
    ActorBook(state / "ray-actors.json").remember(KEY, ActorRecord(name, actor_id))
    try:
        proc, pid = _kvgate(["facts", "--inventory", str(_inventory_file(tmp_path))], state)
        assert proc.returncode == 4, proc.stdout + proc.stderr
        assert "Traceback" not in proc.stderr
        lines = [line for line in proc.stderr.splitlines() if line.startswith("kvgate: ")]
        assert len(lines) == 1 and lines[0].startswith("kvgate: ray-a unreachable: ray-a: malformed answer from "
                                                      "the node actor"), proc.stderr
        assert not _pwned(marks, pid)
        assert (marks / ("CALLED.where" if mode == "where-empty" else "CALLED.run_many")).exists()
    finally:
        _kill(name)


def test_a_python_object_reply_is_refused_unread(tmp_path: Path) -> None:
    """The narrow path itself: a reply that is a pickled object (the squatter's ``run()``) is
    refused by its Ray metadata before anything of it is decoded."""
    marks = tmp_path / "marks"
    name = f"{cluster.ACTOR_PREFIX}ray-a-objects"
    actor_id = _squat(name, marks, "ok-none")
    book = ActorBook(tmp_path / "ray-actors.json")
    book.remember(KEY, ActorRecord(name, actor_id))
    try:
        ex = RayExecutor.from_inventory(ray_inventory(), "ray-a", book=book)
        with pytest.raises(MalformedReply, match="Ray object of kind PYTHON") as err:
            ex.run(["true"])
        assert err.value.host == "ray-a"
        assert (marks / "CALLED.run").exists() and not _pwned(marks, os.getpid())
    finally:
        _kill(name)

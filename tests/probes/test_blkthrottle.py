"""Provisioned rates enforced by blk-throttle, on this machine's real cgroups (v1 blkio here; v2 io.max
against a captured layout, since this kernel binds io to v1) and a real loop-device ext4: the cgroup
is created, fio in it reads at the declared rate, it is removed; a killed run's cgroup is cleaned by
the next; enforcement that cannot be had is refused before anything is created."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from harness.config.inventory import Node
from harness.probes.blkthrottle import (
    PREFIX,
    STATE_DIR,
    ThrottleRefused,
    clean_stale,
    create_cgroup,
    find_io_controller,
    label,
    plan_node,
    remove_cgroup,
)
from harness.remote.base import RunResult
from harness.remote.cgroupjoin import CgroupExecutor
from harness.remote.local import LocalExecutor
from tests.support.loopfs import loop_filesystem

RATE = 40_000_000  # bytes/s: low enough that a few seconds of fio measure it, high enough to be a disk


def _node(path: str, *, rate: int = RATE, enforce: bool = True, extra: Sequence[Mapping[str, object]] = ()) -> Node:
    target: dict[str, object] = {"name": "vol", "path": path, "provisioned": {"read": f"{rate} B/s"}}
    if enforce:
        target["enforce"] = "blk-throttle"
    return Node.model_validate({"name": "local", "host": "localhost", "connection": "local", "platform": "cpu",
                                "roles": ["storage"], "storage": [target, *extra]})


@pytest.fixture
def loop_mount(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with loop_filesystem(tmp_path / "disk.img", "160M", mnt) as loop:
        yield mnt, loop


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "markers"


def _fio_read(executor: CgroupExecutor, directory: Path) -> float:
    """fio's sequential O_DIRECT read in the cgroup: bytes per second, over 10 s after 2 s of ramp:
    blk-throttle dispatches in 100 ms slices, so a short run's edges carry a slice's worth more or
    less (42.0 MB/s over 5 s against a 40 MB/s cap once, beside a loaded CI run)."""
    res = executor.run(["fio", "--name=r", f"--directory={directory}", "--size=64M", "--rw=read", "--bs=1M",
                        "--direct=1", "--ioengine=libaio", "--iodepth=8", "--ramp_time=2", "--runtime=10",
                        "--time_based", "--output-format=json"], timeout=120)
    return float(json.loads(res.stdout[res.stdout.index("{"):])["jobs"][0]["read"]["bw_bytes"])


def test_the_cgroup_caps_fio_at_the_declared_rate_and_is_removed(loop_mount: tuple[Path, str],
                                                                 state_dir: Path) -> None:
    mnt, loop = loop_mount
    ex = LocalExecutor()
    plan = plan_node(ex, _node(str(mnt)))
    assert plan is not None and plan.controller.version == 1
    names = [d.name for d in plan.limits]
    assert Path(loop).name in names  # the loop device, and the disk its image is on
    cg = create_cgroup(ex, plan, campaign="t", gate="G1", state_dir=str(state_dir))
    try:
        assert Path(cg.path).is_dir() and Path(cg.path).name.startswith(PREFIX)
        assert any(line.endswith(f" {RATE}") for line in cg.applied["blkio.throttle.read_bps_device"].splitlines())
        marker = json.loads(Path(cg.marker).read_text())
        assert marker["pid"] == os.getpid() and marker["cgroup"] == cg.path
        inside = CgroupExecutor(ex, cg.procs_file)
        own = inside.run(["cat", "/proc/self/cgroup"]).stdout
        assert f"blkio:/{Path(cg.path).name}" in own
        bw = _fio_read(inside, mnt)
        assert abs(bw / RATE - 1) <= 0.05, f"fio read {bw / 1e6:.2f} MB/s in a cgroup capped at {RATE / 1e6} MB/s"
    finally:
        notes = remove_cgroup(ex, cg)
    assert not Path(cg.path).exists() and not Path(cg.marker).exists(), notes


_KILLED_RUN = r"""
import sys, time
from harness.config.inventory import Node
from harness.probes.blkthrottle import create_cgroup, plan_node
from harness.remote.local import LocalExecutor
node = Node.model_validate({"name": "local", "host": "localhost", "connection": "local", "platform": "cpu",
    "roles": ["storage"], "storage": [{"name": "vol", "path": sys.argv[1], "provisioned": {"read": "40 MB/s"},
    "enforce": "blk-throttle"}]})
ex = LocalExecutor()
cg = create_cgroup(ex, plan_node(ex, node), campaign="killed", gate="G4", state_dir=sys.argv[2])
print(cg.path, flush=True)
time.sleep(600)
"""


def test_a_killed_runs_cgroup_is_cleaned_by_the_next_and_said(loop_mount: tuple[Path, str], state_dir: Path) -> None:
    mnt, _ = loop_mount
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_RUN, str(mnt), str(state_dir)],  # noqa: S603
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        path = proc.stdout.readline().strip()
        assert path and Path(path).is_dir()
        ex = LocalExecutor()
        assert clean_stale(ex, state_dir=str(state_dir)) == []  # its owner still runs: not stale, left alone
        assert Path(path).is_dir()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()
    said = clean_stale(ex, state_dir=str(state_dir))
    assert len(said) == 1 and path in said[0] and "no longer running" in said[0] and "killed G4" in said[0]
    assert not Path(path).exists() and list(state_dir.iterdir()) == []


def test_a_cgroup_kvgate_did_not_mark_is_never_removed(state_dir: Path, tmp_path: Path) -> None:
    ex = LocalExecutor()
    controller = find_io_controller(ex)
    foreign = Path(controller.parent) / f"{PREFIX}notours"
    foreign.mkdir()
    try:
        state_dir.mkdir()
        # a marker naming it, but not in kvgate's own form (token): left alone
        (state_dir / "notours.json").write_text(json.dumps({"cgroup": str(foreign), "parent": controller.parent,
                                                            "pid": 1, "controller": os.uname().nodename}))
        assert clean_stale(ex, state_dir=str(state_dir)) == []
        assert foreign.is_dir()
    finally:
        foreign.rmdir()


def test_no_io_controller_is_refused_before_anything_is_created(tmp_path: Path) -> None:
    ex = LocalExecutor()
    # this machine's cgroup2 hierarchy has no io controller (io is bound to v1 blkio): a real refusal
    unified = "/sys/fs/cgroup/unified"
    if Path(unified, "cgroup.controllers").exists() and "io" not in Path(unified, "cgroup.controllers").read_text():
        with pytest.raises(ThrottleRefused, match="has no io controller"):
            plan_node(ex, _node(str(tmp_path)), root=unified)
    empty = tmp_path / "not-a-cgroup"
    empty.mkdir()
    with pytest.raises(ThrottleRefused, match="no io controller|not a cgroup directory"):
        plan_node(ex, _node(str(tmp_path)), root=str(empty))
    assert list(empty.iterdir()) == []


def test_a_captured_cgroup_v2_layout_gets_io_max(tmp_path: Path, state_dir: Path) -> None:
    """cgroup v2 cannot be mounted with io here (io is bound to v1): its files as a v2 root has them."""
    root = tmp_path / "cg2"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpuset cpu io memory hugetlb pids rdma misc\n")
    (root / "cgroup.subtree_control").write_text("")
    ex = LocalExecutor()
    plan = plan_node(ex, _node(str(tmp_path)), root=str(root))
    assert plan is not None and plan.controller.version == 2
    cg = create_cgroup(ex, plan, campaign="t", gate="G1", state_dir=str(state_dir))
    lines = Path(cg.path, "io.max").read_text().splitlines()
    assert [line.split(" ", 1)[1] for line in lines] == [f"rbps={RATE} wbps=max"] * len(plan.limits)
    assert "+io" in (root / "cgroup.subtree_control").read_text()
    os.remove(cg.marker)


class _AsNobody(LocalExecutor):
    """This machine's commands run as uid 65534: a node where kvgate is not root."""

    def run(self, argv: Sequence[str], **kw: object) -> RunResult:  # type: ignore[override]
        return super().run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv], **kw)  # type: ignore[arg-type]


def test_not_root_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ThrottleRefused, match="needs root"):
        plan_node(_AsNobody(), _node(str(tmp_path)))


def test_a_target_without_a_block_device_or_in_memory_is_refused(tmp_path: Path) -> None:
    ex = LocalExecutor()
    with pytest.raises(ThrottleRefused, match="RAM-backed|block device"):
        plan_node(ex, _node("/dev/shm"))
    with pytest.raises(ThrottleRefused, match="needs a block device"):
        plan_node(ex, _node("/proc"))


def test_an_unthrottled_target_on_a_throttled_device_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    node = _node(str(tmp_path), extra=[{"name": "plain", "path": str(other)}])
    with pytest.raises(ThrottleRefused, match="target plain: it shares device"):
        plan_node(LocalExecutor(), node)


def test_the_label_says_the_rate_and_who_enforces_it() -> None:
    assert label(_node("/var/tmp", rate=150_000_000).storage[0]) == "vol: reads provisioned at 150 MB/s by blk-throttle"
    declared = _node("/var/tmp", rate=1_500_000_000, enforce=False).storage[0]
    assert label(declared) == "vol: reads provisioned at 1.5 GB/s (declared, not enforced by kvgate)"
    both = Node.model_validate({"name": "n", "host": "h", "storage": [
        {"name": "v", "path": "/x", "provisioned": {"read": "150 MB/s", "write": "150 MB/s"},
         "enforce": "blk-throttle"},
        {"name": "w", "path": "/y", "provisioned": {"read": "150 MB/s", "write": "50 MB/s"}}]})
    assert label(both.storage[0]) == "v: reads and writes provisioned at 150 MB/s by blk-throttle"
    assert label(both.storage[1]) == "w: reads provisioned at 150 MB/s, writes provisioned at 50 MB/s (declared, " \
        "not enforced by kvgate)"


_DETACHED_RUN = r"""
import subprocess, sys, time
from harness.config.inventory import Node
from harness.probes.blkthrottle import create_cgroup, keep_for_detached, plan_node
from harness.remote.cgroupjoin import in_cgroup
from harness.remote.local import LocalExecutor
node = Node.model_validate({"name": "local", "host": "localhost", "connection": "local", "platform": "cpu",
    "roles": ["storage"], "storage": [{"name": "vol", "path": sys.argv[1], "provisioned": {"read": "40 MB/s"},
    "enforce": "blk-throttle"}]})
ex = LocalExecutor()
cg = create_cgroup(ex, plan_node(ex, node), campaign="soaked", gate="G4", state_dir=sys.argv[2])
soak = subprocess.Popen(in_cgroup(cg.procs_file, ["sleep", "600"]), start_new_session=True)
# the soak is in the cgroup once its wrapper has joined it: a loaded CI run got to the stale check first
deadline = time.monotonic() + 60
while str(soak.pid) not in open(cg.procs_file).read().split() and time.monotonic() < deadline:
    time.sleep(0.01)
keep_for_detached(ex, cg)
print(cg.path, soak.pid, flush=True)
time.sleep(600)
"""


def test_a_detached_soaks_cgroup_outlives_its_controller_and_is_adopted_by_the_resume(
        loop_mount: tuple[Path, str], state_dir: Path) -> None:
    from harness.probes.blkthrottle import adopt_detached

    mnt, _ = loop_mount
    proc = subprocess.Popen([sys.executable, "-c", _DETACHED_RUN, str(mnt), str(state_dir)],  # noqa: S603
                            stdout=subprocess.PIPE, text=True)
    soak_pid = 0
    try:
        assert proc.stdout is not None
        path, pid = proc.stdout.readline().split()
        soak_pid = int(pid)
        proc.send_signal(signal.SIGKILL)  # the controller returns (here: is gone); the soak runs on
        proc.wait(timeout=30)
        ex = LocalExecutor()
        said = clean_stale(ex, state_dir=str(state_dir))
        assert len(said) == 1 and "still runs in it" in said[0] and Path(path).is_dir()
        assert str(soak_pid) in Path(path, "cgroup.procs").read_text().split()
        cg = adopt_detached(ex, "local", campaign="soaked", gate="G4", state_dir=str(state_dir))
        assert cg is not None and cg.path == path and cg.limits[0].read_bps == 40e6
        assert json.loads(Path(cg.marker).read_text())["pid"] == os.getpid()
        assert clean_stale(ex, state_dir=str(state_dir)) == []  # adopted: alive again, not stale
        notes = remove_cgroup(ex, cg)
        assert notes == [f"moved 1 process(es) still in {path} to its parent"]
        assert not Path(path).exists() and list(state_dir.iterdir()) == []
    finally:
        if proc.stdout is not None:
            proc.stdout.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        if soak_pid:
            os.kill(soak_pid, signal.SIGKILL)
            try:
                os.waitpid(soak_pid, 0)
            except ChildProcessError:
                pass


def test_two_targets_on_one_device_must_declare_the_same_rates(tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    same = _node(str(tmp_path), extra=[{"name": "twin", "path": str(other), "provisioned": {"read": f"{RATE} B/s"},
                                        "enforce": "blk-throttle"}])
    plan = plan_node(LocalExecutor(), same)
    assert plan is not None and [d.targets for d in plan.limits if "twin" in d.targets] != []
    writes_too = _node(str(tmp_path), extra=[{"name": "twin", "path": str(other), "enforce": "blk-throttle",
                                              "provisioned": {"read": f"{RATE} B/s", "write": "10 MB/s"}}])
    with pytest.raises(ThrottleRefused, match="declare different write rates"):
        plan_node(LocalExecutor(), writes_too)


def test_node_io_probes_agree_over_three_runs_under_the_cap(state_dir: Path, tmp_path: Path) -> None:
    """Issue 49: the checkpoint write (direct) and the model load, each three times in a cgroup capped at
    the declared rate, agree within 10% (on the raw shared disk buffered snapshots wandered 350-1060 MB/s).
    On this machine's disk, as the demo's targets are (ext4 on a loop device adds a journal the
    cgroup does not hold: direct writes there read 33-40 MB/s under a 40 MB/s cap)."""
    from harness.config.profile import CheckpointSpec, ModelLoadSpec
    from harness.probes.checkpoint import run_checkpoint_probe
    from harness.probes.modelload import run_modelload_probe

    mnt = tmp_path / "vol"
    mnt.mkdir()
    node = Node.model_validate({"name": "local", "host": "localhost", "storage": [
        {"name": "vol", "path": str(mnt), "provisioned": {"read": f"{RATE} B/s", "write": f"{RATE} B/s"},
         "enforce": "blk-throttle"}]})
    ex = LocalExecutor()
    plan = plan_node(ex, node)
    assert plan is not None
    cg = create_cgroup(ex, plan, campaign="t", gate="G2", state_dir=str(state_dir))
    try:
        inside = CgroupExecutor(ex, cg.procs_file)
        ckpt = CheckpointSpec(size="64 MiB", files=2, writers=2, direct=True)  # rounds of 1.7 s, as the demo's
        load = ModelLoadSpec(readers=2, synthetic_size="64 MiB")
        writes = [run_checkpoint_probe(inside, node.storage[0], ckpt, tmp_path / "c").write_bw_bytes for _ in range(3)]
        # O_DIRECT rounds (no cache drop, the expensive part of a round; the demo drops and reads buffered)
        reads = [run_modelload_probe(inside, node.storage[0], load, tmp_path / "m", drop_caches=False).read_bw_bytes
                 for _ in range(3)]
    finally:
        remove_cgroup(ex, cg)
    for what, runs in (("checkpoint write", writes), ("model load", reads)):
        assert max(runs) <= 1.10 * min(runs), f"{what}: {[round(r / 1e6, 1) for r in runs]} MB/s"
        assert all(0.85 * RATE <= r <= 1.15 * RATE for r in runs), f"{what} not at the cap: {runs}"


def test_kvgate_probe_measures_an_enforced_target_at_its_cap_as_a_gate_would(tmp_path: Path) -> None:
    import yaml

    from harness.cli.main import run

    vol = tmp_path / "vol"
    vol.mkdir()
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump({"cluster": "t", "nodes": [{
        "name": "local", "host": "localhost", "connection": "local", "platform": "cpu", "roles": ["storage"],
        "storage": [{"name": "vol", "path": str(vol), "provisioned": {"read": f"{RATE} B/s"},
                     "enforce": "blk-throttle"}]}]}))
    prof = yaml.safe_load((Path(__file__).resolve().parents[2] / "profiles" / "demo.yaml").read_text())
    prof["probes"]["fio"]["job_sets"] = ["seq-read"]
    # `kvgate probe fio` is one run, not rounds: at 40 MB/s the demo's 0.5 s run is 20 MB, and the
    # throttle's first slices and one 100 ms slice more or less at its end (a late timer beside a
    # loaded CI run) moved it by 14% (45.8 MB/s once); 4 s after 1 s of ramp, as a cap is measured
    prof["probes"]["fio"].update({"runtime": "4s", "ramp_time": "1s"})
    profile = tmp_path / "profile.yaml"
    profile.write_text(yaml.safe_dump(prof))
    before = {p.name for p in Path(find_io_controller(LocalExecutor()).parent).iterdir() if p.name.startswith(PREFIX)}
    assert run(["probe", "fio", "--inventory", str(inv), "--profile", str(profile), "--out", str(tmp_path / "o")]) == 0
    results = json.loads((tmp_path / "o" / "results.json").read_text())
    bw = results["results"][0]["job_sets"]["seq-read"]["read_bw_bytes"]
    assert abs(bw / RATE - 1) <= 0.05, bw
    after = {p.name for p in Path(find_io_controller(LocalExecutor()).parent).iterdir() if p.name.startswith(PREFIX)}
    # its cgroup is gone: a kvgate cgroup new since `before` is another test's (the sessions run side by
    # side), its marker naming another process
    assert [name for name in after - before if _marker_pid(name) == os.getpid()] == []
    assert [m for m in Path(STATE_DIR).glob("*.json") if _marker_pid(PREFIX + m.stem) == os.getpid()] == []


def _marker_pid(cgroup_name: str) -> int | None:
    """The pid in the marker of kvgate's cgroup ``cgroup_name`` (None: no marker, or gone meanwhile)."""
    try:
        return int(json.loads((Path(STATE_DIR) / f"{cgroup_name[len(PREFIX):]}.json").read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return None

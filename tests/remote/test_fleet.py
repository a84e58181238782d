"""Fleet: parallel fan-out with a result per node, over real sshd nodes and local executors."""

from __future__ import annotations

import io
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.errors import InfraError, InputError
from harness.progress import Progress
from harness.remote.base import Executor, Unreachable
from harness.remote.fleet import Fleet, FleetError, NodeTimeout
from harness.remote.local import LocalExecutor
from tests.support.background import Background
from tests.support.procs import argv, descendants
from tests.support.sshd import SshCluster

Factory = Callable[..., SshCluster]


@pytest.mark.ssh
def test_fanout_over_8_nodes_with_one_dead(ssh_cluster: Factory) -> None:
    cluster = ssh_cluster(8)
    cluster.kill("node5")
    with Fleet(cluster.inventory) as fleet:
        # no wall-clock bound (a loaded machine's SSH handshakes decide it): that the nodes run side
        # by side is test_fanout_runs_in_parallel's barrier; here, that the dead one fails alone
        res = fleet.run(["sh", "-c", "echo $0", "hello"], timeout=60)
        assert list(res.outcomes) == [f"node{i}" for i in range(8)]
        assert [o.node for o in res.failed] == ["node5"]
        assert isinstance(res["node5"].error, Unreachable)
        assert "cannot connect" in res["node5"].reason
        assert all(v.stdout == "hello\n" for v in res.values().values()) and len(res.values()) == 7
        with pytest.raises(FleetError) as ei:
            res.raise_for_failures()
        err = ei.value
        assert isinstance(err, InfraError)
        assert list(err.failures) == ["node5"]
        assert "1 of 8 node(s) failed" in str(err) and "node5: Unreachable: cannot connect" in str(err)


# a barrier: each node's command marks its arrival, then waits (at most 60 s) until all 8 have arrived;
# run one after another, the first would never see the others (a wall-clock bound failed beside a
# CPU hog: 8 x 0.5 s took 2.29 s)
BARRIER = ('touch "$0/$$"; i=0; while [ "$(ls "$0" | wc -l)" -lt 8 ]; do i=$((i + 1)); '
           '[ "$i" -gt 1200 ] && exit 9; sleep 0.05; done')


@pytest.mark.ssh
def test_fanout_runs_in_parallel(ssh_cluster: Factory, tmp_path: Path) -> None:
    cluster = ssh_cluster(8)
    arrived = tmp_path / "arrived"
    arrived.mkdir()
    with Fleet(cluster.inventory) as fleet:
        res = fleet.run(["sh", "-c", BARRIER, str(arrived)], check=False)
    assert all(o.ok and o.value is not None and o.value.exit_code == 0 for o in res.outcomes.values()), res.outcomes
    assert len(list(arrived.iterdir())) == 8


def test_no_progress_line_after_map_returns() -> None:
    returned = threading.Event()
    late: list[str] = []

    class Stream(io.StringIO):
        def write(self, text: str) -> int:
            time.sleep(0.01)  # widens the window a late line would fall into; decides nothing
            if returned.is_set():
                late.append(text)
            return super().write(text)

    stream = Stream()
    progress = Progress("fan-out", total=6, stream=stream)
    with Fleet([LocalExecutor(f"n{i}") for i in range(6)]) as fleet:
        fleet.map(lambda ex: ex.node, progress=progress)
        returned.set()
    for t in [t for t in threading.enumerate() if t.name == "kvgate-fleet"]:
        t.join(10)
    assert late == []
    assert "[fan-out] 6/6" in stream.getvalue()


def test_hanging_node_does_not_block_the_others() -> None:
    release, hung_ended = threading.Event(), threading.Event()
    executors = [LocalExecutor(f"n{i}") for i in range(4)]

    def op(ex: Executor) -> str:
        if ex.node == "n2":
            release.wait(60)  # hangs until released
            hung_ended.set()
        return ex.run(["echo", ex.node]).stdout.strip()

    fleet = Fleet(executors)
    start = time.monotonic()
    res = fleet.map(op, timeout=1.0)
    elapsed = time.monotonic() - start
    # map returned at its timeout while the hung node was still hanging, not when it ended
    # (an event, not a wall-clock bound a loaded machine decides)
    returned_before_the_hung_node = not hung_ended.is_set()
    release.set()
    assert elapsed >= 1.0 and returned_before_the_hung_node
    assert res.values() == {"n0": "n0", "n1": "n1", "n3": "n3"}
    assert isinstance(res["n2"].error, NodeTimeout) and "no result within 1 s" in res["n2"].reason
    assert not res.ok


def test_failure_is_recorded_not_raised() -> None:
    fleet = Fleet({"a": LocalExecutor("a"), "b": LocalExecutor("b")})
    res = fleet.run(["sh", "-c", 'test "$0" = x', "y"], check=True)
    assert not res.ok and len(res.failed) == 2
    assert all("exit code: 1" in str(o.error) for o in res.failed)
    res = fleet.run(["sh", "-c", "exit 3"], check=False)
    assert res.ok and {o.value.exit_code for o in res.succeeded if o.value} == {3}


def test_bounded_pool() -> None:
    active = 0
    peak = 0
    lock = threading.Lock()

    def op(ex: Executor) -> None:
        nonlocal active, peak
        with lock:
            active += 1
            peak = max(peak, active)
        time.sleep(0.1)
        with lock:
            active -= 1

    res = Fleet([LocalExecutor(f"n{i}") for i in range(10)]).map(op, max_workers=3)
    assert res.ok and peak == 3


def test_unknown_or_duplicate_nodes() -> None:
    fleet = Fleet([LocalExecutor("a")])
    with pytest.raises(InputError, match="no node named 'zz'"):
        fleet.map(lambda ex: None, ["zz"])
    with pytest.raises(InputError):
        Fleet([LocalExecutor("a"), LocalExecutor("a")])
    with pytest.raises(InputError):
        fleet.map(lambda ex: None, ["a", "a"])


@pytest.mark.ssh
def test_fanout_with_a_hung_ssh_node(ssh_cluster: Factory) -> None:
    # A node that stops answering mid-operation (SIGSTOP: like a hung host or a cut link) becomes a
    # ConnectionLost within the liveness bound; the other nodes finish at their own pace.
    # Frozen once its `sleep` runs, not after a fixed delay: beside a CPU hog a 0.3 s timer fired
    # after the sleep had ended, and node1 finished cleanly (a fresh-clone CI run). node1's own sleep
    # is 30 s (the others' 1 s): a watcher starved through a one-second sleep once never saw it.
    cluster = ssh_cluster(4, keepalive=1.0)
    node1_port = str(cluster.node("node1").port)
    frozen_at: list[float] = []

    def freeze_when_sleeping(stop: threading.Event) -> None:
        sshd = cluster.node("node1").proc
        assert sshd is not None
        while not any(argv(pid) == ["sleep", "30"] for pid in descendants(sshd.pid)):
            if stop.wait(0.01):
                return
        cluster.freeze("node1")
        frozen_at.append(time.monotonic())

    with Fleet(cluster.inventory) as fleet:
        fleet.run(["true"]).raise_for_failures()
        try:
            with Background(freeze_when_sleeping, name="freeze-node1"):
                # the server's port, last in SSH_CONNECTION, tells node1's session from the others'
                res = fleet.run(["sh", "-c", 'if [ "${SSH_CONNECTION##* }" = "$0" ]; then sleep 30; else sleep 1; fi',
                                 node1_port])
        finally:
            cluster.thaw("node1")
        assert frozen_at, "node1's sleep was never seen running, so it was never frozen"
        elapsed = time.monotonic() - frozen_at[0]
    assert [o.node for o in res.failed] == ["node1"]
    assert type(res["node1"].error).__name__ == "ConnectionLost"
    assert all(res[n].ok and res[n].duration_s < 2.5 for n in ("node0", "node2", "node3"))
    assert elapsed < 3.0 + 1.5  # the liveness bound, from the freeze


def test_a_node_not_started_before_the_timeout_never_runs() -> None:
    release = threading.Event()
    ran: list[str] = []

    def op(ex: Executor) -> str:
        ran.append(ex.node)
        if ex.node == "n0":
            release.wait(30)  # holds the only worker past the timeout
        return ex.node

    with Fleet([LocalExecutor(f"n{i}") for i in range(3)]) as fleet:
        res = fleet.map(op, max_workers=1, timeout=0.5)
        release.set()
        for t in [t for t in threading.enumerate() if t.name == "kvgate-fleet"]:
            t.join(10)
    assert ran == ["n0"]
    assert [type(o.error) for o in res.outcomes.values()] == [NodeTimeout] * 3
    assert "not started within" in res["n1"].reason

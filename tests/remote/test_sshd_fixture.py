"""The loopback sshd fixture itself, checked with OpenSSH's own ``ssh`` client."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.procs import alive, contained_processes
from tests.support.sshd import KeyStore, SshCluster, descendants

pytestmark = pytest.mark.ssh


def _ssh(cluster: SshCluster, node_name: str, *cmd: str,
         key: str | None = None) -> subprocess.CompletedProcess[str]:
    node = cluster.node(node_name)
    return subprocess.run(  # noqa: S603
        ["ssh", "-F", "/dev/null", "-i", key or str(cluster.client_key), "-p", str(node.port),
         "-o", f"UserKnownHostsFile={cluster.known_hosts}", "-o", "StrictHostKeyChecking=yes",
         "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", f"{cluster.user}@{node.host}", *cmd],
        capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)


def test_cluster_serves_openssh_clients(ssh_cluster: Callable[..., SshCluster]) -> None:
    start = time.monotonic()
    cluster = ssh_cluster(3)
    assert time.monotonic() - start < 5
    assert len({n.port for n in cluster.nodes}) == 3
    assert [n.name for n in cluster.inventory.nodes] == ["node0", "node1", "node2"]
    for node in cluster.nodes:
        r = _ssh(cluster, node.name, "echo", "hello")
        assert r.returncode == 0, r.stderr
        assert r.stdout == "hello\n"
    for kind in ("rsa",):
        assert _ssh(cluster, "node0", "true", key=str(cluster.keys.client_key(kind))).returncode == 0


def test_stop_kills_sessions_too(ssh_cluster: Callable[..., SshCluster]) -> None:
    cluster = ssh_cluster(1)
    node = cluster.nodes[0]
    proc = subprocess.Popen(  # noqa: S603
        ["ssh", "-F", "/dev/null", "-i", str(cluster.client_key), "-p", str(node.port),
         "-o", f"UserKnownHostsFile={cluster.known_hosts}", "-o", "BatchMode=yes",
         f"{cluster.user}@{node.host}", "sleep", "60"], stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert node.proc is not None
    deadline = time.monotonic() + 10
    while len(descendants(node.proc.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    kids = descendants(node.proc.pid)
    assert kids, "no session process appeared under sshd"
    cluster.stop(node)
    assert not node.running
    assert proc.wait(timeout=10) != 0
    for pid in kids:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            continue
        assert state in ("Z", "X"), f"session process {pid} survived the stop"


def test_unknown_host_with_empty_known_hosts(ssh_cluster: Callable[..., SshCluster]) -> None:
    cluster = ssh_cluster(1, known=False)
    r = _ssh(cluster, "node0", "true")
    assert r.returncode != 0 and "Host key verification failed" in r.stderr


def test_restart_same_port(ssh_cluster: Callable[..., SshCluster]) -> None:
    cluster = ssh_cluster(1)
    port = cluster.nodes[0].port
    cluster.kill("node0")
    assert _ssh(cluster, "node0", "true").returncode != 0
    cluster.restart("node0")
    assert cluster.nodes[0].port == port
    assert _ssh(cluster, "node0", "true").returncode == 0


def test_shared_cluster(shared_ssh_cluster: SshCluster) -> None:
    assert _ssh(shared_ssh_cluster, "shared0", "true").returncode == 0


def test_close_stops_detached_processes_started_under_its_work_dir(
        ssh_keys: KeyStore, tmp_path_factory: pytest.TempPathFactory) -> None:
    # Detached over SSH (setsid, output closed), as kvgate's engines and soak agents are: once the
    # session ends they belong to init, not to sshd, so stopping sshd's sessions misses them.
    workdir = tmp_path_factory.mktemp("sshd-leak")
    cluster = SshCluster.start(1, workdir, ssh_keys)
    remote = Path(cluster.inventory.defaults.workdir or "")
    assert remote.is_relative_to(workdir)
    remote.mkdir(parents=True, exist_ok=True)
    sibling = workdir.parent / (workdir.name + "0")  # a name that merely starts the same: not ours
    sibling.mkdir()
    outside = subprocess.Popen(["sleep", "300"], cwd=sibling, start_new_session=True,  # noqa: S603, S607
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        detach = "</dev/null >/dev/null 2>&1 & echo $!"
        r = _ssh(cluster, "node0", "sh", "-c", shlex.quote(
            f"cd {shlex.quote(str(remote))} && setsid sleep 301 {detach}; "  # contained by its cwd
            f"cd / && KVGATE_T={shlex.quote(str(remote / 'x'))} setsid sleep 302 {detach}; "  # by its env
            f"setsid sh -c 'sleep 303; :' {shlex.quote(str(remote / 'agent'))} {detach}"))  # by its argv
        assert r.returncode == 0, r.stderr
        pids = [int(x) for x in r.stdout.split()]
        assert len(pids) == 3 and all(alive(p) for p in pids)
        node = cluster.nodes[0]
        assert node.proc is not None and not set(pids) & set(descendants(node.proc.pid))
        deadline = time.monotonic() + 5
        while not descendants(pids[2]) and time.monotonic() < deadline:
            time.sleep(0.05)
        child = descendants(pids[2])  # `sleep 303` names nothing: contained as the script's child
        assert len(child) == 1
        pids += child
        assert set(pids) <= set(contained_processes(workdir))
        assert outside.pid not in contained_processes(workdir)
        cluster.close()
        assert set(cluster.leftovers) == set(pids)
        deadline = time.monotonic() + 5  # init reaps them
        while any(alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [p for p in pids if alive(p)]
        assert outside.poll() is None  # the sibling directory's process was left alone
    finally:
        cluster.close()
        outside.kill()
        outside.wait(timeout=10)
        for pid in contained_processes(workdir):
            os.kill(pid, signal.SIGKILL)

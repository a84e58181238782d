"""The loopback sshd fixture itself, checked with OpenSSH's own ``ssh`` client."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.sshd import SshCluster, descendants

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

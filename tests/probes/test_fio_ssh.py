"""fio probes on loopback SSH nodes (real OpenSSH server, SSHExecutor): one node, and fio's
client/server mode with the servers started detached over SSH."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.config.inventory import StorageTarget
from harness.config.profile import FioSpec
from harness.ports import free_port
from harness.probes.fio_run import ServerSpec, run_fio_client_server, run_fio_probe
from harness.remote.base import Executor
from harness.remote.connect import executor_for
from tests.support.sshd import SshCluster

pytestmark = [pytest.mark.ssh, pytest.mark.fio]

SPEC = FioSpec(
    job_sets=["seq-read", "seq-write"], size="4 MiB", runtime="1s", ramp_time="0s", numjobs=2, iodepth=8
)


@pytest.fixture
def ssh_node(shared_ssh_cluster: SshCluster) -> Iterator[Executor]:
    ex = executor_for(shared_ssh_cluster.inventory, shared_ssh_cluster.nodes[0].name)
    try:
        yield ex
    finally:
        ex.close()


def test_fio_probe_over_ssh(ssh_node: Executor, tmp_path: Path) -> None:
    tier = tmp_path / "tier"
    tier.mkdir()
    res = run_fio_probe(ssh_node, StorageTarget(name="t1", path=str(tier)), SPEC, tmp_path / "out")
    raw = json.loads(res.raw_output.read_text())
    jobs = {j["jobname"]: j for j in raw["jobs"]}
    assert res.node == ssh_node.node
    assert res.job_sets["seq-read"].read_bw_bytes == jobs["seq-read"]["read"]["bw_bytes"] > 0
    assert res.job_sets["seq-write"].write_bw_bytes == jobs["seq-write"]["write"]["bw_bytes"] > 0
    assert list(tier.iterdir()) == []  # removed on the node (loopback: same filesystem)


def test_client_server_over_ssh(ssh_cluster: object, tmp_path: Path) -> None:
    cluster: SshCluster = ssh_cluster(2)  # type: ignore[operator]
    exs = [executor_for(cluster.inventory, n.name) for n in cluster.nodes]
    try:
        dirs = [tmp_path / "a", tmp_path / "b"]
        for d in dirs:
            d.mkdir()
        servers = [
            ServerSpec(ex, StorageTarget(name=f"t{i}", path=str(d)), "127.0.0.1", free_port())
            for i, (ex, d) in enumerate(zip(exs, dirs))
        ]
        spec = SPEC.model_copy(update={"job_sets": ["seq-read"], "numjobs": 1})
        res = run_fio_client_server(exs[0], servers, spec, tmp_path / "out")
        assert set(res.hosts) == {n.name for n in cluster.nodes}
        per_host = [res.per_host[n.name]["seq-read"].read_bw_bytes for n in cluster.nodes]
        assert all(v and v > 0 for v in per_host)
        assert res.job_sets["seq-read"].read_bw_bytes == sum(v for v in per_host if v)
        assert all(list(d.iterdir()) == [] for d in dirs)
        for srv in servers:
            with socket.socket() as s:
                assert s.connect_ex(("127.0.0.1", srv.port)) != 0  # fio servers stopped
    finally:
        for ex in exs:
            ex.close()

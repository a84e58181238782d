"""Fixtures for the remote layer's tests: ``executor`` runs each contract test on every executor
(the SSH one against a real loopback sshd; it shares this machine's filesystem, so tests can check
the node's files directly)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.remote.base import Executor
from harness.remote.local import LocalExecutor
from harness.remote.ssh import SSHExecutor
from tests.support.sshd import SshCluster


@pytest.fixture(params=["local", pytest.param("ssh", marks=pytest.mark.ssh)])
def executor(request: pytest.FixtureRequest) -> Iterator[Executor]:
    ex: Executor
    if request.param == "local":
        ex = LocalExecutor("local")
    else:
        cluster: SshCluster = request.getfixturevalue("shared_ssh_cluster")
        ex = SSHExecutor.from_inventory(cluster.inventory, cluster.nodes[0].name)
    try:
        yield ex
    finally:
        ex.close()

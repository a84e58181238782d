"""Fixtures for the remote layer's tests: ``executor`` runs each contract test on every executor
(the SSH one against a real loopback sshd; it shares this machine's filesystem, so tests can check
the node's files directly)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from harness.remote.base import Executor
from harness.remote.local import LocalExecutor
from harness.remote.ssh import SSHExecutor
from tests.support.sshd import SshCluster

# Inside the Ray test session (tests/remote/test_ray.py runs this module again in a network
# namespace with a Ray cluster up), the contract also runs on the Ray executor.
RAY = ["ray"] if os.environ.get("KVGATE_RAY_ADDRESS") else []


@pytest.fixture(params=["local", "cgroup", pytest.param("ssh", marks=pytest.mark.ssh), *RAY])
def executor(request: pytest.FixtureRequest) -> Iterator[Executor]:
    ex: Executor
    if request.param == "local":
        ex = LocalExecutor("local")
    elif request.param == "cgroup":  # every command through the join script, in a real cgroup
        yield from _in_cgroup()
        return
    elif request.param == "ray":
        from harness.remote.ray.executor import RayExecutor
        from tests.remote.ray_inventory import ray_inventory

        ex = RayExecutor.from_inventory(ray_inventory(), "ray-a")
    else:
        cluster: SshCluster = request.getfixturevalue("shared_ssh_cluster")
        ex = SSHExecutor.from_inventory(cluster.inventory, cluster.nodes[0].name)
    try:
        yield ex
    finally:
        ex.close()


def _in_cgroup() -> Iterator[Executor]:
    import uuid
    from pathlib import Path

    from harness.probes.blkthrottle import find_io_controller
    from harness.remote.cgroupjoin import CgroupExecutor

    inner = LocalExecutor("local")
    cg = Path(find_io_controller(inner).parent) / f"kvgate-test-{uuid.uuid4().hex[:8]}"
    cg.mkdir()
    try:
        ex = CgroupExecutor(inner, str(cg / "cgroup.procs"))
        assert f":/{cg.name}" in ex.run(["cat", "/proc/self/cgroup"]).stdout
        yield ex
        ex.close()
    finally:
        for pid in (cg / "cgroup.procs").read_text().split():  # a process a test left: out, so the cgroup goes
            (cg.parent / "cgroup.procs").write_text(pid)
        cg.rmdir()

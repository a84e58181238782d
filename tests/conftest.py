"""Shared fixtures for the whole test suite.

SSH fixtures (mark tests using them ``@pytest.mark.ssh``):

* ``ssh_cluster(n=1, **opts) -> SshCluster``: a factory starting ``n`` real OpenSSH servers on
  loopback, stopped at the end of the test. ``opts``: ``client_key_kind`` ("ed25519", "rsa",
  "ed25519-passphrase"), ``known`` (False: empty known_hosts), ``log_level``, and any inventory
  ``defaults`` field (``keepalive=1.0``, ``workdir=...``). Keys are generated once per session, so a
  cluster starts in well under a second.
* ``shared_ssh_cluster``: one session-wide single-node cluster for tests that only run commands
  (do not stop, kill or freeze it).

The cluster offers ``.inventory`` (``Inventory``), ``.inventory_path`` (the same as YAML),
``.nodes`` (``SshNode``: name, host, port, log_path), ``.known_hosts``, ``.client_key``,
``.keys.client_key(kind)``, ``.stop(node)``, ``.kill(node)``, ``.freeze(node)``, ``.thaw(node)``,
``.restart(node)``, ``.log(node)``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from tests.support.sshd import KeyStore, SshCluster  # noqa: E402


@pytest.fixture(scope="session")
def ssh_keys(tmp_path_factory: pytest.TempPathFactory) -> KeyStore:
    return KeyStore(tmp_path_factory.mktemp("ssh-keys"))


@pytest.fixture
def ssh_cluster(ssh_keys: KeyStore,
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., SshCluster]]:
    started: list[SshCluster] = []

    def factory(n: int = 1, **opts: Any) -> SshCluster:
        cluster = SshCluster.start(n, tmp_path_factory.mktemp("sshd"), ssh_keys, **opts)
        started.append(cluster)
        return cluster

    yield factory
    for cluster in started:
        cluster.close()


@pytest.fixture(scope="session")
def shared_ssh_cluster(ssh_keys: KeyStore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshCluster]:
    cluster = SshCluster.start(1, tmp_path_factory.mktemp("sshd-shared"), ssh_keys, name_prefix="shared")
    yield cluster
    cluster.close()

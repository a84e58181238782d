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

import os
import re
import signal
import sys
import time
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


# --- every process a test starts is stopped by it --------------------------------------------------
# Detached engines and soak agents outlive a killed controller by design, so a test that times out or
# fails half-way can leave them behind. After each test that used ``tmp_path``, any process whose
# command line, working directory or environment names that directory is stopped here and listed in
# the terminal summary, so a leak is visible and never slows the rest of the suite.
_LEAKED: list[str] = []


def _mentions(pid: int, needle: re.Pattern[bytes]) -> bool:
    for name in ("cmdline", "environ"):
        try:
            with open(f"/proc/{pid}/{name}", "rb") as fh:
                if needle.search(fh.read()):
                    return True
        except OSError:
            pass
    try:
        return needle.match(os.readlink(f"/proc/{pid}/cwd").encode()) is not None
    except OSError:
        return False


def _leftovers(root: Path) -> list[int]:
    # the directory itself or a path inside it, never a sibling whose name merely starts the same
    # (test_x1 must not claim the processes of test_x10)
    needle = re.compile(re.escape(str(root).encode()) + rb"(?![^/\x00\s:=\"'])")
    me = os.getpid()
    pids = [int(d) for d in os.listdir("/proc") if d.isdigit() and int(d) != me]
    return [pid for pid in pids if _mentions(pid, needle)]


@pytest.fixture(autouse=True)
def _stop_leftover_processes(request: pytest.FixtureRequest) -> Iterator[None]:
    # asked for before the test, so tmp_path is torn down after this fixture, not before
    root = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield
    if root is None:
        return
    pids = _leftovers(root)
    if not pids:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and any(os.path.exists(f"/proc/{p}") for p in pids):
            time.sleep(0.1)
        pids = [p for p in pids if os.path.exists(f"/proc/{p}")]
        if not pids:
            break
    _LEAKED.append(request.node.nodeid)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _LEAKED:
        terminalreporter.write_sep("=", "tests that left processes running (stopped by conftest)")
        for nodeid in _LEAKED:
            terminalreporter.write_line(nodeid)


# --- parallel runs (pytest-xdist) -----------------------------------------------------------------
# `make test` runs the suite in two sessions: the tests marked ``timing`` one at a time on a quiet
# machine (end-to-end gates on the emulator, the real vLLM tier, the load client's TTFT clock, fio
# bandwidth, SSH keep-alive and timeouts: their verdicts depend on the machine not being shared),
# then the rest in parallel workers. The mark comes from the test's directory or file, so a new test
# there is serial by default.
_TIMING_DIRS = {"pipelines", "integrity", "real_engine", "sim", "engines", "load"}
_TIMING_FILES = {"test_secrets.py", "test_faults.py", "test_load_client_bounds.py"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tests_root = Path(__file__).resolve().parent
    for item in items:
        rel = item.path.resolve().relative_to(tests_root).parts
        if rel[0] in _TIMING_DIRS or item.path.name in _TIMING_FILES:
            item.add_marker(pytest.mark.timing)

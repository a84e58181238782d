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
from typing import TYPE_CHECKING, Any

import pytest

_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from tests.support.once import session_dir  # noqa: E402
from tests.support.procs import stop_contained  # noqa: E402
from tests.support.sshd import KeyStore, SshCluster  # noqa: E402

if TYPE_CHECKING:
    from tests.support.campaign import PassedBaseline


@pytest.fixture(scope="session")
def ssh_keys(tmp_path_factory: pytest.TempPathFactory) -> KeyStore:
    return KeyStore(tmp_path_factory.mktemp("ssh-keys"))


@pytest.fixture
def ssh_cluster(ssh_keys: KeyStore, tmp_path_factory: pytest.TempPathFactory,
                request: pytest.FixtureRequest) -> Iterator[Callable[..., SshCluster]]:
    started: list[SshCluster] = []

    def factory(n: int = 1, **opts: Any) -> SshCluster:
        cluster = SshCluster.start(n, tmp_path_factory.mktemp("sshd"), ssh_keys, **opts)
        started.append(cluster)
        return cluster

    yield factory
    for cluster in started:
        cluster.close()
        if cluster.leftovers:  # started through the cluster and left running: stopped by close()
            _LEAKED.append(f"{request.node.nodeid} (under {cluster.workdir})")


@pytest.fixture(scope="session")
def shared_ssh_cluster(ssh_keys: KeyStore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshCluster]:
    cluster = SshCluster.start(1, tmp_path_factory.mktemp("sshd-shared"), ssh_keys, name_prefix="shared")
    yield cluster
    cluster.close()
    if cluster.leftovers:
        _LEAKED.append(f"shared_ssh_cluster (under {cluster.workdir})")


# --- one passed G1+G2 campaign for the end-to-end G3 tests ---------------------------------------
@pytest.fixture(scope="session")
def passed_baseline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PassedBaseline]:
    """A real G1+G2 campaign (``tests.support.campaign.PassedBaseline``), run once per session:
    tests that only need a valid baseline take their own copy with ``copy_into(reports)``."""
    from tests.support.campaign import PassedBaseline  # the CLI import is only paid by its users

    # One run for the whole session, shared by its xdist workers (the first to get there runs it).
    root = session_dir(tmp_path_factory, "passed-baseline")
    yield PassedBaseline.shared(root)
    if stop_contained(root):
        _LEAKED.append(f"passed_baseline (under {root})")


# --- every process a test starts is stopped by it --------------------------------------------------
# Detached engines and soak agents outlive a killed controller by design, so a test that times out or
# fails half-way can leave them behind. After each test that used ``tmp_path``, any process whose
# command line, working directory or environment names that directory is stopped here and listed in
# the terminal summary, so a leak is visible and never slows the rest of the suite. The SSH fixtures do
# the same for their own work directory (where processes started over SSH run) when they close.
_LEAKED: list[str] = []


@pytest.fixture(autouse=True)
def _stop_leftover_processes(request: pytest.FixtureRequest) -> Iterator[None]:
    # asked for before the test, so tmp_path is torn down after this fixture, not before
    root = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield
    if root is None:
        return
    if not stop_contained(root):
        return
    _LEAKED.append(request.node.nodeid)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _LEAKED:
        terminalreporter.write_sep("=", "tests that left processes running (stopped by conftest)")
        for nodeid in _LEAKED:
            terminalreporter.write_line(nodeid)


# --- parallel runs (pytest-xdist) -----------------------------------------------------------------
# `make test` runs the suite in three sessions at once (tools/test-sessions.sh). In front: the tests
# marked ``timing`` (end-to-end gates on the emulator, the load client's TTFT clock, fio bandwidth,
# SSH keep-alive and timeouts: their verdicts depend on time, disk bandwidth and load), three at a
# time. They mostly wait (emulated prefill, fio rounds, soak windows), and each must hold beside a
# neighbour anyway: CI also runs the suite beside a CPU hog. The mark comes from the test's
# directory or file, so a new test there is a timing test by default. Behind them, at a lower CPU
# priority: the rest in parallel, and the real vLLM tier (tests/real_engine, marked
# ``real_engine``), minutes of CPU-bound server start-up whose checks are the engine's counters and
# files, not times; a test of it that compares times carries its own ``timing`` mark.
# The probe tests that drive the local disk hard (fio, checkpoint writes, model loads) are timing
# tests too: `nice` shares the CPU but not the disk (the disk's scheduler here, mq-deadline, ignores
# I/O priorities), and run behind the gates they kept a G3's 1 s fio rounds from reaching steady
# state (read_bandwidth INCONCLUSIVE, seen once at three sessions at once). In front, at most two
# other tests run beside them, as among the gates' own fio probes.
# Within a session the tests marked ``slow`` are handed out first, so no worker starts a long test
# while the others have run out of work.
_TIMING_DIRS = {"pipelines", "integrity", "sim", "engines", "load"}
_TIMING_FILES = {"test_secrets.py", "test_faults.py", "test_load_client_bounds.py",
                 # the probes that drive the disk (above)
                 "test_fio_run.py", "test_fio_ssh.py", "test_fio_rounds.py", "test_cmd_probe.py",
                 "test_checkpoint_modelload.py",
                 # fio and the probes at a declared rate in a blk-throttle cgroup (issue 49)
                 "test_blkthrottle.py"}
_REAL_ENGINE_DIR = "real_engine"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    tests_root = Path(__file__).resolve().parent
    for item in items:
        rel = item.path.resolve().relative_to(tests_root).parts
        if rel[0] in _TIMING_DIRS or item.path.name in _TIMING_FILES:
            item.add_marker(pytest.mark.timing)
        if rel[0] == _REAL_ENGINE_DIR:
            item.add_marker(pytest.mark.real_engine)
    items.sort(key=lambda it: it.get_closest_marker("slow") is None)  # stable: same order on every worker

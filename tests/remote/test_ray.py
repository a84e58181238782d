"""The Ray executor against a real Ray cluster, started by the test on loopback and stopped by it.

Ray binds the machine's interface address even when told 127.0.0.1, so the cluster and the tests
that use it run in a network namespace of their own (and a PID namespace, so stopping it can reach
nothing else): one inner pytest session, started once for this module through
``tests/support/raycluster.py`` (a head whose resources ``kvgate-node:a`` and ``kvgate-node:c``
stand for nodes ray-a and ray-c, and an extra raylet with ``kvgate-node:b`` for ray-b), in two
workers (the soak on ray-c beside the rest). It runs the executor contract of
test_contract.py on the Ray executor, ray_checks.py, the G1/G2 run of
tests/pipelines/ray_gates_checks.py and the soak of ray_soak_checks.py; the test here asserts that
every part passed, from the inner session's JUnit report.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.raycluster import namespace_argv

ROOT = Path(__file__).resolve().parents[2]
# the soak first: the longest, it starts on one worker while the other takes the rest
INNER = ["tests/pipelines/ray_soak_checks.py", "tests/remote/test_contract.py", "tests/remote/ray_checks.py",
         "tests/pipelines/ray_gates_checks.py"]

pytestmark = [pytest.mark.slow, pytest.mark.fio, pytest.mark.timeout(1500)]


@dataclass
class InnerRun:
    cases: dict[str, str]  # "file::test[param]" -> passed | failed | error | skipped
    output: str
    seconds: float


def _inner(tmp_path_factory: pytest.TempPathFactory) -> InnerRun:
    work = Path(tmp_path_factory.mktemp("ray"))
    junit = work / "junit.xml"
    # two workers: the soak (xdist group "soak", node ray-c) mostly waits for its windows, beside
    # the rest (group "ray-b" one after another, the contract on ray-a anywhere)
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-k", "ray", "--durations=8",
           "-n", "2", "--dist", "loadgroup", f"--junitxml={junit}", *INNER]
    # Ray's own limit for a raylet to register (60 s) was passed by a head starting on this loaded
    # 2-core machine (bench-fanout, load 6); a slow start is not what this test is about
    # KVGATE_STATE_DIR: the controllers' own record of the actors they start (harness.remote.ray.actorbook),
    # this session's own
    env = dict(os.environ, PYTHONPATH=str(ROOT), RAY_raylet_start_wait_time_s="300",
               KVGATE_STATE_DIR=str(work / "state"))
    for var in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        env.pop(var, None)  # the outer session's worker: the inner one is a session of its own
    start = time.monotonic()
    proc = subprocess.run(namespace_argv(work, cmd, head_nodes=["a", "c"], worker_nodes=["b"]),  # noqa: S603
                          capture_output=True, text=True, timeout=1400, cwd=ROOT, env=env)
    seconds = time.monotonic() - start
    output = proc.stdout[-6000:] + proc.stderr[-3000:]
    # a start that failed prints Ray's own log tails (tests/support/raycluster.py): all of them
    assert junit.exists(), (f"the Ray session did not run (exit {proc.returncode}):\n"
                            f"{proc.stdout[-3000:]}{proc.stderr[-20000:]}")
    print(f"Ray test session: {seconds:.0f} s wall, exit {proc.returncode}\n{output[-1500:]}")
    return InnerRun(_cases(junit), output, seconds)


def _cases(junit: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        outcome = "passed"
        for tag in ("failure", "error", "skipped"):
            if case.find(tag) is not None:
                outcome = {"failure": "failed"}.get(tag, tag)
        name = case.get("name", "").rsplit("@", 1)[0]  # xdist's loadgroup names carry "@<group>"
        out[f"{case.get('classname', '')}::{name}"] = outcome
    return out


def _contract_tests() -> set[str]:
    tree = ast.parse((ROOT / "tests/remote/test_contract.py").read_text())
    return {f.name for f in tree.body if isinstance(f, ast.FunctionDef) and f.name.startswith("test_")
            and any(a.arg == "executor" for a in f.args.args)}


def test_ray_executor_on_a_local_cluster(tmp_path_factory: pytest.TempPathFactory) -> None:
    """One test, so that one inner session runs (xdist would give each test of a module-scoped
    fixture's module to any worker, each starting its own cluster); every part is checked and every
    failing part named."""
    run = _inner(tmp_path_factory)
    expected = {
        "tests.remote.test_contract": {f"{t}[ray]" for t in _contract_tests()},
        "tests.remote.ray_checks": {"test_ping_reports_mapping_unmapped_and_unclaimed",
                                    "test_secrets_stay_out_of_argv_and_ray_files",
                                    "test_facts_through_ray_take_a_few_actor_calls",
                                    "test_killed_actor_is_lost_and_detached_work_reattaches"},
        "tests.pipelines.ray_gates_checks": {"test_g1_g2_through_ray"},
        "tests.pipelines.ray_soak_checks": {"test_soak_outlives_its_controller_and_a_killed_node_actor_is_a_fault"},
    }
    problems = []
    for module, names in expected.items():
        mine = {k.split("::", 1)[1]: v for k, v in run.cases.items() if k.startswith(module + "::")}
        if set(mine) != names:
            problems.append(f"{module}: ran {sorted(mine)}, expected {sorted(names)}")
        problems += [f"{module}::{name}: {outcome}" for name, outcome in mine.items() if outcome != "passed"]
    assert not problems, "\n".join(problems) + "\n" + run.output

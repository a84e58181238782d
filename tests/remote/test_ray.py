"""The Ray executor against a real Ray cluster, started by the test on loopback and stopped by it.

Ray binds the machine's interface address even when told 127.0.0.1, so the cluster and the tests
that use it run in a network namespace of their own (and a PID namespace, so stopping it can reach
nothing else): one inner pytest session, started once for this module through
``tests/support/raycluster.py`` (a head whose resource ``kvgate-node:a`` stands for node ray-a, and
an extra raylet with ``kvgate-node:b`` for ray-b). It runs the executor contract of
test_contract.py on the Ray executor, ray_checks.py, the G1/G2 run of
tests/pipelines/ray_gates_checks.py and the soak of ray_soak_checks.py; each test here asserts that
its part passed, from the inner session's JUnit report. Ray's start-up costs most of the time on a
2-core machine: a few tests share one cluster.
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
INNER = ["tests/remote/test_contract.py", "tests/remote/ray_checks.py", "tests/pipelines/ray_gates_checks.py",
         "tests/pipelines/ray_soak_checks.py"]

pytestmark = [pytest.mark.slow, pytest.mark.fio, pytest.mark.timeout(1500)]


@dataclass
class InnerRun:
    cases: dict[str, str]  # "file::test[param]" -> passed | failed | error | skipped
    output: str
    seconds: float


@pytest.fixture(scope="module")
def inner(tmp_path_factory: pytest.TempPathFactory) -> InnerRun:
    work = Path(tmp_path_factory.mktemp("ray"))
    junit = work / "junit.xml"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-k", "ray",
           f"--junitxml={junit}", *INNER]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("PYTEST_XDIST_WORKER", None)
    start = time.monotonic()
    proc = subprocess.run(namespace_argv(work, cmd, head_nodes=["a"], worker_nodes=["b"]),  # noqa: S603
                          capture_output=True, text=True, timeout=1400, cwd=ROOT, env=env)
    seconds = time.monotonic() - start
    output = proc.stdout[-6000:] + proc.stderr[-3000:]
    assert junit.exists(), f"the Ray session did not run (exit {proc.returncode}):\n{output}"
    print(f"Ray test session: {seconds:.0f} s wall, exit {proc.returncode}")
    return InnerRun(_cases(junit), output, seconds)


def _cases(junit: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        outcome = "passed"
        for tag in ("failure", "error", "skipped"):
            if case.find(tag) is not None:
                outcome = {"failure": "failed"}.get(tag, tag)
        out[f"{case.get('classname', '')}::{case.get('name', '')}"] = outcome
    return out


def _contract_tests() -> set[str]:
    tree = ast.parse((ROOT / "tests/remote/test_contract.py").read_text())
    return {f.name for f in tree.body if isinstance(f, ast.FunctionDef) and f.name.startswith("test_")
            and any(a.arg == "executor" for a in f.args.args)}


def _passed(run: InnerRun, module: str) -> set[str]:
    mine = {k: v for k, v in run.cases.items() if k.startswith(module + "::")}
    bad = {k: v for k, v in mine.items() if v != "passed"}
    assert mine and not bad, f"{bad or 'nothing ran'}\n{run.output}"
    return {k.split("::", 1)[1] for k in mine}


def test_executor_contract_on_ray(inner: InnerRun) -> None:
    names = _passed(inner, "tests.remote.test_contract")
    assert names == {f"{t}[ray]" for t in _contract_tests()}


def test_ping_secrets_and_a_killed_node_actor(inner: InnerRun) -> None:
    assert _passed(inner, "tests.remote.ray_checks") == {
        "test_ping_reports_mapping_unmapped_and_unclaimed", "test_secrets_stay_out_of_argv_and_ray_files",
        "test_killed_actor_is_lost_and_detached_work_reattaches"}


def test_g1_g2_through_ray(inner: InnerRun) -> None:
    assert _passed(inner, "tests.pipelines.ray_gates_checks") == {"test_g1_g2_through_ray"}


def test_soak_outlives_controller_and_node_actor(inner: InnerRun) -> None:
    assert _passed(inner, "tests.pipelines.ray_soak_checks") == {
        "test_soak_outlives_its_controller_and_a_killed_node_actor_is_a_fault"}

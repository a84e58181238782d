"""#50 item 1: a squatter on kvgate's Ray namespace runs no code in the controller and is refused.

The checks need a real Ray cluster, which binds the machine's interface address even when told
127.0.0.1: they run in one inner pytest session inside a network and PID namespace of their own
with a head-only cluster up (``tests/support/raycluster.py``, as ``tests/remote/test_ray.py``
does), and this test asserts that every one of them passed, from the inner session's JUnit report.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.support.raycluster import namespace_argv

ROOT = Path(__file__).resolve().parents[2]
CHECKS = "tests/security/ray_squat_checks.py"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _expected() -> set[str]:
    tree = ast.parse((ROOT / CHECKS).read_text())
    names = set()
    for f in tree.body:
        if isinstance(f, ast.FunctionDef) and f.name.startswith("test_"):
            params = [d for d in f.decorator_list if "parametrize" in ast.unparse(d)]
            if params:
                values = ast.literal_eval(params[0].args[1])  # type: ignore[attr-defined]
                names |= {f"{f.name}[{v}]" for v in values}
            else:
                names.add(f.name)
    return names


def test_ray_squat_checks_in_a_namespace(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
           f"--junitxml={junit}", CHECKS]
    env = dict(os.environ, PYTHONPATH=str(ROOT), RAY_raylet_start_wait_time_s="300",
               KVGATE_STATE_DIR=str(tmp_path / "state"))
    for var in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        env.pop(var, None)  # the outer session's worker: the inner one is a session of its own
    proc = subprocess.run(namespace_argv(tmp_path, cmd, head_nodes=["a"], worker_nodes=[]),  # noqa: S603
                          capture_output=True, text=True, timeout=850, cwd=ROOT, env=env)
    output = proc.stdout[-8000:] + proc.stderr[-4000:]
    assert junit.exists(), f"the Ray session did not run (exit {proc.returncode}):\n{output}"
    outcomes: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        bad = [tag for tag in ("failure", "error", "skipped") if case.find(tag) is not None]
        outcomes[case.get("name", "")] = bad[0] if bad else "passed"
    assert set(outcomes) == _expected(), output
    assert all(v == "passed" for v in outcomes.values()), f"{outcomes}\n{output}"

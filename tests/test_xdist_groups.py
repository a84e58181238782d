"""`make test` and the Ray session rely on ``--dist loadgroup`` keeping an ``xdist_group`` on one
worker (the Ray checks that kill ray-b's node actor must not run beside G1/G2 on that actor).
pytest 9.2 changed how node ids are stored and xdist 3.8's grouping then silently stops
(pytest-dev/pytest-xdist#1386): every test is handed out on its own. pyproject.toml pins pytest
below 9.2; this test fails if grouping stops again, whatever the cause."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

MODULE = '''
import os, time, pytest
pytestmark = pytest.mark.xdist_group("one")

@pytest.mark.parametrize("i", range(6))
def test_grouped(i):
    time.sleep(0.2)
    with open(os.environ["GROUP_OUT"], "a") as fh:
        fh.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
'''


def test_an_xdist_group_runs_on_one_worker(tmp_path: Path) -> None:
    (tmp_path / "test_grouped.py").write_text(MODULE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}
    env["GROUP_OUT"] = str(tmp_path / "workers")
    proc = subprocess.run(  # noqa: S603 - fixed argv, a test-made directory
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "2", "--dist", "loadgroup",
         "test_grouped.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    workers = (tmp_path / "workers").read_text().split()
    assert len(workers) == 6 and len(set(workers)) == 1, f"the group ran on workers {workers}"

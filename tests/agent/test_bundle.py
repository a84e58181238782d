"""The agent zipapp: reproducible, self-contained, runs under a bare ``python3 -I -S``."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

from harness.agent.bundle import build_zipapp, sha256_of, source_files
from tests.load.sse_server import ScriptedServer, stream


def _agent(pyz: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    # -I: isolated (no PYTHONPATH, no user site); -S: no site-packages at all
    return subprocess.run([sys.executable, "-I", "-S", str(pyz), *args], capture_output=True, text=True,  # noqa: S603
                          timeout=timeout, cwd="/")


def test_build_is_reproducible_and_holds_only_the_agent_parts(tmp_path: Path) -> None:
    a = build_zipapp(tmp_path / "a")
    b = build_zipapp(tmp_path / "b")
    assert a.name == "kvgate-agent.pyz" and a.read_bytes().startswith(b"#!/usr/bin/env python3\n")
    assert sha256_of(a) == sha256_of(b)
    names = zipfile.ZipFile(a).namelist()
    assert names[0] == "__main__.py" and names[1:] == sorted(names[1:])
    assert {"harness/__init__.py", "harness/units.py", "harness/progress.py", "harness/load/client.py",
            "harness/load/cli.py", "harness/agent/main.py"} <= set(names)
    if Path("harness/sim/cli.py").exists():
        assert "harness/sim/cli.py" in names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    assert not any(n.startswith(("harness/config/", "harness/remote/", "harness/cli/")) for n in names)
    assert len(names) == len(source_files()) + 1
    for info in zipfile.ZipFile(a).infolist():
        assert info.date_time == (1980, 1, 1, 0, 0, 0)


def test_runs_under_isolated_python_without_site_packages(tmp_path: Path) -> None:
    probe = subprocess.run([sys.executable, "-I", "-S", "-c", "import pydantic"], capture_output=True)  # noqa: S603
    assert probe.returncode != 0  # the check below really has no third-party package to lean on
    pyz = build_zipapp(tmp_path)
    v = _agent(pyz, "version")
    assert v.returncode == 0 and v.stdout.startswith("kvgate-agent 0.1.0")
    assert _agent(pyz, "bogus").returncode == 2
    assert _agent(pyz, "load", "run", "--help").returncode == 0
    if Path("harness/sim/cli.py").exists():
        assert _agent(pyz, "sim", "--help").returncode == 0


def test_load_run_from_the_zipapp(tmp_path: Path) -> None:
    pyz = build_zipapp(tmp_path)
    out = tmp_path / "out"
    with ScriptedServer() as s:
        s.script = lambda r: stream(["from ", "the ", "agent "])
        res = _agent(pyz, "load", "run", "--endpoint", s.url, "--model", "m", "--workload", "random",
                     "--input-len", "8", "--output-len", "3", "--concurrency", "2", "--num-requests", "6",
                     "--out", str(out), "-q")
    assert res.returncode == 0, res.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["completed"] == 6 and summary["total_output_tokens"] == 18
    assert len((out / "records.jsonl").read_text().splitlines()) == 6
    bad = _agent(pyz, "load", "run", "--endpoint", "nope", "--model", "m", "--out", str(out))
    assert bad.returncode == 2 and "load: error:" in bad.stderr and "Traceback" not in bad.stderr


def test_read_range(tmp_path: Path) -> None:
    pyz = build_zipapp(tmp_path)
    f = tmp_path / "data.txt"
    f.write_bytes(b"0123456789")
    assert _agent(pyz, "read-range", str(f), "3", "4").stdout == "3456"
    assert _agent(pyz, "read-range", str(f), "8", "100").stdout == "89"
    assert _agent(pyz, "read-range", str(f), "20", "5").stdout == ""
    assert _agent(pyz, "read-range", str(tmp_path / "missing"), "0", "5").returncode == 3


def _python39() -> str | None:
    import glob
    import shutil

    candidates = sorted(glob.glob("/root/.pyenv/versions/3.9*/bin/python3"))
    which = shutil.which("python3.9")
    if which and "/shims/" not in which:  # a pyenv shim may refuse to run a version not selected
        candidates.insert(0, which)
    for c in candidates:
        ok = subprocess.run([c, "-I", "-S", "-c", "import sys; assert sys.version_info[:2] == (3, 9)"],  # noqa: S603
                            capture_output=True)
        if ok.returncode == 0:
            return c
    return None


def test_oldest_supported_python_runs_the_agent(tmp_path: Path) -> None:
    import pytest

    py39 = _python39()
    if py39 is None:
        pytest.skip("no Python 3.9 interpreter on this machine")
    pyz = build_zipapp(tmp_path)
    with ScriptedServer() as s:
        s.script = lambda r: stream(["old ", "python "])
        res = subprocess.run([py39, "-I", "-S", str(pyz), "load", "run", "--endpoint", s.url, "--model", "m",  # noqa: S603
                              "--input-len", "4", "--output-len", "2", "--num-requests", "4", "--concurrency", "2",
                              "--out", str(tmp_path / "out"), "-q"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["completed"] == 4

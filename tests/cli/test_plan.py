"""``kvgate plan``: the commands, files and cold-restore steps of a run, refused before any node is
touched when an arm's cold restore would empty its tier or a remote client cannot reach the engine."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.cli.main import run

REPO = Path(__file__).resolve().parents[2]


def test_plan_prints_both_lmcache_processes_and_restore_steps(capsys: pytest.CaptureFixture[str]) -> None:
    code = run(["plan", "--inventory", str(REPO / "inventory/mi308x-8gpu.example.yaml"),
                "--profile", str(REPO / "profiles/tp4x2.yaml"), "--arm", "candidate"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.count("lmcache: lmcache server") == 2  # one LMCache server per instance
    assert "instance-0" in out and "instance-1" in out
    assert "restore: 1. vLLM POST /reset_prefix_cache" in out and "restore: 2. LMCache server POST /cache/clear" in out


def test_plan_refuses_unsafe_cold_restore_and_unreachable_engine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = yaml.safe_load((REPO / "profiles/moe-480b-tp8.yaml").read_text())
    for arm in data["arms"]:
        if arm["name"] == "candidate":
            arm["lmcache"] = {"chunk_size": 256, "local_cpu": True, "max_local_cpu_size": 100,
                              "max_local_disk_size": 1000}  # the old in-process form
    bad = tmp_path / "old.yaml"
    bad.write_text(yaml.safe_dump(data))
    code = run(["plan", "--inventory", str(REPO / "inventory/mi308x-8gpu.example.yaml"), "--profile", str(bad)])
    assert code == 2
    assert "loses the local-disk index" in capsys.readouterr().err
    # the Atlas example loads from a bastion: an engine on 127.0.0.1 is out of its reach
    data = yaml.safe_load((REPO / "profiles/deepseek-load-910b.yaml").read_text())
    data["engine"]["host"] = "127.0.0.1"
    loop = tmp_path / "loop.yaml"
    loop.write_text(yaml.safe_dump(data))
    code = run(["plan", "--inventory", str(REPO / "inventory/atlas-910b.example.yaml"), "--profile", str(loop)])
    assert code == 2
    assert "a remote client cannot reach it" in capsys.readouterr().err

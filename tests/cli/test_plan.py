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
    # tp4x2 declares lmcache 0.4.6 (the seeds' vLLM 0.20.1), whose server empties L1 by POST /clear-cache
    assert "restore: 1. vLLM POST /reset_prefix_cache" in out and "restore: 2. LMCache server POST /clear-cache" in out


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


def test_validate_refuses_what_plan_refuses_with_the_same_message(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The profile `kvgate init` used to write (in-process LMCache with a CPU tier) validated, then
    plan refused it: validate now runs the plan-time checks and prints plan's message."""
    data = yaml.safe_load((REPO / "profiles/moe-480b-tp8.yaml").read_text())
    for arm in data["arms"]:
        if arm["name"] == "candidate":
            arm["lmcache"] = {"chunk_size": 256, "local_cpu": True, "max_local_cpu_size": 100,
                              "max_local_disk_size": 1000}
    bad = tmp_path / "old.yaml"
    bad.write_text(yaml.safe_dump(data))
    inv = str(REPO / "inventory/mi308x-8gpu.example.yaml")
    assert run(["plan", "--inventory", inv, "--profile", str(bad)]) == 2
    planned = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error")]
    assert run(["validate", inv, str(bad)]) == 2
    validated = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("error")]
    assert planned == validated and len(planned) == 1
    assert f"{bad}:" in planned[0] and "loses the local-disk index" in planned[0]
    # without an inventory the cold-restore check still runs
    assert run(["validate", str(bad)]) == 2
    assert "loses the local-disk index" in capsys.readouterr().err


def _refusal(tmp_path: Path, capsys: pytest.CaptureFixture[str], inventory: str, profile: str,
             edit: object) -> tuple[str, str]:
    data = yaml.safe_load((REPO / "profiles" / profile).read_text())
    edit(data)  # type: ignore[operator]
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    inv = str(REPO / "inventory" / inventory)
    assert run(["plan", "--inventory", inv, "--profile", str(path)]) == 2
    planned = capsys.readouterr().err
    assert run(["validate", inv, str(path)]) == 2
    return planned, capsys.readouterr().err


def _line_of(path: Path, text: str) -> int:
    return next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if text in ln)


def test_multiprocess_lmcache_on_ascend_is_refused_at_plan_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def to_mp(data: dict) -> None:  # type: ignore[type-arg]
        data["arms"][1]["lmcache"]["mode"] = "multiprocess"

    planned, validated = _refusal(tmp_path, capsys, "atlas-910b.example.yaml", "deepseek-load-910b.yaml", to_mp)
    line = _line_of(tmp_path / "p.yaml", "mode: multiprocess")
    for err in (planned, validated):
        assert f"p.yaml:{line}:" in err and "arms[1].lmcache.mode" in err
        assert "multiprocess mode does not run on Ascend" in err


def test_multiprocess_across_nodes_on_loopback_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def span(data: dict) -> None:  # type: ignore[type-arg]
        data["model"]["nodes_per_instance"] = 2

    planned, validated = _refusal(tmp_path, capsys, "mi308x-8gpu.example.yaml", "moe-480b-tp8.yaml", span)
    for err in (planned, validated):
        assert "binds 127.0.0.1 on the head node" in err and "lmcache.mp_bind: node" in err
        assert "p.yaml:" in err and "arms[1].lmcache.mp_bind" in err


def test_remote_tier_and_storage_target_on_one_arm_are_refused_by_plan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 33 item 5 through `kvgate plan` too (validate: tests/config/test_engine_env_refusals.py):
    LMCache would serve from both tiers, and the report would name only the storage target."""
    def both(data: dict) -> None:  # type: ignore[type-arg]
        data["arms"][1]["lmcache"].update({"mode": "in_process", "remote_url": "lm://10.0.0.9:65432"})

    planned, validated = _refusal(tmp_path, capsys, "mi308x-8gpu.example.yaml", "moe-480b-tp8.yaml", both)
    for err in (planned, validated):
        assert "p.yaml:" in err and "one tier under test per arm" in err


def test_a_file_url_remote_tier_is_refused_by_plan_with_the_fs_form(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """LMCache 0.5.6 has no connector for file:// (connector/__init__.py): suggest fs://."""
    def file_url(data: dict) -> None:  # type: ignore[type-arg]
        arm = data["arms"][1]
        arm.pop("storage", None)
        arm["lmcache"] = {"mode": "in_process", "remote_url": "file:///mnt/shared/kv"}

    planned, validated = _refusal(tmp_path, capsys, "mi308x-8gpu.example.yaml", "moe-480b-tp8.yaml", file_url)
    line = _line_of(tmp_path / "p.yaml", "remote_url: file:///mnt/shared/kv")
    for err in (planned, validated):
        assert f"p.yaml:{line}:" in err and "use 'fs:///mnt/shared/kv'" in err


def test_a_remote_url_in_multiprocess_mode_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The LMCache server (lmcache 0.5.6) takes L2 adapters and reads no remote_url, nor does
    LMCacheMPConnector: the plan used to accept the arm and start a server without that tier."""
    def mp_remote(data: dict) -> None:  # type: ignore[type-arg]
        arm = data["arms"][1]
        arm.pop("storage", None)
        arm["lmcache"] = {"mode": "multiprocess", "mp_l2": "none", "remote_url": "fs:///mnt/shared/kv"}

    planned, validated = _refusal(tmp_path, capsys, "mi308x-8gpu.example.yaml", "moe-480b-tp8.yaml", mp_remote)
    for err in (planned, validated):
        assert "p.yaml:" in err and "arms[1].lmcache" in err
        assert "the LMCache server takes L2 adapters, not remote_url" in err

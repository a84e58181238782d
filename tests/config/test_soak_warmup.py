"""``soak.warmup`` is at most ``soak.warmup_max_fraction`` of ``soak.duration`` (default 10%), else
``kvgate validate`` exits 2 naming the file, the line and ``soak.warmup`` (issue 51, item 7): a
72-hour G4 whose warm-up left only its last hours to the drift checks passed before."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from harness.config.profile import SoakSpec

ROOT = Path(__file__).resolve().parents[2]


def _validate(tmp_path: Path, soak: dict[str, object]) -> subprocess.CompletedProcess[str]:
    prof = yaml.safe_load((ROOT / "profiles" / "demo.yaml").read_text())
    prof["soak"] = soak
    path = tmp_path / "long-soak.yaml"
    path.write_text(yaml.safe_dump(prof, sort_keys=False))
    return subprocess.run([sys.executable, "-m", "harness.cli.main", "validate", str(path)],  # noqa: S603
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_a_warm_up_of_all_but_the_last_hours_is_refused_at_validate(tmp_path: Path) -> None:
    res = _validate(tmp_path, {"duration": "72h", "window": "1h", "warmup": "70h"})
    assert res.returncode == 2, res.stdout + res.stderr
    out = res.stdout + res.stderr
    assert f"{tmp_path / 'long-soak.yaml'}:" in out and "[soak.warmup]" in out
    assert "more than warmup_max_fraction (10%) of duration (259200 s), at most 25920 s" in out
    assert "Traceback" not in out


def test_ten_percent_is_the_default_bound_and_a_declared_fraction_moves_it(tmp_path: Path) -> None:
    assert SoakSpec.model_validate({"duration": "72h", "warmup": "7.2h"}).warmup == 7.2 * 3600
    with pytest.raises(ValidationError, match=r"soak|warmup"):
        SoakSpec.model_validate({"duration": "72h", "warmup": "7.3h"})
    assert SoakSpec.model_validate({"duration": "72h", "warmup": "14h", "warmup_max_fraction": 0.2}).warmup == 14 * 3600
    with pytest.raises(ValidationError, match="warmup_max_fraction"):
        SoakSpec.model_validate({"duration": "72h", "warmup": "1h", "warmup_max_fraction": 0.9})
    assert _validate(tmp_path, {"duration": "72h", "window": "1h", "warmup": "7h"}).returncode == 0


def test_the_shipped_profiles_keep_within_the_bound() -> None:
    for path in sorted((ROOT / "profiles").glob("*.yaml")):
        soak = (yaml.safe_load(path.read_text()) or {}).get("soak")
        if soak:
            try:
                SoakSpec.model_validate(soak)
            except ValidationError as exc:
                pytest.fail(f"{path.name}: {exc}")

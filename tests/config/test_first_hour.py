"""What a new user gets wrong first, answered with one clear message (exit 2): a profile passed as
the inventory, a threshold without a unit, a key file that does not exist."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from harness.cli.main import run

REPO = Path(__file__).resolve().parents[2]


def test_a_profile_passed_as_inventory_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profile = str(REPO / "profiles" / "demo.yaml")
    code = run(["gate", "G1", "--inventory", profile, "--profile", profile, "--campaign", "c",
                "--reports", str(tmp_path / "reports")])
    err = capsys.readouterr().err
    assert code == 2
    assert "this looks like a profile file" in err and "--profile" in err
    assert err.count("unknown key") == 0 and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "reports").exists()


def test_an_inventory_passed_as_profile_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    inv = str(REPO / "inventory" / "localhost.yaml")
    assert run(["validate", "--kind", "profile", inv]) == 2
    assert "this looks like an inventory file" in capsys.readouterr().err


def test_a_bare_number_threshold_says_a_unit_is_needed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    prof = yaml.safe_load((REPO / "profiles" / "demo.yaml").read_text())
    prof["overrides"] = [{"gate": "G3", "check": "ttft_reduction", "threshold": 25, "reason": "a demo override"}]
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(prof))
    assert run(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "needs its unit" in err and "'25%'" in err and "overrides[0].threshold" in err
    assert "valid string" not in err


def test_a_missing_identity_file_is_a_validation_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inv = yaml.safe_load((REPO / "inventory" / "mi308x-8gpu.example.yaml").read_text())
    inv["defaults"]["identity_file"] = str(tmp_path / "no-such-key")
    path = tmp_path / "inv.yaml"
    path.write_text(yaml.safe_dump(inv))
    assert run(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "no-such-key" in err and "does not exist" in err and "defaults.identity_file" in err
    key = tmp_path / "no-such-key"
    key.write_text("a key file\n")
    assert run(["validate", str(path)]) == 0
    # a node's own key is checked too, located at the node
    inv["nodes"][0]["identity_file"] = str(tmp_path / "other-key")
    path.write_text(yaml.safe_dump(inv))
    assert run(["validate", str(path)]) == 2
    assert "nodes[0].identity_file" in capsys.readouterr().err

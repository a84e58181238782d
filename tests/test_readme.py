"""The README's cluster section is a path a new user can follow: init, the edit it names, validate
and plan work as written, and it points at the field reference, which exists."""

from __future__ import annotations

import glob
import re
import shlex
import shutil
from pathlib import Path

import pytest

from harness.cli.main import run

REPO = Path(__file__).resolve().parents[1]


def _cluster_section() -> str:
    text = (REPO / "README.md").read_text()
    return text.split("## On a real cluster", 1)[1].split("\n## ", 1)[0]


def _kvgate_line(section: str, command: str) -> list[str]:
    line = next(ln for ln in section.splitlines() if ln.startswith(".venv/bin/kvgate " + command + " "))
    argv = shlex.split(line.split("#", 1)[0])
    return argv[1:]


def test_cluster_section_is_a_path_from_init_to_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The README's commands as written: init, validate (refusing the placeholders until the edit the
    README names), validate, plan."""
    section = _cluster_section()
    monkeypatch.chdir(tmp_path)
    shutil.copytree(REPO / "gates", tmp_path / "gates")
    assert run(_kvgate_line(section, "init")) == 0
    validate = [w for a in _kvgate_line(section, "validate") for w in (sorted(glob.glob(a)) if "*" in a else [a])]
    assert run(validate) == 2
    assert "is a placeholder, not yet edited" in capsys.readouterr().err
    edit = next(ln for ln in section.splitlines() if ln.startswith("$EDITOR "))
    for name in shlex.split(edit.split("#", 1)[0])[1:]:  # the edit: the paths and the model directory
        path = tmp_path / name
        path.write_text(path.read_text().replace("/mnt/YOUR-BASELINE-DISK", "/mnt/nvme0")
                        .replace("/mnt/YOUR-CANDIDATE-DISK", "/mnt/fx100").replace("/models/YOUR-MODEL", "/models/m"))
    assert run(validate) == 0, capsys.readouterr().err
    assert run(_kvgate_line(section, "plan")) == 0, capsys.readouterr().err
    assert "== node node1 (gpu01.lab) ==" in capsys.readouterr().out
    gate = next(ln for ln in section.splitlines() if ln.startswith("make gate-G1"))
    for word in shlex.split(gate):
        if "=" in word and word.split("=", 1)[0] in ("INVENTORY", "PROFILE"):
            assert (tmp_path / word.split("=", 1)[1]).is_file(), word


def test_fields_are_documented_where_the_readme_points() -> None:
    section = _cluster_section()
    links = re.findall(r"\]\((docs/reference/[^)]*)\)", section)
    assert {"docs/reference/inventory.md", "docs/reference/profile.md", "docs/reference/gate.md"} <= set(links)
    for link in links:
        assert (REPO / link).exists(), link

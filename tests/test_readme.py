"""The README's cluster section is a path a new user can follow: it starts from a file that exists,
and points at the field reference, which exists."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

from harness.cli.main import run

REPO = Path(__file__).resolve().parents[1]


def _cluster_section() -> str:
    text = (REPO / "README.md").read_text()
    return text.split("## On a real cluster", 1)[1].split("\n## ", 1)[0]


def test_cluster_section_starts_from_a_shipped_example(tmp_path: Path) -> None:
    section = _cluster_section()
    cp = next(ln for ln in section.splitlines() if ln.startswith("cp "))
    argv = shlex.split(cp.split("#", 1)[0])
    assert argv[:2] == ["cp", "inventory/mi308x-8gpu.example.yaml"] and argv[2] == "inventory/lab.yaml"
    assert (REPO / argv[1]).is_file()
    # the next command validates what was copied, with the profile and gates the README names
    shutil.copy(REPO / argv[1], tmp_path / "lab.yaml")
    validate = next(ln for ln in section.splitlines() if "kvgate validate" in ln)
    profile = next(w for w in shlex.split(validate) if w.startswith("profiles/"))
    assert run(["validate", str(tmp_path / "lab.yaml"), str(REPO / profile)]) == 0


def test_fields_are_documented_where_the_readme_points() -> None:
    section = _cluster_section()
    links = re.findall(r"\]\((docs/reference/[^)]*)\)", section)
    assert {"docs/reference/inventory.md", "docs/reference/profile.md", "docs/reference/gate.md"} <= set(links)
    for link in links:
        assert (REPO / link).exists(), link

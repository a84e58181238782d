"""The Makefile a newcomer meets first: `make help` lists every target, values with spaces or quotes
stay one argument, and the install step says what it is doing."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _make(*args: str) -> str:
    res = subprocess.run(["make", "--no-print-directory", *args], cwd=REPO, capture_output=True, text=True,  # noqa: S603, S607 - fixed argv
                         timeout=60, check=True)
    return res.stdout


def _phony_targets() -> list[str]:
    text = (REPO / "Makefile").read_text().replace("\\\n", " ")
    m = re.search(r"^\.PHONY:(.*)$", text, re.M)
    assert m
    return m.group(1).split()


def test_help_lists_every_target() -> None:
    shown = _make("help")
    words = set(re.findall(r"[A-Za-z0-9_-]+", shown))
    missing = [t for t in _phony_targets() if t not in words]
    assert missing == [], f"make help omits {missing}"
    for gate in ("gate-G1", "gate-G2", "gate-G3", "gate-G4"):
        assert gate in words


def _kvgate_argv(*make_args: str) -> list[str]:
    out = _make("-n", *make_args).replace("\\\n", " ")
    line = next(ln for ln in out.splitlines() if "/kvgate " in ln)
    return shlex.split(line)


def test_values_with_spaces_and_quotes_stay_one_argument() -> None:
    argv = _kvgate_argv("gate-G1", "CAMPAIGN=fx100 poc", "PROFILE=my profiles/it's.yaml")
    assert argv[argv.index("--campaign") + 1] == "fx100 poc"
    assert argv[argv.index("--profile") + 1] == "my profiles/it's.yaml"
    argv = _kvgate_argv("demo", "CAMPAIGN=a b")
    assert argv[argv.index("--campaign") + 1] == "demo-a b"


def test_a_campaign_name_with_a_space_is_named_as_the_problem() -> None:
    from harness.cli.main import run

    code = run(["gate", "G1", "--inventory", str(REPO / "inventory" / "localhost.yaml"),
                "--profile", str(REPO / "profiles" / "demo.yaml"), "--campaign", "fx100 poc",
                "--reports", "/nonexistent-kvgate-reports"])
    assert code == 2
    assert not Path("/nonexistent-kvgate-reports").exists()


def test_install_step_says_what_it_is_doing() -> None:
    recipe = (REPO / "Makefile").read_text().split("$(VENV)/.installed: pyproject.toml", 1)[1].split("\n\n", 1)[0]
    assert "@echo" in recipe and "installing" in recipe

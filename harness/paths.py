"""Where the project's directories are: the repository checkout, or the current directory."""

from __future__ import annotations

from pathlib import Path


def project_root() -> Path:
    """The checkout kvgate runs from (the directory holding gates/), else the current directory."""
    here = Path(__file__).resolve().parent.parent
    if (here / "gates").is_dir():
        return here
    return Path.cwd()


def gates_dir() -> Path | None:
    for base in (Path.cwd(), project_root()):
        if (base / "gates").is_dir():
            return base / "gates"
    return None


def reports_dir() -> Path:
    return project_root() / "reports"

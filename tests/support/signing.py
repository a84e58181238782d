"""Helpers of the chain-of-custody tests: the CLI in-process with its output, and real OpenSSH keys."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.cli.main import run

__all__ = ["cli", "ssh_key"]


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    """``kvgate ARGV`` in this process: (exit code, stdout + stderr)."""
    code = run(list(argv))
    out = capsys.readouterr()
    return code, out.out + out.err


def ssh_key(tmp: Path, name: str) -> Path:
    """A fresh ed25519 key made by ssh-keygen (no passphrase); ``<path>.pub`` beside it."""
    path = tmp / f"key-{name}"
    argv = ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(path)]
    subprocess.run(argv, check=True, capture_output=True)  # noqa: S603 - fixed argv, test-made path
    return path

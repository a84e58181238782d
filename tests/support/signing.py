"""Helpers of the chain-of-custody tests: the CLI in-process with its output, and real OpenSSH keys."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.cli.main import run

__all__ = ["cli", "sign_both", "ssh_key"]


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


def sign_both(capsys: pytest.CaptureFixture[str], tmp: Path, *targets: Path) -> Path:
    """Sign each of ``targets`` (a gate or a campaign directory) as vendor Vera and customer Carl
    with ssh-keygen keys made in ``tmp`` (the same ones on a later call with the same ``tmp``);
    return the allowed_signers file binding them to those roles."""
    vendor, customer = (tmp / f"key-{n}" if (tmp / f"key-{n}").is_file() else ssh_key(tmp, n)
                        for n in ("vendor", "customer"))
    for target in targets:
        for key, name, role in ((vendor, "Vera", "vendor"), (customer, "Carl", "customer")):
            code, out = cli(capsys, "sign", str(target), "--key", str(key), "--signer", name, "--role", role)
            assert code == 0, out
    allowed = tmp / "allowed_signers"
    allowed.write_text(f"vera@vendor {Path(str(vendor) + '.pub').read_text().strip()}\n"
                       f"carl@customer {Path(str(customer) + '.pub').read_text().strip()}\n")
    return allowed

"""The README's by-hand checks of a signed gate and of a signed campaign manifest, run as written
(placeholders filled in) with nothing on the PATH but coreutils and OpenSSH's ssh-keygen: a customer
without kvgate must be able to follow them, and they must catch what they claim to (issue 27)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.security.test_campaign_custody import Signed

ROOT = Path(__file__).resolve().parents[2]
# the coreutils programs a README check may call; anything else (grep, find, sed, python) is not found
COREUTILS = ("sha256sum", "cat", "ls", "cut", "sort", "comm", "head", "tail", "wc", "du", "echo", "printf",
             "test", "[")


def _block_after(marker: str) -> list[str]:
    """The statements of the README's first ``sh`` block after the line holding ``marker``
    (continuation lines joined, comments kept: the shell drops them)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(marker)
    m = re.search(r"```sh\n(.*?)```", text[start:], re.S)
    assert m is not None, marker
    return [s for s in m.group(1).replace("\\\n", " ").splitlines() if s.strip()]


def _path_dir(tmp: Path) -> Path:
    bindir = tmp / "coreutils-and-openssh"
    bindir.mkdir()
    for tool in (*COREUTILS, "ssh-keygen"):
        found = shutil.which(tool)
        assert found is not None, tool
        (bindir / tool).symlink_to(found)
    return bindir


def _run(statements: list[str], cwd: Path, bindir: Path, role: str,
         signer: str) -> list[subprocess.CompletedProcess[str]]:
    out = []
    for st in statements:
        st = st.replace("<signer-id>", signer).replace("<role>", role)
        out.append(subprocess.run(["/bin/sh", "-c", st], cwd=cwd, capture_output=True, text=True, timeout=60,  # noqa: S603
                                  env={"PATH": str(bindir), "LC_ALL": "C"}))
    return out


@pytest.fixture
def signed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Signed:
    s = Signed(tmp_path, capsys)
    for where in (s.camp, s.camp / "G2", s.camp / "G3"):  # the README's commands name ./allowed_signers
        shutil.copy(s.allowed, where / "allowed_signers")
    return s


def test_readme_gate_check_works_and_catches_a_changed_file(signed: Signed, tmp_path: Path) -> None:
    block = _block_after("checks a gate, in the gate directory")
    bindir = _path_dir(tmp_path)
    gate = signed.camp / "G3"
    for role, signer in (("vendor", "vera"), ("customer", "carl")):
        check, signoff, listing = _run(block, gate, bindir, role, signer)
        assert check.returncode == 0, check.stdout + check.stderr
        assert "result.json: OK" in check.stdout
        assert f'Good "kvgate-report@v1" signature for {signer}@{role}' in check.stdout + check.stderr
        assert signoff.returncode == 0 and '"gate": "G3"' in signoff.stdout and "camp-1" in signoff.stdout
        assert listing.returncode == 0 and "result.json" in listing.stdout and "signatures:" in listing.stdout
    result = gate / "result.json"  # the failing gate's verdict changed after signing
    result.write_text(result.read_text().replace('"FAIL"', '"PASS"', 1))
    check = _run(block[:1], gate, bindir, "vendor", "vera")[0]
    assert check.returncode != 0 and "result.json: FAILED" in check.stdout


def test_readme_campaign_check_works_and_catches_a_removed_gate(signed: Signed, tmp_path: Path) -> None:
    block = _block_after("By hand, in the campaign directory")
    bindir = _path_dir(tmp_path)
    check, listing, gates = _run(block, signed.camp, bindir, "customer", "carl")
    assert check.returncode == 0, check.stdout + check.stderr
    assert "G3/MANIFEST.sha256: OK" in check.stdout
    assert "# campaign camp-1" in listing.stdout and "# gate G3 FAIL" in listing.stdout
    assert gates.stdout.split() == ["G2/", "G3/"]
    shutil.rmtree(signed.camp / "G3")  # the failing gate removed
    check = _run(block[:1], signed.camp, bindir, "customer", "carl")[0]
    assert check.returncode != 0 and "G3/MANIFEST.sha256" in check.stdout + check.stderr


def test_no_check_needs_more_than_coreutils_and_ssh_keygen() -> None:
    used = {st.split()[0] for marker in ("checks a gate, in the gate directory", "By hand, in the campaign directory")
            for st in _block_after(marker)}
    assert used <= {*COREUTILS, "ssh-keygen"}, used

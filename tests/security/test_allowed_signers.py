"""#29 item 4: ``allowed_signers`` and ``authorized_keys`` are read as OpenSSH reads them.

The findings: an unquoted ``valid-before=20200101`` was dropped, so the key never expired and
verify said VERIFIED; ``*@vendor,!jane-doe@vendor`` trusted jane-doe because the ``!`` was ignored.
Every line form kvgate accepts is cross-checked against ``ssh-keygen -Y verify`` on a real
signature: kvgate trusts the key exactly when ssh-keygen does (a file kvgate refuses as malformed
counts as no trust; ssh-keygen skips such a line)."""

from __future__ import annotations

import base64
import datetime as dt
import subprocess
from pathlib import Path

import pytest

from harness.report.sshsig import NAMESPACE
from harness.report.trust import TrustFileError, parse_allowed_signers, read_allowed_signers, read_authorized_keys


@pytest.fixture(scope="module")
def signed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, bytes]:
    d = tmp_path_factory.mktemp("sig")
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / "k")], check=True)  # noqa: S603,S607
    (d / "msg").write_bytes(b"the report\n")
    subprocess.run(["ssh-keygen", "-q", "-Y", "sign", "-f", str(d / "k"), "-n", NAMESPACE,  # noqa: S603,S607
                    str(d / "msg")], check=True, capture_output=True)
    pub = (d / "k.pub").read_text().split()
    return d, f"{pub[0]} {pub[1]}", base64.b64decode(pub[1])


def _ssh_keygen_trusts(d: Path, line: str, principal: str) -> bool:
    (d / "allowed").write_text(line + "\n")
    with open(d / "msg", "rb") as msg:
        res = subprocess.run(["ssh-keygen", "-Y", "verify", "-f", str(d / "allowed"), "-I", principal,  # noqa: S603,S607
                              "-n", NAMESPACE, "-s", str(d / "msg.sig")], stdin=msg, capture_output=True)
    return res.returncode == 0


def _kvgate_trusts(d: Path, line: str, principal: str, blob: bytes) -> bool:
    (d / "allowed").write_text(line + "\n")
    try:
        anchors = read_allowed_signers(d / "allowed")
    except TrustFileError:
        return False
    now = dt.datetime.now(dt.timezone.utc)
    return any(a.allows(principal, NAMESPACE, now) is None for a in anchors if a.key_blob == blob)


PAST, FUTURE = "20200101", "20991231"
# (options, principals, principal asked): every form kvgate accepts, and the malformed ones
FORMS = [
    ("", "jane@vendor", "jane@vendor"),
    ("", "jane@vendor", "john@vendor"),
    ("", "*@vendor", "jane@vendor"),
    ("", "j?ne@vendor", "jane@vendor"),
    ("", "*@vendor,!jane-doe@vendor", "jane-doe@vendor"),  # the finding: ! was ignored
    ("", "*@vendor,!jane-doe@vendor", "john@vendor"),
    ("", "!jane-doe@vendor,*@vendor", "jane-doe@vendor"),
    ("", "!jane-doe@vendor", "john@vendor"),
    ("", '"jane@vendor,john@customer"', "john@customer"),
    ("", "jane@vendor,,x", "jane@vendor"),
    (f'valid-before="{PAST}"', "jane@vendor", "jane@vendor"),
    (f"valid-before={PAST}", "jane@vendor", "jane@vendor"),  # the finding: unquoted, was dropped
    (f'valid-before="{FUTURE}"', "jane@vendor", "jane@vendor"),
    (f'valid-before="{PAST}Z"', "jane@vendor", "jane@vendor"),
    (f'valid-before="{FUTURE}0000UTC"', "jane@vendor", "jane@vendor"),
    (f'Valid-Before="{PAST}"', "jane@vendor", "jane@vendor"),
    (f'valid-after="{FUTURE}"', "jane@vendor", "jane@vendor"),
    (f'valid-after="{PAST}"', "jane@vendor", "jane@vendor"),
    (f'valid-after="{PAST}",valid-before="{FUTURE}"', "jane@vendor", "jane@vendor"),
    (f'valid-after="{FUTURE}",valid-before="{PAST}"', "jane@vendor", "jane@vendor"),
    (f'valid-before="{PAST}",valid-before="{FUTURE}"', "jane@vendor", "jane@vendor"),
    (f'valid-before="{FUTURE}",', "jane@vendor", "jane@vendor"),
    (f'valid-before="{FUTURE}"x', "jane@vendor", "jane@vendor"),
    ('valid-before="2099"', "jane@vendor", "jane@vendor"),
    (f'namespaces="{NAMESPACE}"', "jane@vendor", "jane@vendor"),
    ('namespaces="git,file"', "jane@vendor", "jane@vendor"),
    ('namespaces="kvgate-*"', "jane@vendor", "jane@vendor"),
    ('namespaces="*,!kvgate-*"', "jane@vendor", "jane@vendor"),
    ("namespaces=kvgate-report@v1", "jane@vendor", "jane@vendor"),
    ('foo="x"', "jane@vendor", "jane@vendor"),
    ("cert-authority", "jane@vendor", "jane@vendor"),
]


@pytest.mark.parametrize(("options", "principals", "asked"), FORMS)
def test_trust_decision_agrees_with_ssh_keygen(signed: tuple[Path, str, bytes], options: str, principals: str,
                                               asked: str) -> None:
    d, key, blob = signed
    line = " ".join(p for p in (principals, options, key, "a comment") if p)
    assert _kvgate_trusts(d, line, asked, blob) == _ssh_keygen_trusts(d, line, asked), line


def test_the_two_findings_are_refused(signed: tuple[Path, str, bytes]) -> None:
    d, key, blob = signed
    with pytest.raises(TrustFileError, match="missing start quote"):
        parse_allowed_signers(f"jane@vendor valid-before=20200101 {key}\n", "allowed")
    (anchor,) = parse_allowed_signers(f"*@vendor,!jane-doe@vendor {key}\n", "allowed")
    now = dt.datetime.now(dt.timezone.utc)
    assert anchor.allows("jane-doe@vendor", NAMESPACE, now) is not None
    assert anchor.allows("john@vendor", NAMESPACE, now) is None


def test_malformed_authorized_keys_options_are_refused(signed: tuple[Path, str, bytes], tmp_path: Path) -> None:
    _, key, _ = signed
    f = tmp_path / "ak"
    for bad in (f"principals=jane@vendor {key}", f'principals="jane@vendor",bogus {key}',
                f'principals="jane@vendor", {key}', f'principals="a",principals="b" {key}'):
        f.write_text(bad + "\n")
        with pytest.raises(TrustFileError, match=r"ak:1:"):
            read_authorized_keys(f)
    f.write_text(f'restrict,from="10.0.0.0/8",principals="jane@vendor",expiry-time="{PAST}" {key}\n')
    (anchor,) = read_authorized_keys(f)
    assert anchor.allows("jane@vendor", NAMESPACE, dt.datetime.now(dt.timezone.utc)) is not None  # expired


def test_oversized_trust_file_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "allowed"
    with open(f, "wb") as fh:
        fh.truncate(64 << 20)  # sparse: costs no disk
    with pytest.raises(TrustFileError, match="byte limit"):
        read_allowed_signers(f)

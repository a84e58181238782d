"""Manifest, SSHSIG signing and verification with real OpenSSH keys; every signature kvgate writes
is also checked by the real ``ssh-keygen -Y verify`` and the manifest by the real ``sha256sum -c``,
as a customer without kvgate would."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from harness.report import legacy, render_gate_reports, sshsig
from harness.report.manifest import MANIFEST
from harness.report.sign import SIGNOFF, SignError, sign, verify
from harness.report.signer import signer_id
from harness.report.trust import TrustFileError, read_allowed_signers, read_authorized_keys

from .conftest import make_result, write_gate

NAMES = {"ascii": "Jane Doe", "latin1": "Jörg Müller", "cjk": "张伟"}


def _run(argv: list[str], cwd: Path | None = None, stdin: bytes | None = None,
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(argv, cwd=cwd, input=stdin, capture_output=True, timeout=60, env=env)  # noqa: S603


def _ssh_key(tmp: Path, name: str, passphrase: str = "", ktype: str = "ed25519") -> Path:
    path = tmp / name
    extra = ["-b", "2048"] if ktype == "rsa" else []
    _run(["ssh-keygen", "-q", "-t", ktype, *extra, "-N", passphrase, "-C", name, "-f", str(path)]).check_returncode()
    return path


def _pub(key: Path) -> str:
    return " ".join(Path(str(key) + ".pub").read_text().split()[:2])


@pytest.fixture
def gate(tmp_path: Path) -> Path:
    d = write_gate(tmp_path / "camp-1" / "G3", make_result())
    (d / "evidence" / "fio").mkdir(parents=True)
    (d / "evidence" / "fio" / "node-a-read.json").write_text('{"jobs": []}')
    (d / "evidence" / "candidate").mkdir()
    (d / "evidence" / "candidate" / "c1.jsonl").write_text('{"ttft": 0.1}\n')
    (d / "evidence" / "was-empty").mkdir()  # an empty directory at signing time is listed in SIGNOFF.json
    render_gate_reports(d)  # after the evidence, as a pipeline does: the report lists its files
    return d


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    tmp = tmp_path_factory.mktemp("keys")
    return {"vendor": _ssh_key(tmp, "vendor"), "customer": _ssh_key(tmp, "customer"),
            "attacker": _ssh_key(tmp, "attacker"), "rsa": _ssh_key(tmp, "rsa", ktype="rsa"),
            "ecdsa": _ssh_key(tmp, "ecdsa", ktype="ecdsa")}


def _allowed(tmp: Path, lines: list[str]) -> Path:
    path = tmp / "allowed_signers"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _both_signed(gate: Path, keys: dict[str, Path], vendor: str = "Jane Doe",
                 customer: str = "张伟") -> tuple[Path, Path]:
    v = sign(gate, keys["vendor"], vendor, "vendor")
    c = sign(gate, keys["customer"], customer, "customer")
    return v, c


def _anchors_for(tmp: Path, keys: dict[str, Path], vendor: str = "Jane Doe", customer: str = "张伟") -> Path:
    return _allowed(tmp, [f"{signer_id(vendor)}@vendor {_pub(keys['vendor'])}",
                          f"{signer_id(customer)}@customer {_pub(keys['customer'])}"])


def _stock_check(gate: Path, allowed: Path, sig: Path, principal: str) -> subprocess.CompletedProcess[bytes]:
    """The README's command for a customer with only coreutils and OpenSSH."""
    assert _run(["sha256sum", "--strict", "-c", MANIFEST], cwd=gate).returncode == 0
    return _run(["ssh-keygen", "-Y", "verify", "-f", str(allowed), "-I", principal, "-n", sshsig.NAMESPACE,
                 "-s", str(sig)], stdin=(gate / MANIFEST).read_bytes())


def test_signer_id_mapping_is_safe_and_distinct() -> None:
    assert signer_id("Jane Doe") == "jane-doe"
    ids = {signer_id(n) for n in (*NAMES.values(), "Jorg Muller", "王芳")}
    assert len(ids) == 5
    assert signer_id("Jörg Müller").startswith("jorg-muller-") and signer_id("张伟").startswith("u-")
    for n in NAMES.values():
        assert all(c.isascii() and (c.isalnum() or c in "-._") for c in signer_id(n))


@pytest.mark.parametrize("kind", sorted(NAMES))
def test_every_signature_verifies_with_stock_openssh(gate: Path, keys: dict[str, Path], tmp_path: Path,
                                                      kind: str) -> None:
    name = NAMES[kind]
    v, c = _both_signed(gate, keys, vendor=name, customer="Carl")
    allowed = _anchors_for(tmp_path, keys, vendor=name, customer="Carl")
    assert v.name == f"vendor-{signer_id(name)}.sig"
    for sig, principal in ((v, f"{signer_id(name)}@vendor"), (c, "carl@customer")):
        proc = _stock_check(gate, allowed, sig, principal)
        assert proc.returncode == 0, proc.stderr
        # ...and the principal binds the role: the vendor's signature is not the customer's.
        wrong = principal.replace("@vendor", "@customer") if "@vendor" in principal else principal.replace(
            "@customer", "@vendor")
        assert _stock_check(gate, allowed, sig, wrong).returncode != 0
    meta = json.loads(v.with_suffix(".json").read_text(encoding="utf-8"))
    assert meta["signer"] == name
    report = verify(gate, anchors=read_allowed_signers(allowed))
    assert report.ok and report.status == "VERIFIED", report.lines()
    assert {s.signer for s in report.signatures} == {name, "Carl"}


def test_rsa_and_ecdsa_keys_verify_in_process(gate: Path, keys: dict[str, Path], tmp_path: Path) -> None:
    sign(gate, keys["rsa"], "Rita", "vendor")
    sign(gate, keys["ecdsa"], "Ed", "customer")
    allowed = _allowed(tmp_path, [f"rita@vendor {_pub(keys['rsa'])}", f"ed@customer {_pub(keys['ecdsa'])}"])
    assert verify(gate, anchors=read_allowed_signers(allowed)).ok
    assert _stock_check(gate, allowed, gate / "signatures" / "vendor-rita.sig", "rita@vendor").returncode == 0


def test_hardware_key_signature_format_verifies(tmp_path: Path) -> None:
    """An sk-ssh-ed25519 signature (the format a FIDO key returns, built here from a software key
    as PROTOCOL.u2f describes it) verifies in-process and with ssh-keygen."""
    key = Ed25519PrivateKey.generate()
    raw = key.public_key().public_bytes_raw()
    s = sshsig._string
    app = b"ssh:"
    key_blob = s(b"sk-ssh-ed25519@openssh.com") + s(raw) + s(app)
    message = b"manifest bytes\n"
    data = sshsig._signed_data(sshsig.NAMESPACE, "sha512", message)
    flags, counter = b"\x01", (7).to_bytes(4, "big")
    sk_sig = key.sign(hashlib.sha256(app).digest() + flags + counter + hashlib.sha256(data).digest())
    sig_blob = s(b"sk-ssh-ed25519@openssh.com") + s(sk_sig) + flags + counter
    blob = (b"SSHSIG" + (1).to_bytes(4, "big") + s(key_blob) + s(sshsig.NAMESPACE.encode()) + s(b"")
            + s(b"sha512") + s(sig_blob))
    body = base64.b64encode(blob).decode()
    armored = "\n".join([sshsig.ARMOR_BEGIN, *(body[i:i + 70] for i in range(0, len(body), 70)),
                         sshsig.ARMOR_END]) + "\n"
    parsed = sshsig.parse_armored(armored)
    assert sshsig.verify(parsed, message) is None
    assert sshsig.verify(parsed, message + b"x") is not None
    (tmp_path / "sig").write_text(armored)
    allowed = _allowed(tmp_path, [f"hw@vendor {parsed.openssh_public}"])
    proc = _run(["ssh-keygen", "-Y", "verify", "-f", str(allowed), "-I", "hw@vendor", "-n", sshsig.NAMESPACE,
                 "-s", str(tmp_path / "sig")], stdin=message)
    assert proc.returncode == 0, proc.stderr


def test_agent_key_signs(gate: Path, keys: dict[str, Path], tmp_path: Path) -> None:
    sock = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL,  # noqa: S603,S607
                             stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            if sock.exists():
                break
            subprocess.run(["sleep", "0.05"], check=True)  # noqa: S603,S607
        env = {**os.environ, "SSH_AUTH_SOCK": str(sock)}
        assert _run(["ssh-add", str(keys["vendor"])], env=env).returncode == 0
        pub_only = tmp_path / "vendor.pub"
        shutil.copy(str(keys["vendor"]) + ".pub", pub_only)
        old = os.environ.get("SSH_AUTH_SOCK")
        os.environ["SSH_AUTH_SOCK"] = str(sock)
        try:
            sig = sign(gate, pub_only, "Jane Doe", "vendor")
        finally:
            if old is None:
                os.environ.pop("SSH_AUTH_SOCK")
            else:
                os.environ["SSH_AUTH_SOCK"] = old
    finally:
        agent.terminate()
        agent.wait(timeout=10)
    allowed = _anchors_for(tmp_path, keys)
    assert _stock_check(gate, allowed, sig, "jane-doe@vendor").returncode == 0


def test_passphrase_key_via_env_only(gate: Path, tmp_path: Path) -> None:
    key = _ssh_key(tmp_path, "pp", passphrase="s3cret pass")
    with pytest.raises(SignError, match="passphrase"):
        sign(gate, key, "Jane Doe", "vendor")
    sig = sign(gate, key, "Jane Doe", "vendor", passphrase=b"s3cret pass")
    assert "s3cret" not in sig.read_text() and "s3cret" not in sig.with_suffix(".json").read_text()
    with pytest.raises(SignError):
        sign(gate, key, "Jane Doe", "vendor", passphrase=b"wrong")


def test_attacker_resign_is_never_verified(gate: Path, keys: dict[str, Path], tmp_path: Path) -> None:
    """The issue's attack: change result.json, re-sign as both parties with one attacker key."""
    _both_signed(gate, keys)
    allowed = _anchors_for(tmp_path, keys)
    result = json.loads((gate / "result.json").read_text())
    result["verdict"] = "PASS"
    (gate / "result.json").write_text(json.dumps(result))
    shutil.rmtree(gate / "signatures")
    (gate / MANIFEST).unlink()
    sign(gate, keys["attacker"], "Jane Doe", "vendor")
    sign(gate, keys["attacker"], "张伟", "customer")
    without = verify(gate)
    assert not without.ok and without.status == "INTEGRITY OK, SIGNERS NOT AUTHENTICATED"
    report = verify(gate, anchors=read_allowed_signers(allowed))
    assert not report.ok and report.missing_roles == ["vendor", "customer"]
    assert all(s.trusted is False and "not in the trust anchors" in s.trust_reason for s in report.signatures)
    assert "NOT VERIFIED" in report.lines()[-1]


def test_key_bound_to_role_and_missing_role_named(gate: Path, keys: dict[str, Path], tmp_path: Path) -> None:
    sign(gate, keys["customer"], "张伟", "vendor")  # the customer's key signing as vendor
    allowed = _anchors_for(tmp_path, keys)
    report = verify(gate, anchors=read_allowed_signers(allowed))
    assert not report.ok and report.missing_roles == ["vendor", "customer"]
    assert "is bound to" in report.signatures[0].trust_reason
    sign(gate, keys["vendor"], "Jane Doe", "vendor")
    report = verify(gate, anchors=read_allowed_signers(allowed))
    assert report.missing_roles == ["customer"]
    assert "MISSING  role customer: no valid signature by a key trusted for it" in report.lines()
    assert verify(gate, anchors=read_allowed_signers(allowed), roles=["vendor"]).ok


def test_one_key_cannot_sign_for_both_parties(gate: Path, keys: dict[str, Path], tmp_path: Path) -> None:
    sign(gate, keys["vendor"], "Jane Doe", "vendor")
    sign(gate, keys["vendor"], "Jane Doe", "customer")
    allowed = _allowed(tmp_path, [f"jane-doe@vendor,jane-doe@customer {_pub(keys['vendor'])}"])
    report = verify(gate, anchors=read_allowed_signers(allowed))
    assert not report.ok and report.missing_roles == ["customer"]


def test_deleting_a_signature_fails(gate: Path, keys: dict[str, Path], tmp_path: Path) -> None:
    _, c = _both_signed(gate, keys)
    c.unlink()
    c.with_suffix(".json").unlink()
    report = verify(gate, anchors=read_allowed_signers(_anchors_for(tmp_path, keys)))
    assert not report.ok and report.missing_roles == ["customer"]


def test_renamed_gate_and_statement_binding(gate: Path, keys: dict[str, Path], tmp_path: Path) -> None:
    _both_signed(gate, keys)
    anchors = read_allowed_signers(_anchors_for(tmp_path, keys))
    assert verify(gate, anchors=anchors).ok
    moved = gate.rename(gate.parent / "G2")
    report = verify(moved, anchors=anchors)
    assert not report.ok and any("directory is named G2" in p for p in report.problems)
    moved.rename(gate)
    statement = json.loads((gate / SIGNOFF).read_text())
    assert statement["campaign"] == "camp-1" and statement["gate"] == "G3"


@pytest.mark.parametrize("tamper,finding", [
    (lambda d: (d / "signatures" / "notes.txt").write_text("x"), "signatures/notes.txt (not a signature file)"),
    (lambda d: (d / "evidence" / "empty").mkdir(), "evidence/empty/ (empty directory)"),
    (lambda d: (d / "evidence" / "was-empty").rmdir(), "evidence/was-empty/ (empty directory)"),
    (lambda d: (d / "evidence" / "extra.json").write_text("{}"), "evidence/extra.json"),
    (lambda d: (d / "evidence" / "candidate" / "c1.jsonl").write_text("{}"), "evidence/candidate/c1.jsonl"),
])
def test_every_entry_is_accounted_for(gate: Path, keys: dict[str, Path], tmp_path: Path, tamper, finding) -> None:  # type: ignore[no-untyped-def]
    _both_signed(gate, keys)
    tamper(gate)
    report = verify(gate, anchors=read_allowed_signers(_anchors_for(tmp_path, keys)))
    assert not report.ok
    assert finding in report.extra + report.changed + report.missing


def test_symlink_and_fifo_refused_without_blocking(gate: Path, keys: dict[str, Path], tmp_path: Path) -> None:
    (gate / "evidence" / "link").symlink_to(gate / "result.json")
    with pytest.raises(SignError, match="symlink"):
        sign(gate, keys["vendor"], "Jane Doe", "vendor")
    (gate / "evidence" / "link").unlink()
    _both_signed(gate, keys)
    os.mkfifo(gate / "evidence" / "pipe")
    (gate / "signatures" / "x.sig").symlink_to("/etc/passwd")
    # A FIFO nobody writes to would block a reader forever; the test has a timeout of its own.
    report = verify(gate, anchors=read_allowed_signers(_anchors_for(tmp_path, keys)))
    assert not report.ok
    assert set(report.refused) == {"evidence/pipe (FIFO)", "signatures/x.sig (symlink)"}


def test_tampered_signature_and_manifest(gate: Path, keys: dict[str, Path], tmp_path: Path) -> None:
    v, _ = _both_signed(gate, keys)
    anchors = read_allowed_signers(_anchors_for(tmp_path, keys))
    lines = v.read_text().splitlines()
    mid = lines[2]
    lines[2] = mid[:10] + ("A" if mid[10] != "A" else "B") + mid[11:]
    v.write_text("\n".join(lines) + "\n")
    report = verify(gate, anchors=anchors)
    assert not report.ok and not report.signatures[1].valid
    # a re-generated manifest (after editing a file) breaks every signature over the old one
    _, _ = _both_signed(gate, keys)
    (gate / "report.md").write_text("edited")
    (gate / MANIFEST).unlink()
    from harness.report.sign import write_manifest
    write_manifest(gate)
    report = verify(gate, anchors=anchors)
    assert not report.ok and all(not s.valid for s in report.signatures)


def test_signing_changed_files_refused(gate: Path, keys: dict[str, Path]) -> None:
    sign(gate, keys["vendor"], "Jane Doe", "vendor")
    (gate / "report.md").write_text("edited")
    with pytest.raises(SignError, match="changed: report.md"):
        sign(gate, keys["customer"], "张伟", "customer")
    render_gate_reports(gate)  # re-rendering is deterministic: the signature survives
    sign(gate, keys["customer"], "张伟", "customer")


def test_legacy_signatures_still_verify(gate: Path, keys: dict[str, Path], tmp_path: Path) -> None:
    from harness.report.sign import write_manifest
    (gate / "evidence" / "was-empty").rmdir()  # without a statement an empty directory is extra
    write_manifest(gate)
    (gate / SIGNOFF).unlink()  # directories signed before had no statement
    (gate / MANIFEST).unlink()
    write_manifest(gate)
    (gate / SIGNOFF).unlink()
    from harness.report.manifest import compute, manifest_text, scan
    text = manifest_text(compute(gate, scan(gate).files))
    (gate / MANIFEST).write_text(text)
    (gate / "signatures").mkdir()
    key = Ed25519PrivateKey.generate()
    raw = key.public_key().public_bytes_raw()
    fields = {"format": legacy.FORMAT, "signer": "Jane Doe", "role": "vendor", "signed_at": "2026-11-01T00:00:00Z",
              "manifest_sha256": hashlib.sha256(text.encode()).hexdigest(),
              "public_key": base64.b64encode(raw).decode()}
    doc = dict(fields, signature=base64.b64encode(key.sign(legacy.statement(fields))).decode())
    (gate / "signatures" / "vendor-Jane_Doe.sig.json").write_text(json.dumps(doc))
    report = verify(gate)
    assert report.signatures[0].valid and report.signatures[0].legacy and report.integrity_ok
    ssh = "ssh-ed25519 " + base64.b64encode(sshsig._string(b"ssh-ed25519") + sshsig._string(raw)).decode()
    anchors = read_allowed_signers(_allowed(tmp_path, [f"jane-doe@vendor {ssh}"]))
    assert verify(gate, anchors=anchors, roles=["vendor"]).ok
    doc["role"] = "customer"
    (gate / "signatures" / "vendor-Jane_Doe.sig.json").write_text(json.dumps(doc))
    assert not verify(gate, anchors=anchors, roles=["vendor"]).signatures[0].valid


def test_trust_files(tmp_path: Path, keys: dict[str, Path]) -> None:
    good = _allowed(tmp_path, ["# comment", f'a@vendor,b@* namespaces="kvgate-report@v1" {_pub(keys["vendor"])}',
                               f'c@vendor valid-before="20000101" {_pub(keys["customer"])}'])
    a, c = read_allowed_signers(good)
    import datetime as dt
    now = dt.datetime.now(dt.timezone.utc)
    assert a.allows("a@vendor", sshsig.NAMESPACE, now) is None
    assert a.allows("b@customer", sshsig.NAMESPACE, now) is None
    assert a.allows("a@customer", sshsig.NAMESPACE, now) is not None
    assert a.allows("a@vendor", "other@v1", now) is not None
    assert "expired" in str(c.allows("c@vendor", sshsig.NAMESPACE, now))
    auth = tmp_path / "authorized_keys"
    auth.write_text(f'principals="x@vendor" {_pub(keys["vendor"])} x\n{_pub(keys["customer"])} bare\n')
    bound, bare = read_authorized_keys(auth)
    assert bound.principals == ("x@vendor",) and bare.principals == ()
    assert "no signer or role" in str(bare.allows("x@vendor", sshsig.NAMESPACE, now))
    bad = tmp_path / "bad"
    bad.write_text("x@vendor ssh-ed25519 !!!\n")
    with pytest.raises(TrustFileError, match=r"bad:1: the key is not base64"):
        read_allowed_signers(bad)
    bad.write_text(f"x@vendor cert-authority {_pub(keys['vendor'])}\n")
    with pytest.raises(TrustFileError, match="cert-authority"):
        read_allowed_signers(bad)


def test_pem_ed25519_key_signs_in_process_and_openssh_verifies(gate: Path, tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization

    key = Ed25519PrivateKey.generate()
    pem = tmp_path / "k.pem"
    pem.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.BestAvailableEncryption(b"pem-pass")))
    with pytest.raises(SignError, match="passphrase"):
        sign(gate, pem, "Jane Doe", "vendor")
    sig = sign(gate, pem, "Jane Doe", "vendor", passphrase=b"pem-pass")
    ssh = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()
    allowed = _allowed(tmp_path, [f"jane-doe@vendor {ssh}"])
    assert _stock_check(gate, allowed, sig, "jane-doe@vendor").returncode == 0


def test_a_pdf_printed_after_signing_is_derived_and_a_changed_one_is_not(gate: Path, keys: dict[str, Path],
                                                                           tmp_path: Path) -> None:
    """`kvgate report --pdf` after both parties signed: the PDF is not in the manifest, but it is
    what kvgate prints from the signed report.html, so verify calls it DERIVED and the gate stays
    VERIFIED. The wrong PASS this must not allow: a PDF that says something else (printed from an
    edited HTML while the signed HTML stays untouched), a PDF in a language whose HTML was never
    signed, and a PDF whose signed HTML has since changed are EXTRA, and the gate NOT VERIFIED."""
    from harness.cli.main import run
    from harness.report.pdf import html_to_pdf

    _both_signed(gate, keys)
    anchors = read_allowed_signers(_anchors_for(tmp_path, keys))
    assert run(["report", str(gate), "--pdf"]) == 0
    report = verify(gate, anchors=anchors)
    assert report.status == "VERIFIED" and report.extra == [] and report.derived == ["report.pdf"], report.lines()
    assert any(line.startswith("DERIVED  report.pdf") for line in report.lines())

    signed_html = (gate / "report.html").read_text(encoding="utf-8")
    assert ">FAIL<" in signed_html
    (gate / "report.pdf").write_bytes(html_to_pdf(signed_html.replace(">FAIL<", ">PASS<")))
    report = verify(gate, anchors=anchors)
    assert report.status == "NOT VERIFIED" and report.derived == [], report.lines()
    assert "EXTRA    report.pdf: not what the signed report.html prints to (not in the manifest)" in report.lines()

    (gate / "report.pdf").unlink()
    (gate / "report.zh.pdf").write_bytes(html_to_pdf(signed_html))  # no zh HTML was signed
    report = verify(gate, anchors=anchors)
    assert report.extra == ["report.zh.pdf"] and report.status == "NOT VERIFIED"

    (gate / "report.zh.pdf").unlink()
    (gate / "report.pdf").write_bytes(html_to_pdf(signed_html + "<!-- edited -->"))
    (gate / "report.html").write_text(signed_html + "<!-- edited -->", encoding="utf-8")
    report = verify(gate, anchors=anchors)
    assert report.changed == ["report.html"] and report.extra == ["report.pdf"] and report.derived == []

"""``kvgate report``, ``kvgate sign`` and ``kvgate verify`` through the real CLI entry point."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest

from harness.cli.main import run
from harness.report.sign import MANIFEST
from harness.report.signer import signer_id

from .conftest import make_result, write_gate


@pytest.fixture
def campaign(tmp_path: Path) -> Path:
    camp = tmp_path / "reports" / "camp-9"
    for gate in ("G1", "G2", "G3"):
        r = make_result()
        r.gate = gate
        r.campaign = camp.name  # an untouched campaign: its results name its directory
        write_gate(camp / gate, r)
    return camp


def _key(tmp_path: Path, passphrase: str = "") -> Path:
    path = tmp_path / f"key{len(list(tmp_path.glob('key*')))}"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", passphrase, "-f", str(path)],  # noqa: S603,S607
                   check=True, capture_output=True, timeout=30)
    return path


def test_report_rerenders_every_gate_and_the_campaign(campaign: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["report", str(campaign)]) == 0
    printed = capsys.readouterr().out.split()
    for gate in ("G1", "G2", "G3"):
        for name in ("result.json", "report.html", "report.md", "junit.xml"):
            assert str(campaign / gate / name) in printed
            assert (campaign / gate / name).is_file()
    assert printed[-3:] == [str(campaign / n) for n in ("report.html", "report.md", "junit.xml")]


def test_report_one_gate_and_unknown_gate(campaign: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["report", str(campaign), "--gate", "G2"]) == 0
    assert (campaign / "G2" / "report.html").is_file() and not (campaign / "G3" / "report.html").exists()
    capsys.readouterr()
    assert run(["report", str(campaign), "--gate", "G7"]) == 2
    assert "no gate G7 with a result.json (gates present: G1, G2, G3)" in capsys.readouterr().err


def test_report_by_name_and_errors(campaign: Path, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("harness.cli.cmd_report.reports_dir", lambda: campaign.parent)
    assert run(["report", "camp-9"]) == 0
    capsys.readouterr()
    assert run(["report", "nope"]) == 2
    assert "nope: no such campaign directory" in capsys.readouterr().err
    (campaign / "G2" / "result.json").write_text('{"schema_version": 7}')
    assert run(["report", str(campaign)]) == 2  # the other gates and the campaign are still rendered
    captured = capsys.readouterr()
    assert "schema_version] is 7" in captured.err and "Traceback" not in captured.err
    assert str(campaign / "G3" / "report.html") in captured.out
    assert str(campaign / "report.html") in captured.out


def test_sign_and_verify_commands(campaign: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    gate = campaign / "G3"
    assert run(["report", str(campaign)]) == 0
    vendor_key = _key(tmp_path)
    customer_key = _key(tmp_path, passphrase="hunter2-pass")
    capsys.readouterr()
    assert run(["sign", str(gate), "--key", str(vendor_key), "--signer", "Vera", "--role", "vendor"]) == 0
    monkeypatch.setenv("KVGATE_KEY_PASS", "hunter2-pass")
    assert run(["sign", str(gate), "--key", str(customer_key), "--signer", "张伟", "--role", "customer",
                "--passphrase-env", "KVGATE_KEY_PASS"]) == 0
    out = capsys.readouterr()
    cid = signer_id("张伟")
    assert "signatures/vendor-vera.sig" in out.out and f"signatures/customer-{cid}.sig" in out.out
    assert f"-I {cid}@customer -n kvgate-report@v1" in out.out
    for secret in ("hunter2", vendor_key.read_text().splitlines()[1]):
        assert secret not in out.out + out.err

    assert run(["verify", str(gate)]) == 3  # integrity only: nobody said whose keys these are
    assert "INTEGRITY OK, SIGNERS NOT AUTHENTICATED" in capsys.readouterr().out
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(f"vera@vendor {Path(str(vendor_key) + '.pub').read_text()}"
                       f"{cid}@customer {Path(str(customer_key) + '.pub').read_text()}")
    assert run(["verify", str(gate), "--allowed-signers", str(allowed)]) == 0
    text = capsys.readouterr().out
    assert text.strip().endswith("VERIFIED: G3 verdict FAIL; 1 label(s) above")  # the verdict beside the word
    assert "vendor Vera" in text and "customer 张伟" in text
    assert run(["verify", str(campaign), "--allowed-signers", str(allowed)]) == 1  # G1, G2 unsigned
    text = capsys.readouterr().out
    assert "NOT VERIFIED: G1 (NOT VERIFIED), G2 (NOT VERIFIED)" in text

    (gate / "report.md").write_text("changed")
    assert run(["verify", str(gate), "--json", "--allowed-signers", str(allowed)]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False and doc["changed"] == ["report.md"]
    assert {s["role"]: s["valid"] for s in doc["signatures"]} == {"vendor": True, "customer": True}
    assert (gate / MANIFEST).is_file()


def test_sign_verify_usage_errors(campaign: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gate = campaign / "G1"
    key = _key(tmp_path)
    assert run(["sign", str(gate), "--key", str(key), "--signer", "x", "--role", "auditor"]) == 2
    assert run(["sign", str(gate), "--key", str(key), "--signer", "x", "--role", "vendor",
                "--passphrase-env", "KVGATE_UNSET_VAR_FOR_TEST"]) == 2
    assert "KVGATE_UNSET_VAR_FOR_TEST is not set" in capsys.readouterr().err
    assert run(["verify", str(tmp_path / "absent")]) == 2
    assert run(["verify", str(gate)]) == 1  # a gate that was never signed does not verify
    assert "never signed" in capsys.readouterr().out
    bad = tmp_path / "trusted"
    bad.write_text("ssh-rsa nonsense\n")
    assert run(["verify", str(gate), "--trusted-keys", str(bad)]) == 2
    assert f"{bad}:1: the key's body is not a ssh-rsa key" in capsys.readouterr().err


@pytest.mark.parametrize("command", ["report", "sign", "verify"])
def test_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run([command, "--help"]) == 0
    assert "usage: kvgate " + command in capsys.readouterr().out


def test_campaign_sign_off_and_verify(campaign: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every gate signed by both parties, the campaign page rendered after: VERIFIED; the page
    names each gate's manifest hash, so a gate re-signed later shows."""
    vendor, customer = _key(tmp_path), _key(tmp_path)
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(f"vera@vendor {Path(str(vendor) + '.pub').read_text()}"
                       f"carl@customer {Path(str(customer) + '.pub').read_text()}")
    assert run(["report", str(campaign)]) == 0
    for gate in ("G1", "G2", "G3"):
        assert run(["sign", str(campaign / gate), "--key", str(vendor), "--signer", "Vera", "--role", "vendor"]) == 0
        assert run(["sign", str(campaign / gate), "--key", str(customer), "--signer", "Carl",
                    "--role", "customer"]) == 0
    capsys.readouterr()
    assert run(["verify", str(campaign), "--allowed-signers", str(allowed)]) == 1
    out = capsys.readouterr().out
    assert "does not match the gates as they are now" in out
    assert "campaign.manifest is not signed, but its gates are" in out  # issue 50: the set needs signing too
    for key, name, role in ((vendor, "Vera", "vendor"), (customer, "Carl", "customer")):
        assert run(["sign", str(campaign), "--key", str(key), "--signer", name, "--role", role]) == 0
    assert run(["report", str(campaign), "--gate", "G1"]) == 0  # re-renders G1 (unchanged) and the page
    html = (campaign / "report.html").read_text()
    for gate in ("G1", "G2", "G3"):
        digest = hashlib.sha256((campaign / gate / MANIFEST).read_bytes()).hexdigest()
        assert f"<code>{digest}</code>" in html
    assert "Customer contract 2026-11 accepts 20%" in html  # every override with its reason
    capsys.readouterr()
    assert run(["verify", str(campaign), "--allowed-signers", str(allowed)]) == 0
    assert "VERIFIED (every gate and the campaign page)" in capsys.readouterr().out

    (campaign / "G2" / "signatures" / "customer-carl.sig").unlink()
    (campaign / "G2" / "signatures" / "customer-carl.json").unlink()
    assert run(["verify", str(campaign), "--allowed-signers", str(allowed)]) == 1
    out = capsys.readouterr().out
    assert "MISSING  role customer" in out and "NOT VERIFIED: G2 (NOT VERIFIED)" in out

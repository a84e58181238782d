"""A campaign cannot lose, gain or swap a gate and still verify (issue 27, item 5), end to end
through the CLI: gates written as a gate run leaves them, rendered with ``kvgate report``, signed
by two parties with real ssh-keygen keys (gates, and the campaign's set of gates), checked with
``kvgate verify`` and by hand with coreutils and OpenSSH alone."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.store.schema import Verdict
from tests.report.conftest import make_result, write_gate
from tests.report.test_pdf import _lab_cert
from tests.support.signing import cli, ssh_key


class Signed:
    """Campaign 'camp-1': G2 PASS, G3 FAIL, each gate and the set signed by vendor and customer."""

    def __init__(self, root: Path, capsys: pytest.CaptureFixture[str], *, sign_set: bool = True,
                 operator: str = "op") -> None:
        self.capsys = capsys
        self.camp = root / "reports" / "camp-1"
        for gate, verdict in (("G2", Verdict.PASS), ("G3", Verdict.FAIL)):
            r = make_result(with_data=False, verdict=verdict)
            r.gate, r.campaign, r.operator = gate, "camp-1", operator
            write_gate(self.camp / gate, r)
        assert cli(capsys, "report", str(self.camp))[0] == 0  # as a gate run leaves them
        self.vendor, self.customer = ssh_key(root, "vendor"), ssh_key(root, "customer")
        self.allowed = root / "allowed_signers"
        self.allowed.write_text(f"vera@vendor {Path(str(self.vendor) + '.pub').read_text().strip()}\n"
                                f"carl@customer {Path(str(self.customer) + '.pub').read_text().strip()}\n")
        for gate in ("G2", "G3"):
            self.sign(self.camp / gate)
        if sign_set:
            self.sign(self.camp)
        assert cli(capsys, "report", str(self.camp), "--gate", "G2")[0] == 0  # the page names the signed set

    def sign(self, target: Path) -> None:
        for key, name, role in ((self.vendor, "Vera", "vendor"), (self.customer, "Carl", "customer")):
            code, out = cli(self.capsys, "sign", str(target), "--key", str(key), "--signer", name, "--role", role)
            assert code == 0, out

    def verify(self, camp: Path | None = None) -> tuple[int, str]:
        return cli(self.capsys, "verify", str(camp or self.camp), "--allowed-signers", str(self.allowed))


@pytest.fixture
def signed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Signed:
    return Signed(tmp_path, capsys)


def test_untouched_signed_campaign_verifies_and_by_hand(signed: Signed) -> None:
    code, out = signed.verify()
    assert code == 0, out
    assert (f"campaign {signed.camp}: VERIFIED (every gate and the campaign page): G2 PASS, G3 FAIL; "
            "3 label(s)\n") in out  # two threshold overrides, and no journal of runs
    assert "LABEL    no journal.jsonl" in out
    manifest = (signed.camp / "campaign.manifest").read_text()
    assert "# campaign camp-1\n" in manifest and "# gate G2 PASS\n" in manifest and "# gate G3 FAIL\n" in manifest
    # the README's commands: coreutils and OpenSSH only
    subprocess.run(["sha256sum", "--strict", "-c", "campaign.manifest"], cwd=signed.camp, check=True,
                   capture_output=True)
    for sig, principal in (("vendor-vera.sig", "vera@vendor"), ("customer-carl.sig", "carl@customer")):
        with (signed.camp / "campaign.manifest").open("rb") as fh:
            proc = subprocess.run(["ssh-keygen", "-Y", "verify", "-f", str(signed.allowed), "-I", principal,  # noqa: S603,S607
                                   "-n", "kvgate-report@v1", "-s", str(signed.camp / "signatures" / sig)],
                                  stdin=fh, capture_output=True)
        assert proc.returncode == 0, proc.stderr


def test_failing_gate_removed_and_page_rerendered_is_refused(signed: Signed) -> None:
    shutil.rmtree(signed.camp / "G3")
    assert cli(signed.capsys, "report", str(signed.camp))[0] == 0
    code, out = signed.verify()
    assert code == 1, out
    assert "gate G3 removed: campaign.manifest lists it (FAIL)" in out
    # rewriting the manifest by hand breaks its signatures
    text = (signed.camp / "campaign.manifest").read_text()
    (signed.camp / "campaign.manifest").write_text(text[:text.index("# gate G3")])
    code, out = signed.verify()
    assert code == 1, out
    assert "BAD      campaign.manifest signatures/vendor-vera.sig" in out
    assert "BAD      campaign.manifest signatures/customer-carl.sig" in out


def test_gate_added_or_replaced_is_refused(signed: Signed, tmp_path: Path) -> None:
    other = Signed(tmp_path / "other", signed.capsys, operator="someone else")
    shutil.rmtree(signed.camp / "G2")
    shutil.copytree(other.camp / "G2", signed.camp / "G2")  # a G2 of the same name, signed, but another one
    r = make_result(with_data=False, verdict=Verdict.PASS)
    r.gate, r.campaign = "G4", "camp-1"
    write_gate(signed.camp / "G4", r)
    code, out = signed.verify()
    assert code == 1, out
    assert "gate G2 replaced" in out and "gate G4 added: it is not in campaign.manifest" in out


def test_fifo_result_and_renamed_directory_are_refused(signed: Signed) -> None:
    (signed.camp / "G3" / "result.json").unlink()
    os.mkfifo(signed.camp / "G3" / "result.json")
    code, out = signed.verify()
    assert code == 1, out
    assert "G3/result.json is not a regular file" in out and "gate G3 removed" in out
    (signed.camp / "G3" / "result.json").unlink()
    shutil.rmtree(signed.camp / "G3")
    renamed = signed.camp.parent / "camp-2"
    signed.camp.rename(renamed)
    code, out = signed.verify(renamed)
    assert code == 1, out
    assert "G2/result.json is of campaign 'camp-1' but the directory is named 'camp-2'" in out
    assert "campaign.manifest names campaign 'camp-1' but the directory is named 'camp-2'" in out


def test_signed_pdf_of_another_manifest_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    camp = Signed(tmp_path, capsys, sign_set=False)  # the set is bound by the signed campaign PDF alone
    certs = tmp_path / "certs"
    certs.mkdir()
    vendor = _lab_cert(certs, "v", "Vera", p12_pass=None)
    code, out = cli(capsys, "sign", str(camp.camp), "--pdf", "--key-pem", str(vendor["key"]),
                    "--cert", str(vendor["crt"]), "--signer", "Vera", "--role", "vendor")
    assert code == 0, out
    code, out = camp.verify()  # with trust anchors, signed gates need their set signed (issue 50)
    assert code == 1 and "campaign.manifest is not signed, but its gates are" in out, out
    code, out = cli(capsys, "verify", str(camp.camp))  # without anchors: integrity only
    assert code == 3 and "campaign.manifest is not signed" in out, out
    shutil.rmtree(camp.camp / "G3")
    assert cli(capsys, "report", str(camp.camp))[0] == 0  # rewrites the unsigned manifest and the page
    code, out = cli(capsys, "verify", str(camp.camp))
    assert code == 1, out
    assert "report.pdf belongs to another campaign manifest" in out


def test_failing_gate_removed_with_the_campaign_signatures_is_refused(signed: Signed) -> None:
    """Issue 50 item 2, the red team's repro: G2 PASS + G3 FAIL, every gate and the campaign
    signed by both roles; `rm -rf G3 signatures; kvgate report; kvgate verify` was VERIFIED."""
    shutil.rmtree(signed.camp / "G3")
    shutil.rmtree(signed.camp / "signatures")
    assert cli(signed.capsys, "report", str(signed.camp))[0] == 0
    assert "G3" not in (signed.camp / "campaign.manifest").read_text()  # rewritten: nothing signed it any more
    code, out = signed.verify()
    assert code == 1, out
    assert "campaign.manifest is not signed, but its gates are (by customer, vendor)" in out
    assert "NOT VERIFIED" in out and "VERIFIED (every gate" not in out


def test_campaign_signed_by_fewer_roles_than_its_gates_is_refused(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    camp = Signed(tmp_path, capsys, sign_set=False)
    code, out = cli(capsys, "sign", str(camp.camp), "--key", str(camp.vendor), "--signer", "Vera", "--role", "vendor")
    assert code == 0, out
    code, out = camp.verify()
    assert code == 1, out
    assert "campaign.manifest: role customer has no valid signature by a key trusted for it" in out
    # a role beyond the required ones: the gates' signers must sign the set too
    code, out = cli(capsys, "verify", str(camp.camp), "--allowed-signers", str(camp.allowed), "--roles", "vendor")
    assert code == 1, out
    assert "role customer has no valid signature by a key trusted for it (a gate of this campaign is signed" in out


def test_report_keeps_a_signed_campaign_manifest(signed: Signed) -> None:
    before = (signed.camp / "campaign.manifest").read_bytes()
    shutil.rmtree(signed.camp / "G3")
    assert cli(signed.capsys, "report", str(signed.camp))[0] == 0
    assert (signed.camp / "campaign.manifest").read_bytes() == before

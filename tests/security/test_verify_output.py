"""What `kvgate verify` prints (issue 53 item 5), through the installed `kvgate` in a subprocess so
nothing of pytest's own warning filters hides what a user would see: each gate's verdict beside
VERIFIED, no library warning or logged traceback (pyHanko's CryptographyDeprecationWarning, its
certificate-path tracebacks), and no "EXTRA report.pdf" for a PDF `kvgate report --pdf` added."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.report.sign import write_manifest
from harness.store.schema import Verdict
from tests.report.conftest import make_result, write_gate
from tests.report.test_pdf import _lab_cert
from tests.support.signing import cli, sign_both

KVGATE = Path(sys.executable).parent / "kvgate"


def _kvgate(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(KVGATE), *argv], capture_output=True, text=True, timeout=300)  # noqa: S603


def test_verify_names_the_verdict_and_is_quiet(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    camp = tmp_path / "camp-1"
    r = make_result(with_data=False, verdict=Verdict.INCONCLUSIVE, exit_code=3)
    r.gate, r.campaign = "G3", "camp-1"
    write_gate(camp / "G3", r)
    assert cli(capsys, "report", str(camp))[0] == 0
    write_manifest(camp / "G3")  # as a gate run leaves it
    code, out = cli(capsys, "report", str(camp), "--pdf")
    assert code == 0, out
    done = _kvgate("verify", str(camp / "G3"))
    assert "report.pdf" not in done.stdout, done.stdout  # the manifest covers the PDF report added
    cert = _lab_cert(tmp_path, "v", "Vera", p12_pass=None)
    code, out = cli(capsys, "sign", str(camp / "G3"), "--pdf", "--key-pem", str(cert["key"]),
                    "--cert", str(cert["crt"]), "--signer", "Vera", "--role", "vendor")
    assert code == 0, out
    allowed = sign_both(capsys, tmp_path, camp / "G3")
    # the README's order: the campaign page is rendered after the gates are signed, then its set signed
    code, out = cli(capsys, "report", str(camp), "--pdf")
    assert code == 0 and "kept" in out, out  # the gate's signed PDF is left as it is
    sign_both(capsys, tmp_path, camp)
    done = _kvgate("verify", str(camp), "--allowed-signers", str(allowed))
    assert done.stderr == "" or "Warning" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert "Warning" not in done.stdout and "Traceback" not in done.stdout
    assert "VERIFIED: G3 verdict INCONCLUSIVE" in done.stdout, done.stdout
    assert "VERIFIED (every gate and the campaign page): G3 INCONCLUSIVE" in done.stdout, done.stdout
    assert "EXTRA" not in done.stdout
    assert done.returncode == 0, done.stdout + done.stderr


def test_report_does_not_launder_a_changed_evidence_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`kvgate report` covers the files it renders, never an evidence file changed since the gate ran."""
    camp = tmp_path / "camp-1"
    r = make_result(with_data=False, verdict=Verdict.PASS, exit_code=0)
    r.gate, r.campaign = "G1", "camp-1"
    gate = write_gate(camp / "G1", r)
    (gate / "evidence").mkdir()
    (gate / "evidence" / "facts.json").write_text('{"cpu_model": "real"}')
    assert cli(capsys, "report", str(camp))[0] == 0
    write_manifest(gate)  # as a gate run leaves it
    (gate / "evidence" / "facts.json").write_text('{"cpu_model": "edited"}')
    assert cli(capsys, "report", str(camp), "--lang", "zh")[0] == 0
    code, out = cli(capsys, "verify", str(gate))
    assert code == 1, out
    assert "CHANGED  evidence/facts.json" in out and "EXTRA    report.zh.html (not in the manifest)" in out

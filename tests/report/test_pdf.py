"""The sign-off PDF (WeasyPrint, print CSS) and its signatures by both parties (pyHanko), checked by
poppler's ``pdftotext`` and ``pdfsig`` and by pyHanko's validator; the lab certificates are made
with the README's ``openssl`` commands. Rendered once per module: layout is slow on two cores."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.cli.main import run
from harness.report import render_campaign_report, render_gate_reports
from harness.report.pdf import REPORT_PDF, write_pdf
from harness.report.pdfsign import check_pdf

from .conftest import make_result, write_gate


def _run(argv: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, **kw)  # noqa: S603


def _pages(pdf: Path) -> list[str]:
    text = _run(["pdftotext", "-layout", str(pdf), "-"]).stdout
    return text.split("\f")[:-1]


def _stamped_fields(pdf: Path) -> set[str]:
    """The signature fields of page one that carry a visible appearance over a non-empty box."""
    from pyhanko.pdf_utils.reader import PdfFileReader

    with open(pdf, "rb") as fh:
        reader = PdfFileReader(fh, strict=False)
        out = set()
        for annot in reader.root["/Pages"]["/Kids"][0].get_object().get("/Annots", []):
            a = annot.get_object()
            x1, y1, x2, y2 = (float(v) for v in a.get("/Rect", [0, 0, 0, 0]))
            if a.get("/FT") == "/Sig" and "/AP" in a and x2 - x1 > 100 and y2 - y1 > 20:
                out.add(str(a["/T"]))
        return out


def _lab_cert(tmp: Path, name: str, cn: str, *, p12_pass: str | None) -> dict[str, Path]:
    """The README's commands for a self-signed lab certificate."""
    key, crt = tmp / f"{name}.key", tmp / f"{name}.crt"
    _run(["openssl", "req", "-utf8", "-x509", "-newkey", "rsa:3072", "-sha256", "-days", "730", "-nodes",
          "-subj", f"/CN={cn}/O=kvgate lab", "-keyout", str(key), "-out", str(crt)]).check_returncode()
    out = {"key": key, "crt": crt}
    if p12_pass is not None:
        p12 = tmp / f"{name}.p12"
        _run(["openssl", "pkcs12", "-export", "-inkey", str(key), "-in", str(crt), "-out", str(p12),
              "-passout", "env:P12_PASS"], env={**os.environ, "P12_PASS": p12_pass}).check_returncode()
        out["p12"] = p12
    return out


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    root = tmp_path_factory.mktemp("pdf")
    camp = root / "camp-1"
    gate = write_gate(camp / "G3", make_result())
    render_gate_reports(gate)
    pdf = write_pdf(gate)
    g1 = make_result()
    g1.gate = "G1"
    write_gate(camp / "G1", g1)
    render_campaign_report(camp)
    yield {"root": root, "gate": gate, "pdf": pdf, "campaign": camp}


def test_page_one_is_the_sign_off_page(rendered: dict[str, Path]) -> None:
    pages = _pages(rendered["pdf"])
    first = pages[0]
    assert re.search(r"^\s*FAIL\s", first, re.M) and "ttft_p50_reduction is INCONCLUSIVE" in first
    assert "Headline: blocker checks" in first and "System under test" in first and "Sign-off" in first
    for check_id in ("ttft_p50_reduction", "read_bandwidth", "candidate_failed_requests"):
        assert check_id in first
    assert "throughput_gain_plausible" not in first  # advisory: in the checks table after page one
    assert "Vendor" in first and "Customer" in first and "date (YYYY-" in first
    for n, page in enumerate(pages, 1):  # running header and page numbers on every page
        assert "kvgate · camp-1 · G3 · FAIL" in page.split("\n", 3)[0] + page.split("\n", 3)[1]
        assert f"Page {n} / {len(pages)}" in page
    info = _run(["pdfinfo", str(rendered["pdf"])]).stdout
    assert "A4" in info


def test_no_heading_stranded_and_no_chart_split(rendered: dict[str, Path]) -> None:
    import weasyprint

    html = (rendered["gate"] / "report.html").read_text(encoding="utf-8")
    doc = weasyprint.HTML(string=html).render()
    figure_pages: dict[str, set[int]] = {}
    for n, page in enumerate(doc.pages):
        lines: list[tuple[float, list[str]]] = []

        def walk(box: Any, tags: list[str], n: int = n, lines: list[tuple[float, list[str]]] = lines) -> None:
            tag = getattr(box, "element_tag", None)
            element = getattr(box, "element", None)
            if tag == "figure" and element is not None:
                figure_pages.setdefault(element.get("id"), set()).add(n)
            if type(box).__name__ == "LineBox":
                lines.append((box.position_y + box.height, tags))
            for child in getattr(box, "children", None) or []:
                if type(child).__name__ != "MarginBox":
                    walk(child, tags + [tag] if tag else tags)

        walk(page._page_box, [])
        last = max(lines, key=lambda item: item[0])[1]
        assert not {"h1", "h2", "h3"} & set(last), f"page {n + 1} ends with a heading"
    assert figure_pages and all(len(p) == 1 for p in figure_pages.values()), figure_pages


def test_campaign_pdf(rendered: dict[str, Path]) -> None:
    pdf = write_pdf(rendered["campaign"])
    pages = _pages(pdf)
    first = pages[0]
    assert "kvgate campaign camp-1" in first and "Sign-off" in first and "G1" in first and "G3" in first
    assert "Threshold overrides" in first and "Customer contract 2026-11" in first
    assert "System under test" in first and "Workload" in first and "Qwen/Qwen3-8B" in first  # page one: the sheet
    # then the baselines and who ran it, and one page per gate summary, each with every one of its checks
    assert "Baselines" in "".join(pages[:2]) and "When and by whom" in "".join(pages[:2])
    assert len(pages) == 4, len(pages)
    for page, gate in zip(pages[2:], ("G1", "G3")):
        assert re.search(rf"^\s*{gate}: Main gate", page, re.M), page[:300]
        assert "ttft_p50_reduction" in page and "throughput_gain_plausible" in page
        assert "kvgate campaign camp-1" not in page


def test_both_parties_sign_the_pdf_then_the_manifest(rendered: dict[str, Path],
                                                     capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    tmp = rendered["root"] / "certs"
    tmp.mkdir()
    gate = rendered["root"] / "signed" / "G3"
    shutil.copytree(rendered["gate"], gate)
    vendor = _lab_cert(tmp, "vendor", "Jane Doe", p12_pass="p12-secret")
    customer = _lab_cert(tmp, "customer", "张伟", p12_pass=None)
    monkeypatch.setenv("KVGATE_P12_PASS", "p12-secret")
    render_gate_reports(gate, "zh")  # the README's flow with both languages: one command per party signs both
    assert run(["sign", str(gate), "--pdf", "--p12", str(vendor["p12"]), "--passphrase-env", "KVGATE_P12_PASS",
                "--signer", "Jane Doe", "--role", "vendor", "--decision", "accept"]) == 0
    assert run(["sign", str(gate), "--pdf", "--key-pem", str(customer["key"]), "--cert", str(customer["crt"]),
                "--signer", "张伟", "--role", "customer", "--decision", "reject",
                "--comment", "复测 read_bandwidth"]) == 0
    out = capsys.readouterr().out
    assert "p12-secret" not in out
    assert out.count("signed    ") == 4 and "report.zh.pdf as customer 张伟" in out, out
    pdf = gate / REPORT_PDF
    for signed in (pdf, gate / "report.zh.pdf"):  # each party's signature sits in its cell on page one
        assert [s.field for s in check_pdf(signed, [vendor["crt"], customer["crt"]])] == ["kvgate-vendor",
                                                                                          "kvgate-customer"]
        assert _stamped_fields(signed) == {"kvgate-vendor", "kvgate-customer"}

    sigs = check_pdf(pdf, [vendor["crt"], customer["crt"]])
    assert [s.field for s in sigs] == ["kvgate-vendor", "kvgate-customer"]
    assert all(s.intact and s.valid and s.trusted and s.covers_document for s in sigs), sigs
    assert "张伟" in sigs[1].signer
    assert not any(s.trusted for s in check_pdf(pdf, [])), "no trust root: not trusted"

    out = _run(["pdfsig", str(pdf)]).stdout
    assert out.count("Signature Validation: Signature is Valid.") == 2, out
    assert "Jane Doe" in out

    # the PDF is in the manifest the parties then sign with OpenSSH; PDF signing is refused after
    key = tmp / "ssh_vendor"
    _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)]).check_returncode()
    assert run(["sign", str(gate), "--key", str(key), "--signer", "Jane Doe", "--role", "vendor"]) == 0
    assert "report.pdf" in (gate / "MANIFEST.sha256").read_text()
    capsys.readouterr()
    assert run(["sign", str(gate), "--pdf", "--p12", str(vendor["p12"]), "--passphrase-env", "KVGATE_P12_PASS",
                "--signer", "Jane Doe", "--role", "vendor"]) == 2
    assert "Sign the PDF first" in capsys.readouterr().err
    assert run(["report", str(gate), "--pdf"]) == 0  # a signed PDF is kept, not re-rendered
    assert check_pdf(pdf, [vendor["crt"]])[0].intact

    ckey = tmp / "ssh_customer"
    _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(ckey)]).check_returncode()
    assert run(["sign", str(gate), "--key", str(ckey), "--signer", "张伟", "--role", "customer"]) == 0
    allowed = tmp / "allowed_signers"
    cid = next(p.name for p in (gate / "signatures").glob("customer-*.sig"))[len("customer-"):-len(".sig")]
    allowed.write_text(f"jane-doe@vendor {Path(str(key) + '.pub').read_text()}"
                       f"{cid}@customer {Path(str(ckey) + '.pub').read_text()}")
    capsys.readouterr()
    both = ["--pdf-trust", str(vendor["crt"]), "--pdf-trust", str(customer["crt"])]
    assert run(["verify", str(gate), "--allowed-signers", str(allowed), *both]) == 0  # en and zh PDFs
    assert run(["verify", str(gate), "--allowed-signers", str(allowed), "--pdf-trust", str(vendor["crt"])]) == 1
    assert "no valid PDF signature of the customer by a trusted certificate" in capsys.readouterr().out

    # any change to the signed bytes fails both validators
    data = bytearray(pdf.read_bytes())
    i = data.index(b"/Title") + 8
    data[i] = ord("X") if data[i] != ord("X") else ord("Y")
    bad = gate.parent / "tampered.pdf"
    bad.write_bytes(bytes(data))
    assert not any(s.intact for s in check_pdf(bad, [vendor["crt"], customer["crt"]]))
    out = _run(["pdfsig", str(bad)]).stdout
    assert "Signature is Valid." not in out and out.count("Signature Validation:") == 2, out


def test_sign_prints_no_library_warning_and_still_reports_errors(rendered: dict[str, Path]) -> None:
    """`kvgate sign --pdf` as a user runs it (its own process, warnings as Python prints them):
    nothing but kvgate's own lines; a bad key still fails with its reason on stderr."""
    gate = rendered["root"] / "quiet" / "G3"
    shutil.copytree(rendered["gate"], gate)
    tmp = rendered["root"] / "quiet-certs"
    tmp.mkdir()
    cert = _lab_cert(tmp, "v", "Jane Doe", p12_pass=None)
    other = _lab_cert(tmp, "o", "Other", p12_pass=None)
    kvgate = str(Path(sys.executable).with_name("kvgate"))
    done = _run([kvgate, "sign", str(gate), "--pdf", "--key-pem", str(cert["key"]), "--cert", str(cert["crt"]),
                 "--signer", "Jane Doe", "--role", "vendor"])
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert "signed    " in done.stdout
    bad = _run([kvgate, "sign", str(gate), "--pdf", "--key-pem", str(other["key"]), "--cert", str(cert["crt"]),
                "--signer", "Jane Doe", "--role", "customer"])
    assert bad.returncode == 2 and bad.stderr.startswith("kvgate: error:"), bad.stderr
    assert "Warning" not in bad.stderr and "Traceback" not in bad.stderr


def test_zh_pdf_embeds_a_cjk_font(rendered: dict[str, Path]) -> None:
    gate = rendered["gate"]
    render_gate_reports(gate, "zh")
    pdf = write_pdf(gate, "zh")
    assert pdf.name == "report.zh.pdf"
    first = _pages(pdf)[0]
    for word in ("要点：阻断检查", "被测系统", "负载", "签字确认", "厂商方", "ttft_p50_reduction", "FAIL"):
        assert word in first, word
    fonts = _run(["pdffonts", str(pdf)]).stdout
    assert re.search(r"Noto-Sans-CJK-SC\s+CID .* yes yes yes", fonts), fonts  # embedded, subset, with a ToUnicode map
    assert "kvgate · camp-1 · G3 · FAIL" in first


def test_campaign_pdf_signed_and_verified(rendered: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    camp = rendered["root"] / "copy" / "camp-1"  # the page names its campaign directory
    shutil.copytree(rendered["campaign"], camp)
    tmp = rendered["root"] / "camp-certs"
    tmp.mkdir()
    vendor = _lab_cert(tmp, "v", "Jane Doe", p12_pass=None)
    customer = _lab_cert(tmp, "c", "Carl", p12_pass=None)
    for cert, name, role in ((vendor, "Jane Doe", "vendor"), (customer, "Carl", "customer")):
        assert run(["sign", str(camp), "--pdf", "--key-pem", str(cert["key"]), "--cert", str(cert["crt"]),
                    "--signer", name, "--role", role]) == 0
    # a campaign's set of gates (campaign.manifest) is signed with an SSH key, not a PDF certificate's
    assert run(["sign", str(camp), "--key", str(vendor["key"]), "--signer", "x", "--role", "vendor"]) == 2
    assert "PEM keys must be Ed25519" in capsys.readouterr().err
    trust = ["--pdf-trust", str(vendor["crt"]), "--pdf-trust", str(customer["crt"])]
    # the gates here are unsigned: the campaign does not verify, and says which parts fail; its
    # page and signed PDF are fine
    assert run(["verify", str(camp), *trust]) == 1
    out = capsys.readouterr().out
    assert out.strip().endswith("NOT VERIFIED: G1 (NOT VERIFIED), G3 (NOT VERIFIED)")
    assert f"{camp}/G1/report.pdf: missing (PDF signatures were asked for)" in out
    assert f"PROBLEM  {camp}/report" not in out
    assert [s.ok for s in check_pdf(camp / "report.pdf", [vendor["crt"], customer["crt"]])] == [True, True]

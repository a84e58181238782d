"""#29 item 5, PDFs: a received ``report.pdf`` is inflated within kvgate's limits (``report/pdfread.py``),
in ``kvgate verify``, the campaign check and the second party's ``kvgate sign --pdf``.

The finding: a PDF flate bomb. pyHanko's own defaults let one object stream inflate to 100 times its
compressed size (up to 64 MiB) and a document to 100 times the file (12.8 GB for a 128 MiB PDF); a
1 MB signed PDF whose last revision puts a page in a 512 MiB object stream made verify inflate
~52 MB of it before pyHanko refused, with an error naming neither kvgate's limit nor what to do.
Now one stream inflates at most 16 MiB and a PDF 64 MiB, and the refusal names the file and both limits."""

from __future__ import annotations

import io
import subprocess
import sys
import tracemalloc
import zlib
from pathlib import Path

import pytest

from harness.report.documents import pdf_problems
from harness.report.pdfread import MAX_STREAM_BYTES, PdfBombError
from harness.report.pdfsign import check_pdf, sign_pdf
from tests.store.test_history_import_export import _gate_result, _write
from tests.support.procs import HANG_GUARD_S

LIMIT_TEXT = "16 MiB inflated from one stream, 64 MiB from the whole PDF"


def _signed_pdf(path: Path, tmp: Path) -> None:
    """A one-page PDF signed by a lab certificate (the README's openssl command, with an EC key: faster)."""
    from pyhanko.pdf_utils import generic
    from pyhanko.pdf_utils.writer import PdfFileWriter

    key, crt = tmp / "lab.key", tmp / "lab.crt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",  # noqa: S603, S607
                    "-sha256", "-days", "2", "-nodes",
                    "-subj", "/CN=Lab/O=kvgate lab", "-keyout", str(key), "-out", str(crt)],
                   check=True, capture_output=True, timeout=60)
    writer = PdfFileWriter()
    box = generic.ArrayObject([generic.NumberObject(v) for v in (0, 0, 200, 200)])
    writer.insert_page(generic.DictionaryObject({generic.NameObject("/Type"): generic.NameObject("/Page"),
                                                 generic.NameObject("/MediaBox"): box}))
    out = io.BytesIO()
    writer.write(out)
    path.write_bytes(out.getvalue())
    sign_pdf(path, role="vendor", signer_name="Lab", key_pem=key, cert=crt)


def _deflated_spaces(first: bytes, mib: int) -> bytes:
    """A zlib stream of ``first`` then ``mib`` MiB of spaces, built from a few MiB of compression:
    once the window is all spaces, every sync-flushed MiB compresses to the same bytes."""
    comp = zlib.compressobj(9)
    block = b" " * (1 << 20)
    head = comp.compress(first) + comp.compress(block) + comp.flush(zlib.Z_SYNC_FLUSH)
    steady = [comp.compress(block) + comp.flush(zlib.Z_SYNC_FLUSH) for _ in range(2)]
    assert steady[0] == steady[1]
    data = head + steady[0] * (mib - 1) + comp.flush()
    return data


def _xref_row(kind: int, a: int, b: int) -> bytes:
    return bytes([kind]) + a.to_bytes(4, "big") + b.to_bytes(2, "big")


def _add_object_stream_bomb(path: Path, inflated: int) -> None:
    """Append a revision that moves the page into an object stream padded with ``inflated`` bytes of
    spaces (compressed ~1000:1): checking the signature reads the page, so the stream is inflated."""
    from pyhanko.pdf_utils.reader import PdfFileReader

    data = path.read_bytes()
    reader = PdfFileReader(io.BytesIO(data), strict=False)
    size, prev = int(reader.trailer["/Size"]), reader.last_startxref
    root = reader.trailer.raw_get("/Root").idnum
    pages = reader.root.raw_get("/Pages").idnum
    page = reader.root["/Pages"]["/Kids"].raw_get(0).idnum
    head = f"{page} 0 ".encode()
    enc = _deflated_spaces(head + f"<< /Type /Page /MediaBox [0 0 200 200] /Parent {pages} 0 R >>".encode(),
                           inflated >> 20)
    out = bytearray(data if data.endswith(b"\n") else data + b"\n")
    stream_at = len(out)
    out += (f"{size} 0 obj\n<< /Type /ObjStm /N 1 /First {len(head)} /Filter /FlateDecode /Length {len(enc)} >>\n"
            "stream\n").encode() + enc + b"\nendstream\nendobj\n"
    xref_at = len(out)
    rows = sorted([(page, _xref_row(2, size, 0)), (size, _xref_row(1, stream_at, 0)),
                   (size + 1, _xref_row(1, xref_at, 0))])
    body = b"".join(r for _, r in rows)
    index = " ".join(f"{n} 1" for n, _ in rows)
    out += (f"{size + 1} 0 obj\n<< /Type /XRef /W [1 4 2] /Index [{index}] /Size {size + 2} /Root {root} 0 R "
            f"/Prev {prev} /Length {len(body)} >>\nstream\n").encode() + body + b"\nendstream\nendobj\n"
    out += f"startxref\n{xref_at}\n%%EOF\n".encode()
    path.write_bytes(bytes(out))


@pytest.fixture(scope="module")
def bomb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("pdfbomb")
    pdf = tmp / "report.pdf"
    assert zlib.decompress(_deflated_spaces(b"x", 3)) == b"x" + b" " * (3 << 20)  # the builder is sound
    _signed_pdf(pdf, tmp)
    _add_object_stream_bomb(pdf, 512 << 20)
    assert pdf.stat().st_size < 1 << 20
    return pdf


def test_a_flate_bomb_is_refused_in_bounded_memory(bomb: Path) -> None:
    tracemalloc.start()
    try:
        with pytest.raises(PdfBombError) as ei:
            check_pdf(bomb, [])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert str(bomb) in str(ei.value) and LIMIT_TEXT in str(ei.value)
    assert f"{MAX_STREAM_BYTES} bytes" in str(ei.value)
    assert peak < 3 * MAX_STREAM_BYTES, peak  # one capped stream, its input and a copy (was ~100 MB)


def test_verify_reports_the_bomb_as_a_finding_naming_file_and_limit(bomb: Path, tmp_path: Path) -> None:
    gate = _write(tmp_path / "reports", "c1", "G3", _gate_result("c1", "G3", "2026-01-01T01:00:00Z", 0.3))
    (gate / "report.pdf").write_bytes(bomb.read_bytes())
    assert pdf_problems(gate, ["vendor"], None) == [
        f"{gate / 'report.pdf'}: refused: its compressed streams inflate past kvgate's limit ({LIMIT_TEXT}): "
        f"a decompression bomb, or not a kvgate report (Decoded stream data exceeds the limit of "
        f"{MAX_STREAM_BYTES} bytes.)"]
    proc = subprocess.run([sys.executable, "-m", "harness.cli.main", "verify", str(gate)],  # noqa: S603
                          capture_output=True, text=True, timeout=HANG_GUARD_S, cwd=tmp_path)
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr and LIMIT_TEXT in proc.stdout and "report.pdf" in proc.stdout


def test_the_second_party_signing_a_received_bomb_is_refused(bomb: Path, tmp_path: Path) -> None:
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(bomb.read_bytes())
    lab = bomb.parent
    with pytest.raises(PdfBombError, match="16 MiB inflated from one stream"):
        sign_pdf(pdf, role="customer", signer_name="X", key_pem=lab / "lab.key", cert=lab / "lab.crt")
    assert pdf.read_bytes() == bomb.read_bytes()

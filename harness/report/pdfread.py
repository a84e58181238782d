"""Opening a PDF kvgate did not write (a received ``report.pdf``: verify, the campaign check, the
second party's ``kvgate sign --pdf``) within bounds.

The file is read whole only up to ``MAX_PDF_BYTES``, and pyHanko inflates its compressed streams
(object streams, cross-reference streams, metadata) under kvgate's limits: at most
``MAX_STREAM_BYTES`` from one stream and ``MAX_DECODED_BYTES`` from the whole document, where
pyHanko's own defaults allow 256 MiB a stream and 100 times the file size a document (12.8 GB for a
128 MiB file). A kvgate report inflates a few tens of KB when verified (measured: 44 KB for a
signed 72-hour soak report), so the limits are far above any honest PDF. Past a limit,
``PdfBombError`` names the file and the limit.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness.errors import InputError

MAX_PDF_BYTES = 128 << 20  # the largest PDF read (a report with its charts is a few MB)
MAX_STREAM_BYTES = 16 << 20
MAX_DECODED_BYTES = 64 << 20
LIMITS_TEXT = f"{MAX_STREAM_BYTES >> 20} MiB inflated from one stream, {MAX_DECODED_BYTES >> 20} MiB from the whole PDF"


class PdfBombError(InputError):
    """A received PDF whose compressed streams inflate past kvgate's limits."""


def decode_limits() -> Any:
    from pyhanko.pdf_utils.decode_limits import DecodeLimits, DocumentDecodeBudget, StreamDecodeLimits

    return DecodeLimits(per_stream=StreamDecodeLimits(max_output_size=MAX_STREAM_BYTES),
                        document_budget=DocumentDecodeBudget(base_allowance=MAX_DECODED_BYTES, max_ratio=0))


@contextmanager
def bounded(pdf: Path) -> Iterator[None]:
    """Turns pyHanko's decode-limit error, raised anywhere in the block, into ``PdfBombError``."""
    from pyhanko.pdf_utils.misc import PdfDecodeLimitError

    try:
        yield
    except PdfDecodeLimitError as exc:
        raise PdfBombError(f"{pdf}: refused: its compressed streams inflate past kvgate's limit "
                           f"({LIMITS_TEXT}): a decompression bomb, or not a kvgate report ({exc})") from None


def read_pdf_bytes(pdf: Path) -> bytes:
    """The bytes of a received PDF: a regular file, not a link, at most ``MAX_PDF_BYTES``."""
    from harness.report.manifest import read_regular

    return read_regular(Path(pdf), max_bytes=MAX_PDF_BYTES)


def open_pdf(pdf: Path, data: bytes | None = None) -> Any:
    """A pyHanko reader for ``pdf`` (or its bytes ``data``) under kvgate's decode limits. Use it
    inside ``bounded(pdf)``: streams are inflated lazily, as they are read."""
    from pyhanko.pdf_utils.reader import PdfFileReader

    raw = read_pdf_bytes(pdf) if data is None else data
    with bounded(pdf):
        return PdfFileReader(io.BytesIO(raw), strict=False, decode_limits=decode_limits())

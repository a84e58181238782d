"""Fuzz targets of #29 (item 9): the soak-window reader, the HTTP probe's reading of an answer,
allowed_signers parsing, export cell writing and trace validation. Each takes arbitrary input and
lets only its own typed error out: never a crash, a hang or unbounded memory."""

from __future__ import annotations

import csv
import gzip
import socket
import tempfile
import threading
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from harness.engines import httpprobe
from harness.load.errors import LoadInputError
from harness.load.hashtrace import parse_trace
from harness.load.soakwindow import WindowFileError, iter_window_records, summarise_file
from harness.report.trust import TrustFileError, parse_allowed_signers
from harness.store.export import write_tables

RECORD = ('{"status":"ok","error_kind":null,"ttft_ms":12.5,"tpot_ms":3.0,"e2el_ms":40.0,'
          '"input_tokens":100,"output_tokens":10}\n')
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
TRACE = '{"timestamp": 0, "input_length": 16, "output_length": 1, "hash_ids": [1]}\n'
TMP = Path(tempfile.mkdtemp(prefix="kvgate-fuzz-"))


def _mutate(text: str, edits: list[tuple[int, int, str]]) -> str:
    for pos, cut, ins in edits:
        pos %= len(text) + 1
        text = text[:pos] + ins + text[pos + cut:]
    return text


_edits = st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 8), st.text(max_size=12)), max_size=6)


@given(st.one_of(st.binary(max_size=2000), st.builds(lambda e: _mutate(RECORD * 3, e).encode(), _edits)),
       st.booleans())
def test_soak_window_reader(data: bytes, gz: bool) -> None:
    path = TMP / ("w.jsonl.gz" if gz else "w.jsonl")
    path.write_bytes(gzip.compress(data) if gz else data)
    for read in (lambda: summarise_file(1, path, 0.0, 60.0, max_line=512, max_bytes=4096),
                 lambda: list(iter_window_records(path, max_line=512, max_bytes=4096))):
        try:
            read()
        except WindowFileError:
            pass


class _OneShot:
    """A loopback server that answers every connection with the bytes it is given, then closes."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.answer = b""
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            conn, _ = self.sock.accept()
            with conn:
                try:
                    conn.recv(65536)
                    conn.sendall(self.answer)
                except OSError:
                    pass


_SERVER: list[_OneShot] = []


@given(st.one_of(st.binary(max_size=3000),
                 st.builds(lambda e: _mutate("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", e).encode(),
                           _edits),
                 st.builds(lambda e: _mutate("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                             "5\r\nhello\r\n0\r\n\r\n", e).encode(), _edits)))
def test_http_probe_reader(answer: bytes) -> None:
    if not _SERVER:
        _SERVER.append(_OneShot())
    srv = _SERVER[0]
    srv.answer = answer
    got = httpprobe.probe(f"http://127.0.0.1:{srv.sock.getsockname()[1]}/metrics", "GET", None, 5.0,
                          max_bytes=1024)
    assert ("error" in got) != ("status" in got)


@given(st.one_of(st.text(max_size=400),
                 st.builds(lambda e: _mutate(f'a@v,!b@v namespaces="kvgate-*",valid-before="20991231" {KEY} c\n', e),
                           _edits)))
def test_allowed_signers_parser(text: str) -> None:
    try:
        parse_allowed_signers(text, "fuzz")
    except TrustFileError:
        pass


@given(st.lists(st.text(max_size=30), min_size=1, max_size=5))
def test_export_cells_are_never_formulas(cells: list[str]) -> None:
    out = TMP / "export"
    (f,) = write_tables({"t": [{f"c{i}": v for i, v in enumerate(cells)}]}, out, "csv")
    with f.open(newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    for value in rows[1]:
        assert not value.startswith(("=", "+", "-", "@", "\t", "\r"))


@given(st.one_of(st.text(max_size=600), st.builds(lambda e: _mutate(TRACE * 3, e), _edits)))
def test_trace_validation(text: str) -> None:
    path = TMP / "trace.jsonl"
    path.write_bytes(text.encode("utf-8", "replace"))
    try:
        reqs = parse_trace(path, block_size=16)
    except LoadInputError:
        return
    times = [r.timestamp_s for r in reqs]
    assert times == sorted(times) and all(0 <= t <= 30 * 86400 for t in times)

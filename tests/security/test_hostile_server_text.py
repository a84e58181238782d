"""#50 item 3: text a server sends (a reason phrase, an error body) reaches the terminal escaped.

The red team's server answered ``HTTP 500`` with a reason phrase and an error body holding a
screen clear, a window title (OSC), a colour, a CSI in its one-byte form and U+202E (a bidi
override that prints what follows reversed); ``kvgate load run`` printed them raw in its
``http_500: ... e.g.`` summary line. Here a real HTTP server on loopback sends them, and every
byte kvgate prints is checked; ``records.jsonl`` keeps the text as received (JSON-escaped).
``kvgate gate``'s progress lines (``harness.progress``) carry a node's text the same way.
"""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.progress import Progress
from tests.support.procs import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = "\x1b[2J\x1b]0;owned\x07\x1b[32mPASS\u202eLIAF\x9b0m"
RAW = ("\x1b", "\x9b", "\x07", "\u202e")


class HostileServer:
    """Answers every request with ``HTTP/1.1 500 <hostile reason>`` and a hostile JSON error body."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.threads: list[threading.Thread] = []
        self.accepter = threading.Thread(target=self._accept, daemon=True)
        self.accepter.start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # closed
            t = threading.Thread(target=self._answer, args=(conn,), daemon=True)
            t.start()
            self.threads.append(t)

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(HANG_GUARD_S)
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            body = json.dumps({"error": {"message": "engine said " + HOSTILE}}, ensure_ascii=False).encode()
            head = (f"HTTP/1.1 500 Internal{HOSTILE}\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
            conn.sendall(head + body)

    def close(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept() (close alone does not)
        self.sock.close()
        self.accepter.join(HANG_GUARD_S)
        for t in self.threads:
            t.join(HANG_GUARD_S)


@pytest.fixture()
def hostile_server() -> Iterator[HostileServer]:
    srv = HostileServer()
    try:
        yield srv
    finally:
        srv.close()


def test_load_run_prints_a_hostile_http_500_escaped(hostile_server: HostileServer, tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "harness.cli.main", "load", "run", "--endpoint",  # noqa: S603
                           hostile_server.url, "--model", "m", "--input-len", "4", "--output-len", "2",
                           "--num-requests", "2", "--no-warmup", "--out", str(out)],
                          capture_output=True, text=True, timeout=HANG_GUARD_S, cwd=ROOT)
    assert proc.returncode == 4, proc.stderr  # every request failed: an infrastructure fault
    printed = proc.stdout + proc.stderr
    assert not [c for c in RAW if c in printed], "a raw control or bidi character reached the terminal"
    assert not [c for c in printed if 0x80 <= ord(c) <= 0x9f]
    [line] = [x for x in proc.stdout.splitlines() if x.startswith("http_500:")]
    assert "e.g. HTTP 500 Internal\\x1b[2J" in line and "\\u202eLIAF" in line, line
    records = [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]
    assert records and all(HOSTILE in r["error"] for r in records)  # kept as received


@pytest.mark.parametrize("tty", [False, True])
def test_gate_progress_lines_escape_a_nodes_text(tty: bool) -> None:
    stream = io.StringIO()
    stream.isatty = lambda: tty  # type: ignore[method-assign]
    with Progress("G2 sweep", total=2, stream=stream, interval=0) as p:
        p.update(1, "ray-a: " + HOSTILE)
        p.update(1, "done\r\nVERIFIED")
    text = stream.getvalue()
    assert not [c for c in RAW if c in text]
    assert "ray-a: \\x1b[2J" in text and "\\u202eLIAF" in text and "done\\x0d\\x0aVERIFIED" in text
    assert not [x for x in text.splitlines() if x.startswith("VERIFIED")]


def test_gate_outcome_prints_a_nodes_fault_text_escaped(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """A fault carries a node's output tail (``last lines of stderr``): printed line by line, each
    escaped, the layout kept."""
    from types import SimpleNamespace

    from harness.cli.outcome import print_outcome
    from tests.store.test_history_import_export import _gate_result

    result = _gate_result("c1", "G2", "2026-01-01T01:00:00Z", 0.3)
    result.faults = [f"ray-b: the load generator failed\n  last lines of stderr:\n    {HOSTILE}\r\nVERIFIED"]
    print_outcome(SimpleNamespace(gate="G2", result=result, verdict=result.verdict, exit_code=4,  # type: ignore[arg-type]
                                  gate_dir=tmp_path, journal_head="0" * 64))
    out = capsys.readouterr().out
    assert not [c for c in RAW if c in out]
    assert "fault: ray-b: the load generator failed\n    last lines of stderr:\n      \\x1b[2J" in out
    assert not [x for x in out.splitlines() if x.startswith("VERIFIED")]

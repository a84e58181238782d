"""#29 item 5: what a node, an engine or a received file sends is read within limits, and each
limit's error names the file or host and the limit.

The findings: a 510 KB gzip soak window of one 512 MiB line took 1.07 GB in ``summarise_file``;
``httpprobe.probe`` had no overall deadline (a server dripping a line every 2 s held it 30 s and
more) and no size cap (a 256 MB body took 1 GB); ``pull_lines`` doubled its chunk without limit and
command output was uncapped; verify read a 512 MB sparse MANIFEST whole (1.6 GB)."""

from __future__ import annotations

import http.server
import subprocess
import sys
import threading
import time
import tracemalloc
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.agent.bundle import build_zipapp
from harness.agent.remote import AgentLoadError, pull_lines
from harness.engines import httpprobe
from harness.load.soakwindow import WindowFileError, iter_window_records, summarise_file
from harness.pipelines.g4.soakverify import verify_windows
from harness.remote import local as local_executor
from harness.remote.base import OutputTooLarge
from harness.remote.local import LocalExecutor
from harness.report.manifest import MAX_READ_BYTES, ManifestError, read_regular
from tests.support.procs import HANG_GUARD_S


def _bomb(path: Path, total: int, line: bytes = b"") -> None:
    """A gzip file of ``line`` then ``total`` bytes of 'a' with no newline (compressed ~1000:1)."""
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"a" * (1 << 20)
    with open(path, "wb") as fh:
        fh.write(comp.compress(line))
        for _ in range(total >> 20):
            fh.write(comp.compress(block))
        fh.write(comp.flush())


def test_soak_window_gzip_bomb_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "w1.jsonl.gz"
    _bomb(path, 256 << 20)
    assert path.stat().st_size < 1 << 20
    tracemalloc.start()
    try:
        with pytest.raises(WindowFileError, match=r"w1\.jsonl\.gz: a record line longer than the \d+ byte limit"):
            summarise_file(1, path, 0.0, 60.0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20, peak
    with pytest.raises(WindowFileError, match="byte limit"):
        list(iter_window_records(path))


def test_soak_window_decompressed_size_is_capped(tmp_path: Path) -> None:
    path = tmp_path / "w2.jsonl.gz"
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    path.write_bytes(comp.compress(b'{"status":"ok"}\n' * 100_000) + comp.flush())
    with pytest.raises(WindowFileError, match=r"w2\.jsonl\.gz: decompresses to more than the 1000000 byte limit"):
        summarise_file(2, path, 0.0, 60.0, max_bytes=1_000_000)
    with pytest.raises(WindowFileError, match="1000000 byte limit"):
        list(iter_window_records(path, max_bytes=1_000_000))


def test_unreadable_window_is_reported_not_verified(tmp_path: Path) -> None:
    _bomb(tmp_path / "w1.jsonl.gz", 8 << 20)
    check = verify_windows(tmp_path, [{"index": 1, "file": "w1.jsonl.gz", "started_unix": 0.0,
                                       "ended_unix": 60.0, "requests": 5, "ok": 5}])
    assert check.verified == 0 and len(check.missing) == 1 and "byte limit" in check.missing[0]


class _Handler(http.server.BaseHTTPRequestHandler):
    mode = "drip"
    stop = threading.Event()

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200)
        if self.mode == "big":
            self.send_header("Content-Length", str(8 << 20))
            self.end_headers()
            chunk = b"x" * (1 << 20)
            for _ in range(8):
                self.wfile.write(chunk)
            return
        self.end_headers()
        while not self.stop.wait(0.3):  # a metric line every 0.3 s, forever
            self.wfile.write(b"vllm:x 1\n")
            self.wfile.flush()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def server() -> Iterator[tuple[str, type[_Handler]]]:
    handler = type("H", (_Handler,), {"stop": threading.Event()})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    srv.daemon_threads = True
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}/metrics", handler
    finally:
        handler.stop.set()
        srv.shutdown()
        srv.server_close()
        t.join(10)


def test_http_probe_has_an_overall_deadline(server: tuple[str, type[_Handler]]) -> None:
    url, handler = server
    handler.mode = "drip"
    started = time.monotonic()
    answer = httpprobe.probe(url, "GET", None, 1.5)
    took = time.monotonic() - started
    error = answer.get("error", "")
    assert error.startswith("no complete answer from 127.0.0.1:") and "1.5 s deadline" in error
    assert took < 5.0, took  # the old probe read until the server stopped: never, here


def test_http_probe_caps_the_body(server: tuple[str, type[_Handler]]) -> None:
    url, handler = server
    handler.mode = "big"
    answer = httpprobe.probe(url, "GET", None, 30.0, max_bytes=1 << 20)
    assert "error" in answer and f"larger than the {1 << 20} byte limit" in answer["error"]
    assert "127.0.0.1:" in answer["error"]


def test_command_output_is_capped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_executor, "MAX_OUTPUT_BYTES", 1 << 20)
    ex = LocalExecutor("n1")
    with pytest.raises(OutputTooLarge, match=r"more than the 1048576 byte limit on stdout") as info:
        ex.run(["sh", "-c", "yes kvgate"], timeout=60.0)
    assert info.value.host == "n1"
    assert ex.run(["sh", "-c", "head -c 100000 /dev/zero | tr '\\0' x"], timeout=60).stdout == "x" * 100000


def test_pull_lines_refuses_an_endless_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import harness.agent.remote as agent_remote

    monkeypatch.setattr(agent_remote, "MAX_PULL_LINE", 1 << 20)
    agent = build_zipapp(tmp_path / "agent")
    remote = tmp_path / "records.jsonl"
    remote.write_bytes(b'{"a": 1}\n' + b"x" * (3 << 20))
    local = tmp_path / "copy" / "records.jsonl"
    with pytest.raises(AgentLoadError, match=r"records\.jsonl on n1 has a line longer than the 1048576 byte limit"):
        pull_lines(LocalExecutor("n1"), sys.executable, str(agent), str(remote), local, chunk=1 << 16)
    assert local.read_bytes() == b'{"a": 1}\n'  # what came before the endless line is kept


def test_verify_reads_no_huge_manifest(tmp_path: Path) -> None:
    m = tmp_path / "MANIFEST.sha256"
    with open(m, "wb") as fh:
        fh.truncate(512 << 20)  # sparse: no disk used
    with pytest.raises(ManifestError, match=rf"MANIFEST\.sha256: larger than the {MAX_READ_BYTES} byte limit"):
        read_regular(m)
    gate = tmp_path / "G1"
    gate.mkdir()
    (tmp_path / "MANIFEST.sha256").rename(gate / "MANIFEST.sha256")
    proc = subprocess.run([sys.executable, "-m", "harness.cli.main", "verify", str(gate)],  # noqa: S603
                          capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode not in (0, 5), proc.stderr
    assert "Traceback" not in proc.stderr

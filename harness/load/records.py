"""Per-request records: one JSON object per line, appended and flushed as each request completes.

Keys (every record): ``request_id``, ``phase`` (``measure`` or ``warmup``), ``status`` (``ok``,
``error``, ``cancelled``), ``error_kind``, ``error``, ``http_status``, ``start_ns`` (send time,
``perf_counter_ns`` = CLOCK_MONOTONIC on Linux), ``scheduled_ns`` (open loop / trace: when the
request was due; null in closed loop), ``queue_ms`` (client queueing before the send: waiting for a
concurrency slot, behind schedule, connecting), ``ttft_ms``, ``itl_ms`` (list, one per token after
the first), ``tpot_ms``, ``e2el_ms``, ``input_tokens``, ``output_tokens`` (server ``usage`` when
given), ``counted_tokens`` (counted from chunks), ``chunks``, ``server_usage``, ``connect_ms``,
``retried``, ``token_rule``, ``build_ms`` (time the runner took to build the prompt just before
sending it: a session's next turn, a lazily built long prompt; null when it was built up front);
then the workload keys of the request (``workload``, ``group``,
``user``, ``round``, ``doc``, ``hit``...; sessions: ``session``, ``turn`` (1-based) and
``context_tokens``; a workload key that collides is prefixed ``meta_``).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Optional, TextIO

from harness.load.client import TOKEN_RULE, RequestResult
from harness.load.errors import LoadInputError
from harness.load.spec import RequestSpec

RECORD_KEYS = (
    "request_id", "phase", "status", "error_kind", "error", "http_status", "start_ns", "scheduled_ns",
    "queue_ms", "ttft_ms", "itl_ms", "tpot_ms", "e2el_ms", "input_tokens", "output_tokens",
    "counted_tokens", "chunks", "server_usage", "connect_ms", "retried", "token_rule", "build_ms",
)


def _r(x: Optional[float], nd: int = 4) -> Optional[float]:
    return None if x is None else round(x, nd)


def make_record(res: RequestResult, spec: RequestSpec, *, phase: str, queue_ms: float,
                scheduled_ns: Optional[int], build_ms: Optional[float] = None) -> dict[str, Any]:
    rec: dict[str, Any] = {
        "request_id": res.request_id, "phase": phase, "status": res.status,
        "error_kind": res.error_kind, "error": res.error, "http_status": res.http_status,
        "start_ns": res.start_ns, "scheduled_ns": scheduled_ns, "queue_ms": round(queue_ms, 4),
        "ttft_ms": _r(res.ttft_ms), "itl_ms": [round(x, 4) for x in res.itl_ms],
        "tpot_ms": _r(res.tpot_ms), "e2el_ms": _r(res.e2el_ms),
        "input_tokens": res.input_tokens, "output_tokens": res.output_tokens,
        "counted_tokens": res.counted_tokens, "chunks": res.chunks, "server_usage": res.server_usage,
        "connect_ms": round(res.connect_ms, 4), "retried": res.retried, "token_rule": TOKEN_RULE,
        "build_ms": _r(build_ms),
    }
    for k, v in spec.meta.items():
        rec[f"meta_{k}" if k in rec else k] = v
    if res.text is not None:
        rec["text"] = res.text
    return rec


class RecordWriter:
    """Appends records to a JSONL file, flushed to the OS per line. ``fsync`` runs every ``sync_s``
    on a background thread: it can block for tens of milliseconds, and on the event loop's thread
    that would delay every stream in flight (a TTFT error). ``close`` syncs what is left."""

    def __init__(self, path: Path, *, sync_s: float = 1.0) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fh: Optional[TextIO] = open(path, "a", encoding="utf-8")  # noqa: SIM115
        self._fd = self._fh.fileno()
        self._lock = threading.Lock()
        self._dirty = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sync_loop, args=(sync_s,), name="records-fsync",
                                        daemon=True)
        self._thread.start()
        self.count = 0

    def _sync_loop(self, every: float) -> None:
        while not self._stop.wait(every):
            with self._lock:
                if self._fh is None:
                    return
                dirty, self._dirty = self._dirty, False
                fd = self._fd
                if dirty:
                    os.fsync(fd)

    def write(self, record: dict[str, Any]) -> None:
        fh = self._fh
        if fh is None:
            raise ValueError(f"{self.path}: writer is closed")
        fh.write(json.dumps(record, separators=(",", ":")) + "\n")
        fh.flush()
        self._dirty = True
        self.count += 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        with self._lock:
            if self._fh is not None:
                self._fh.flush()
                os.fsync(self._fh.fileno())
                self._fh.close()
                self._fh = None

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def split_complete_lines(data: bytes) -> tuple[list[dict[str, Any]], int]:
    """Records in the complete lines of ``data`` and how many bytes they span (a torn last line,
    still being written, is left for the next read)."""
    end = data.rfind(b"\n") + 1
    out = []
    for line in data[:end].splitlines():
        if line.strip():
            out.append(json.loads(line))
    return out, end


def iter_records(path: Path) -> Iterator[dict[str, Any]]:
    """Records of a JSONL file. A torn last line (a crash mid-write) is skipped; a bad line
    elsewhere is an error naming the file and line."""
    try:
        lines = path.read_bytes().split(b"\n")
    except OSError as exc:
        raise LoadInputError(f"records {path}: {exc.strerror or exc}") from None
    last = len(lines) - 1
    for no, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            if no == last:
                return  # torn final line: not a complete record
            raise LoadInputError(f"{path}:{no + 1}: not a JSON record") from None
        if not isinstance(obj, dict):
            raise LoadInputError(f"{path}:{no + 1}: expected a JSON object")
        yield obj


def read_records(path: Path) -> list[dict[str, Any]]:
    return list(iter_records(path))

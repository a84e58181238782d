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

A record ``ok`` by its transport but whose TTFT or end-to-end latency is 0, negative, NaN or
infinite (or whose TPOT or an inter-token gap is negative or not finite) holds no measurement: a
broken clock or a bad record file. It is an error record (``status`` ``error``, ``error_kind``
``invalid_timing``, the figure kept and named in ``error``), counted and shown with the other
errors, never a sample: one TTFT of 0 would otherwise sit in a gate's samples as the fastest
request there was (:func:`classify_timing`, applied when a record is made and when one is read).
Two records of one point with the same ``request_id`` make the point's records ambiguous
(:func:`duplicate_ids`): the pipelines count no such point.
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Iterable, Iterator
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


INVALID_TIMING = "invalid_timing"


def _bad_time(v: Any, low_ok: bool) -> bool:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return True
    return v < 0 if low_ok else v <= 0


def _timing_problem(rec: dict[str, Any]) -> Optional[str]:
    # a completed request took some time to its first token and to its last (an absent figure is
    # not one of these: a record of another source may not carry it)
    for key in ("ttft_ms", "e2el_ms"):
        v = rec.get(key)
        if v is not None and _bad_time(v, low_ok=False):
            return f"{key} {v!r} is no measurement (a time must be a finite number > 0)"
    tpot = rec.get("tpot_ms")
    if tpot is not None and _bad_time(tpot, low_ok=True):
        return f"tpot_ms {tpot!r} is no measurement (a finite number >= 0 expected)"
    for i, gap in enumerate(rec.get("itl_ms") or ()):
        if _bad_time(gap, low_ok=True):
            return f"itl_ms[{i}] {gap!r} is no measurement (a finite number >= 0 expected)"
    return None


def classify_timing(rec: dict[str, Any]) -> dict[str, Any]:
    """``rec`` itself, or, when it is ``ok`` but a timing in it is no measurement, a copy turned
    into an error record of kind ``invalid_timing`` (the figures kept, the reason in ``error``)."""
    if rec.get("status") != "ok":
        return rec
    problem = _timing_problem(rec)
    if problem is None:
        return rec
    return {**rec, "status": "error", "error_kind": INVALID_TIMING, "error": problem}


def duplicate_ids(records: Iterable[dict[str, Any]]) -> list[str]:
    """The ``request_id`` values that occur more than once among ``records`` (measured ones), sorted."""
    seen: set[str] = set()
    dup: set[str] = set()
    for rec in records:
        if rec.get("phase", "measure") != "measure":
            continue
        rid = str(rec.get("request_id"))
        (dup if rid in seen else seen).add(rid)
    return sorted(dup)


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
    return classify_timing(rec)


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
        yield classify_timing(obj)


def read_records(path: Path) -> list[dict[str, Any]]:
    return list(iter_records(path))

"""One soak window's figures from its records, in bounded memory (stdlib only: the node agent
summarises each window as it closes; the controller and ``bench/soak.py`` re-summarise windows
from their compressed record files with the same code).

A window holds the records of the requests that *completed* while it was open. Its summary keeps
counts, failures by kind, TTFT p50/p99 and ITL p50 (ms), output tokens and throughput over the
window's own length, and the mean number of requests in flight (their end-to-end times over the
window's length: Little's law), which shows whether the soak held its load level; only the TTFT
and ITL values of one window are ever held. When the soak
drives several engine instances (records carry ``instance``), the summary also has
``instances``: per instance its ok count, TTFT p50 and throughput, so one instance's slowdown is
not averaged away by the others (G4's per-instance drift).

Record files come from a node, so reading one is bounded: a line is at most MAX_LINE_BYTES and a
file decompresses to at most MAX_WINDOW_BYTES (a gzip bomb of one endless line once took 1 GB of
memory); past either limit the file is refused with :class:`WindowFileError` naming the file and
the limit, and its window is reported as unverifiable, never summarised from part of it.
"""

from __future__ import annotations

import gzip
import json
import math
import re
import zlib
from array import array
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Optional

MAX_LINE_BYTES = 4 << 20  # one record; the longest real ones (per-token ITL lists) are ~100 KB
MAX_WINDOW_BYTES = 8 << 30  # one window's records, decompressed


class WindowFileError(ValueError):
    """A window record file past a limit (names the file and the limit)."""


def _pct(sorted_vals: array, p: float) -> Optional[float]:  # type: ignore[type-arg]
    """Linear-interpolation percentile (numpy's default) of sorted values; None when empty."""
    n = len(sorted_vals)
    if n == 0:
        return None
    if n == 1:
        return float(sorted_vals[0])
    k = (n - 1) * p / 100.0
    lo = math.floor(k)
    hi = min(lo + 1, n - 1)
    return float(sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (k - lo))


class WindowAccumulator:
    """Add records one by one; ``summary()`` gives the window's figures."""

    def __init__(self, index: int, started_unix: float) -> None:
        self.index = index
        self.started_unix = started_unix
        self.requests = 0
        self.ok = 0
        self.failed = 0
        self.cancelled = 0
        self.failures: dict[str, int] = {}
        self.output_tokens = 0
        self.input_tokens = 0
        self.busy_ms = 0.0  # the requests' end-to-end times: busy / length = mean requests in flight
        self._ttft: array = array("d")  # type: ignore[type-arg]
        self._itl: array = array("d")  # type: ignore[type-arg]
        # instance -> [ok count, output tokens, TTFT values]
        self._per: dict[int, list[Any]] = {}

    def add(self, rec: Mapping[str, Any]) -> None:
        self.requests += 1
        e2el = rec.get("e2el_ms")
        if e2el is not None:
            self.busy_ms += float(e2el)
        status = rec.get("status")
        inst = rec.get("instance")
        # an instance whose requests all failed is still listed (with no TTFT)
        per = None if inst is None else self._per.setdefault(int(inst), [0, 0, array("d")])
        if status == "ok":
            self.ok += 1
            ttft = rec.get("ttft_ms")
            if ttft is not None:
                self._ttft.append(float(ttft))
            tpot = rec.get("tpot_ms")
            if tpot is not None:
                self._itl.append(float(tpot))
            out_tokens = int(rec.get("output_tokens") or 0)
            self.output_tokens += out_tokens
            self.input_tokens += int(rec.get("input_tokens") or 0)
            if per is not None:
                per[0] += 1
                per[1] += out_tokens
                if ttft is not None:
                    per[2].append(float(ttft))
        elif status == "cancelled":
            # Cut by the soak's own end (or a stop), not a failure of the system under test.
            self.cancelled += 1
        else:
            self.failed += 1
            kind = str(rec.get("error_kind") or "error")
            self.failures[kind] = self.failures.get(kind, 0) + 1

    def summary(self, ended_unix: float, **extra: Any) -> dict[str, Any]:
        ttft = array("d", sorted(self._ttft))
        itl = array("d", sorted(self._itl))
        # Figures from the times as written (ms): the summary line is then reproducible from its
        # own start, end and record file (the controller re-computes it: pipelines/g4/soakverify.py).
        started, ended = round(self.started_unix, 3), round(ended_unix, 3)
        length = max(1e-9, ended - started)
        out: dict[str, Any] = {
            "index": self.index, "started_unix": started, "ended_unix": ended,
            "length_s": round(length, 3), "requests": self.requests, "ok": self.ok, "failed": self.failed,
            "cancelled": self.cancelled, "failures": dict(sorted(self.failures.items())),
            "ttft_p50_ms": _pct(ttft, 50), "ttft_p99_ms": _pct(ttft, 99), "tpot_p50_ms": _pct(itl, 50),
            "output_tokens": self.output_tokens, "input_tokens": self.input_tokens,
            "throughput_tok_s": self.output_tokens / length,
            # Little's law over the window: the requests' time in the system / the window's length
            "mean_in_flight": self.busy_ms / 1000.0 / length,
        }
        if self._per:
            out["instances"] = {
                str(i): {"ok": ok, "ttft_p50_ms": _pct(array("d", sorted(vals)), 50),
                         "throughput_tok_s": toks / length}
                for i, (ok, toks, vals) in sorted(self._per.items())}
        out.update(extra)
        return out


_ITL = b'"itl_ms":['


def _without_itl(line: bytes) -> bytes:
    """The record line with its ``itl_ms`` list replaced by null: the list holds only numbers, so
    its end is the first ``]`` after it; parsing a thousand floats a record is most of the cost
    and a window's figures do not need them (``tpot_ms`` is per record)."""
    i = line.find(_ITL)
    if i < 0:
        return line
    j = line.find(b"]", i)
    return line if j < 0 else line[:i] + b'"itl_ms":null' + line[j + 1:]


# The fields a window needs, read straight from a record line written by ``make_record`` (its key
# order and compact separators). Safe against string contents: inside a JSON string a quote is
# always escaped, so ``"ttft_ms":`` cannot be matched there. Lines it does not match are parsed
# with ``json``. Every field between ``status`` and ``output_tokens`` is spelled out (no ``.*?``):
# a lazy skip made the regex engine try a match at every byte (twice the time of this pattern).
_NUM = rb'[-+0-9.eE]+'
_STR = rb'"(?:[^"\\]|\\.)*"'
_FAST = re.compile(
    rb'"status":"([a-z_]+)","error_kind":(null|' + _STR + rb'),"error":(?:null|' + _STR + rb'),'
    rb'"http_status":(?:null|\d+),"start_ns":-?\d+,"scheduled_ns":(?:null|-?\d+),"queue_ms":(?:null|' + _NUM
    + rb'),"ttft_ms":(null|' + _NUM + rb'),"itl_ms":(?:null|\[[^\]]*\]),"tpot_ms":(null|' + _NUM + rb'),'
    rb'"e2el_ms":(null|' + _NUM + rb'),"input_tokens":(\d+),"output_tokens":(\d+),')


# The soak adds ``instance`` as the record's last key (after ``make_record``'s), so it ends the line.
_INSTANCE = re.compile(rb',"instance":(\d+)}\s*$')


def fast_fields(line: bytes) -> Optional[dict[str, Any]]:
    """``status``, ``error_kind``, ``ttft_ms``, ``tpot_ms``, ``input_tokens``, ``output_tokens``
    (and ``instance`` when the soak added one) of a record line, or None when the line is not in
    ``make_record``'s layout."""
    m = _FAST.search(line)
    if m is None:
        return None
    status, kind, ttft, tpot, e2el, inp, out = m.groups()
    rec: dict[str, Any] = {
        "status": status.decode(), "error_kind": None if kind == b"null" else json.loads(kind),
        "ttft_ms": None if ttft == b"null" else float(ttft), "tpot_ms": None if tpot == b"null" else float(tpot),
        "e2el_ms": None if e2el == b"null" else float(e2el), "input_tokens": int(inp), "output_tokens": int(out)}
    inst = _INSTANCE.search(line)
    if inst is not None:
        rec["instance"] = int(inst.group(1))
    return rec


def iter_window_records(path: Path, *, itl: bool = True, max_line: int = MAX_LINE_BYTES,
                        max_bytes: int = MAX_WINDOW_BYTES) -> Iterator[dict[str, Any]]:
    """The complete records of a window file (``.jsonl`` or ``.jsonl.gz``); a torn last line is
    skipped. ``itl=False`` yields only the fields a window summary needs (``fast_fields``; much
    faster), the whole record for a line in another layout. Raises WindowFileError past a limit."""
    opener = gzip.open if str(path).endswith(".gz") else open
    total = 0
    with opener(path, "rb") as fh:
        while True:
            line = fh.readline(max_line + 1)
            if not line:
                break
            total += len(line)
            if len(line) > max_line:
                raise WindowFileError(f"{path}: a record line longer than the {max_line} byte limit")
            if total > max_bytes:
                raise WindowFileError(f"{path}: decompresses to more than the {max_bytes} byte limit")
            if not line.endswith(b"\n"):
                break
            yield from _parse_line(line, itl)


def _parse_line(line: bytes, itl: bool) -> Iterator[dict[str, Any]]:
    if not itl:
        rec = fast_fields(line)
        if rec is not None:
            yield rec
            return
    try:
        rec = json.loads(line if itl else _without_itl(line))
    except ValueError:
        try:
            rec = json.loads(line)  # a stripped line that no longer parses: the slow way
        except ValueError:
            return
    if isinstance(rec, dict):
        yield rec


def summarise_records(index: int, records: Iterable[Mapping[str, Any]], started_unix: float,
                      ended_unix: float) -> dict[str, Any]:
    acc = WindowAccumulator(index, started_unix)
    for rec in records:
        acc.add(rec)
    return acc.summary(ended_unix)


def _add_chunk(acc: WindowAccumulator, chunk: bytes, max_line: int = MAX_LINE_BYTES, path: object = "") -> None:
    """Add the complete lines of ``chunk``: one regex pass over the whole chunk when every line is
    in ``make_record``'s layout (each line holds at most one match), line by line otherwise."""
    matches = _FAST.findall(chunk)
    if len(matches) == chunk.count(b"\n") and b'"instance":' not in chunk:
        ttfts, tpots = acc._ttft, acc._itl
        busy = 0.0
        for status, kind, ttft, tpot, e2el, inp, out in matches:
            # WindowAccumulator.add, inlined on the raw fields (the hot loop of bench-soak)
            acc.requests += 1
            if e2el != b"null":
                busy += float(e2el)
            if status == b"ok":
                acc.ok += 1
                if ttft != b"null":
                    ttfts.append(float(ttft))
                if tpot != b"null":
                    tpots.append(float(tpot))
                acc.output_tokens += int(out)
                acc.input_tokens += int(inp)
            elif status == b"cancelled":
                acc.cancelled += 1
            else:
                acc.failed += 1
                k = "error" if kind == b"null" else str(json.loads(kind) or "error")
                acc.failures[k] = acc.failures.get(k, 0) + 1
        acc.busy_ms += busy
        return
    for line in chunk.splitlines(keepends=True):
        if len(line) > max_line:
            raise WindowFileError(f"{path}: a record line longer than the {max_line} byte limit")
        rec = fast_fields(line)
        if rec is None:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
        if not isinstance(rec, dict):
            continue  # not a record, as a torn line is not
        try:
            acc.add(rec)
        except (TypeError, ValueError, AttributeError, OverflowError) as exc:
            raise WindowFileError(f"{path}: a record with a field of the wrong type ({exc})") from None


def summarise_file(index: int, path: Path, started_unix: float, ended_unix: float, *,
                   block: int = 1 << 20, max_line: int = MAX_LINE_BYTES,
                   max_bytes: int = MAX_WINDOW_BYTES) -> dict[str, Any]:
    """A window's figures from its record file, decompressed block by block (memory: about one
    block plus one line). Raises WindowFileError past ``max_line`` or ``max_bytes``."""
    acc = WindowAccumulator(index, started_unix)
    rest = b""
    total = 0
    for data in _blocks(path, block):
        total += len(data)
        if total > max_bytes:
            raise WindowFileError(f"{path}: decompresses to more than the {max_bytes} byte limit")
        data = rest + data
        cut = data.rfind(b"\n") + 1
        if cut:
            _add_chunk(acc, data[:cut], max_line, path)
        rest = data[cut:]
        if len(rest) > max_line:
            raise WindowFileError(f"{path}: a record line longer than the {max_line} byte limit")
    # ``rest`` is a torn last line (no newline): skipped, as ``iter_window_records`` does.
    return acc.summary(ended_unix)


def _blocks(path: Path, block: int) -> Iterator[bytes]:
    """The file's bytes, gunzipped when it ends in ``.gz`` (several members too), at most ``block``
    bytes of output at a time whatever the compression ratio."""
    gz = str(path).endswith(".gz")
    dec = zlib.decompressobj(31) if gz else None
    with open(path, "rb") as fh:
        while True:
            raw = fh.read(block)
            if not raw:
                return
            if dec is None:
                yield raw
                continue
            while raw:
                yield dec.decompress(raw, block)
                raw = dec.unconsumed_tail
                if dec.eof and not raw and dec.unused_data:  # a file of several gzip members
                    raw = dec.unused_data
                    dec = zlib.decompressobj(31)


def _summarise_one(job: tuple[int, str, float, float]) -> dict[str, Any]:
    index, path, started, ended = job
    try:
        return summarise_file(index, Path(path), started, ended)
    except (WindowFileError, OSError, zlib.error, EOFError) as exc:
        return {"index": index, "error": str(exc) or type(exc).__name__}


def summarise_files(jobs: list[tuple[int, str, float, float]], *, workers: int = 1) -> list[dict[str, Any]]:
    """Re-summarise window record files ``(index, path, started_unix, ended_unix)``, in order;
    ``workers`` > 1 spreads the windows over processes (one window's values in memory per worker).
    A file that cannot be read within the limits gives ``{"index": i, "error": why}``."""
    if workers <= 1 or len(jobs) < 2:
        return [_summarise_one(j) for j in jobs]
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(_summarise_one, jobs, chunksize=1))

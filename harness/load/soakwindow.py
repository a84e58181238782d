"""One soak window's figures from its records, in bounded memory (stdlib only: the node agent
summarises each window as it closes; the controller and ``bench/soak.py`` re-summarise windows
from their compressed record files with the same code).

A window holds the records of the requests that *completed* while it was open. Its summary keeps
counts, failures by kind, TTFT p50/p99 and ITL p50 (ms), output tokens and throughput over the
window's own length; only the TTFT and ITL values of one window are ever held.
"""

from __future__ import annotations

import gzip
import json
import math
from array import array
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Optional


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
        self._ttft: array = array("d")  # type: ignore[type-arg]
        self._itl: array = array("d")  # type: ignore[type-arg]

    def add(self, rec: Mapping[str, Any]) -> None:
        self.requests += 1
        status = rec.get("status")
        if status == "ok":
            self.ok += 1
            ttft = rec.get("ttft_ms")
            if ttft is not None:
                self._ttft.append(float(ttft))
            tpot = rec.get("tpot_ms")
            if tpot is not None:
                self._itl.append(float(tpot))
            self.output_tokens += int(rec.get("output_tokens") or 0)
            self.input_tokens += int(rec.get("input_tokens") or 0)
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
        length = max(1e-9, ended_unix - self.started_unix)
        out: dict[str, Any] = {
            "index": self.index, "started_unix": round(self.started_unix, 3), "ended_unix": round(ended_unix, 3),
            "length_s": round(length, 3), "requests": self.requests, "ok": self.ok, "failed": self.failed,
            "cancelled": self.cancelled, "failures": dict(sorted(self.failures.items())),
            "ttft_p50_ms": _pct(ttft, 50), "ttft_p99_ms": _pct(ttft, 99), "tpot_p50_ms": _pct(itl, 50),
            "output_tokens": self.output_tokens, "input_tokens": self.input_tokens,
            "throughput_tok_s": self.output_tokens / length,
        }
        out.update(extra)
        return out


def iter_window_records(path: Path) -> Iterator[dict[str, Any]]:
    """The complete records of a window file (``.jsonl`` or ``.jsonl.gz``); a torn last line is skipped."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as fh:
        for line in fh:
            if not line.endswith(b"\n"):
                break
            try:
                yield json.loads(line)
            except ValueError:
                continue


def summarise_records(index: int, records: Iterable[Mapping[str, Any]], started_unix: float,
                      ended_unix: float) -> dict[str, Any]:
    acc = WindowAccumulator(index, started_unix)
    for rec in records:
        acc.add(rec)
    return acc.summary(ended_unix)

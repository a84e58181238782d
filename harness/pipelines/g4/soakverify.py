"""The soak's window figures checked against its records: every window the node summarised is
summarised again on the controller from the window's record file copied into evidence, with the
node agent's own code (``harness.load.soakwindow``), and the two must agree exactly.

Why: the node's ``windows.jsonl`` is what G4 decides on, and the record files are the evidence a
customer can re-read. A summary that disagrees with its records (a torn copy, an agent bug, a file
edited afterwards) would sign figures the evidence does not hold. A disagreement is a fault; the
figures taken are the records' (the evidence), never silently the node's.

A window whose records the node could not all write (``record_write_errors`` > 0: its disk was
full) keeps the node's summary, which counted every record in memory; that is said, not checked.
A window whose file was never copied keeps the node's summary, unverified, and is a fault: the
evidence is incomplete.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.load.soakwindow import summarise_files

# The figures a window summary computes from its records; the rest (counters, restarts, the
# file's name) are the node's observations at the window's end and have no record to check.
EXACT = ("requests", "ok", "failed", "cancelled", "failures", "output_tokens", "input_tokens", "instances")
FLOATS = ("ttft_p50_ms", "ttft_p99_ms", "tpot_p50_ms", "throughput_tok_s", "mean_in_flight")


@dataclass
class WindowCheck:
    """The windows to decide on (the records' figures where they could be read) and what was found."""

    windows: list[dict[str, Any]]
    verified: int = 0
    records: int = 0
    mismatched: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    unwritten: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"windows": len(self.windows), "verified": self.verified, "records": self.records,
                "mismatched": self.mismatched, "missing": self.missing, "unwritten": self.unwritten}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    return bool(a == b)


def _differences(node: dict[str, Any], records: dict[str, Any]) -> list[str]:
    out = []
    for key in EXACT + FLOATS:
        if not _same(node.get(key), records.get(key)):
            out.append(f"{key} {node.get(key)!r} (node) vs {records.get(key)!r} (records)")
    return out


def verify_windows(local: Path, windows: Sequence[dict[str, Any]], *, workers: int = 1) -> WindowCheck:
    """Re-summarise each window of ``windows`` (the node's index, in order) from its record file
    under ``local``; see the module docstring for what is compared and what is taken."""
    jobs: list[tuple[int, str, float, float]] = []
    positions: list[int] = []
    check = WindowCheck(windows=[dict(w) for w in windows])
    for pos, w in enumerate(windows):
        name = str(w.get("file") or "")
        path = local / name
        if int(w.get("record_write_errors") or 0) > 0:
            check.unwritten.append(f"window {w.get('index')}: {w.get('record_write_errors')} record(s) could not "
                                   "be written on the node; its in-memory summary stands")
            continue
        if not name or ".." in name.split("/") or name.startswith("/") or not path.is_file():
            check.missing.append(f"window {w.get('index')}: record file {name or '(none named)'} was not copied")
            continue
        jobs.append((int(w["index"]), str(path), float(w["started_unix"]), float(w["ended_unix"])))
        positions.append(pos)
    for pos, again in zip(positions, summarise_files(jobs, workers=workers)):
        node = check.windows[pos]
        if "error" in again:
            check.missing.append(f"window {node.get('index')}: record file unreadable: {again['error']}")
            continue
        diff = _differences(node, again)
        check.records += int(again.get("requests") or 0)
        if diff:
            check.mismatched.append(f"window {node.get('index')}: " + "; ".join(diff))
            for key in EXACT + FLOATS:
                if key in again:
                    node[key] = again[key]
                else:
                    node.pop(key, None)
        else:
            check.verified += 1
    return check

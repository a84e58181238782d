"""The campaign's journal of gate runs (``reports/<campaign>/journal.jsonl``, issue 51): one
hash-chained record per event of every gate run, so deleting a failing gate and running it again
leaves a trace.

Each line is a JSON object (keys sorted, no spaces) whose ``prev`` is the sha256 of the previous
line's bytes (``GENESIS`` for the first), so no record can be removed, changed or reordered without
breaking every later link. A gate run appends:

* ``start`` when it begins (gate, run id, resumed or not);
* ``result`` before it writes ``result.json``: its verdict, start and end time and the sha256 of the
  exact bytes of ``result.json``;
* ``sealed`` once its ``MANIFEST.sha256`` is written: that file's sha256.

Records are appended under the campaign lock (one writer). Deleting or renaming a gate directory
leaves its records; the campaign manifest covers the journal (its sha256), so records removed
after the parties signed the set show too. What it cannot stop: a party that rewrites the whole
directory, journal included, before the other party has seen any of it. The parties close that gap
by sharing the journal head (the sha256 of the last record), which every gate run prints as it
ends: a head seen earlier must still be a record of the journal verified later.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from harness.store import durable
from harness.store.campaign import CampaignError

__all__ = ["FORMAT", "GENESIS", "JOURNAL", "GateRunEntry", "JournalRead", "append", "gate_runs", "head",
           "read_journal", "runs_line"]

JOURNAL = "journal.jsonl"
FORMAT = "kvgate-journal-v1"
GENESIS = "0" * 64
MAX_JOURNAL_BYTES = 16 << 20  # ~60k records: far more gate runs than a campaign has
KINDS = ("start", "result", "sealed")


@dataclass
class JournalRead:
    """The records of a journal as read, each with the sha256 of its line, and what is wrong."""

    present: bool = False
    records: list[dict[str, Any]] = field(default_factory=list)
    digests: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def head(self) -> str:
        return self.digests[-1] if self.digests else GENESIS


@dataclass
class GateRunEntry:
    """One run of a gate as the journal tells it (a resumed run continues the one before it)."""

    gate: str
    run_id: str
    started_at: str
    resumed: bool = False
    verdict: Optional[str] = None  # None: the run wrote no result (stopped, or detached)
    finished_at: Optional[str] = None
    result_sha256: Optional[str] = None
    manifest_sha256: Optional[str] = None


def _now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds").replace("+00:00", "Z")


def _line(record: dict[str, Any]) -> bytes:
    # durable.append_jsonl's own serialisation: the digest is of the bytes as they are on disk
    return json.dumps(record, sort_keys=True, separators=(",", ":"), allow_nan=False).encode("utf-8")


def _read_bytes(path: Path) -> Optional[bytes]:
    """The journal's bytes (None: there is none); never follows a symlink or opens a FIFO."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"{path}: not a regular file")
        if st.st_size > MAX_JOURNAL_BYTES:
            raise OSError(f"{path}: larger than {MAX_JOURNAL_BYTES} bytes")
        return os.read(fd, MAX_JOURNAL_BYTES + 1)
    finally:
        os.close(fd)


def read_journal(campaign_path: Path) -> JournalRead:
    """Read and check the chain: every line a record of this format, numbered from 1, whose
    ``prev`` is the sha256 of the line before it."""
    out = JournalRead()
    try:
        raw = _read_bytes(Path(campaign_path) / JOURNAL)
    except OSError as exc:
        out.present = True
        out.problems.append(f"{JOURNAL}: unreadable: {exc}")
        return out
    if raw is None:
        return out
    out.present = True
    if raw and not raw.endswith(b"\n"):
        out.problems.append(f"{JOURNAL}: its last record is torn (no end of line)")
    prev = GENESIS
    for n, line in enumerate(raw.split(b"\n")[:-1] if raw.endswith(b"\n") else raw.split(b"\n"), 1):
        problem = _record_problem(line, n, prev)
        if problem:
            out.problems.append(f"{JOURNAL} line {n}: {problem}: the chain of gate runs is broken there")
            return out
        out.records.append(json.loads(line))
        prev = hashlib.sha256(line).hexdigest()
        out.digests.append(prev)
    return out


def _record_problem(line: bytes, n: int, prev: str) -> str:
    try:
        rec = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return "not a JSON record"
    if not isinstance(rec, dict) or rec.get("format") != FORMAT or rec.get("kind") not in KINDS:
        return f"not a {FORMAT} record"
    if _line(rec) != line:
        return "not in the journal's canonical form (edited by hand?)"
    if rec.get("seq") != n:
        return f"numbered {rec.get('seq')!r}, expected {n}"
    if rec.get("prev") != prev:
        return "its prev is not the sha256 of the record before it"
    if not all(isinstance(rec.get(k), str) and rec.get(k) for k in ("gate", "run_id", "campaign_id", "at")):
        return "gate, run_id, campaign_id or at missing"
    return ""


def head(campaign_path: Path) -> str:
    """The sha256 of the journal's last record (``GENESIS`` when it has none)."""
    return read_journal(campaign_path).head


def append(campaign_path: Path, kind: str, *, gate: str, run_id: str, campaign_id: str,
           **fields: Any) -> str:
    """Append one record (the caller holds the campaign lock) and return the new head. A journal
    whose chain is broken is not appended to: the break must stay visible, not be papered over."""
    if kind not in KINDS:
        raise ValueError(f"journal record kind {kind!r}")
    current = read_journal(campaign_path)
    if current.problems:
        raise CampaignError(f"{Path(campaign_path) / JOURNAL}: {current.problems[0]}; a gate run appends to a "
                            "journal only while its chain holds (start a new campaign)")
    record = {"format": FORMAT, "seq": len(current.records) + 1, "kind": kind, "gate": gate, "run_id": run_id,
              "campaign_id": campaign_id, "at": _now(), "prev": current.head, **fields}
    durable.append_jsonl(Path(campaign_path) / JOURNAL, record)
    return hashlib.sha256(_line(record)).hexdigest()


def gate_runs(records: Iterable[dict[str, Any]]) -> dict[str, list[GateRunEntry]]:
    """Every run of every gate, in the order they started."""
    by_gate: dict[str, list[GateRunEntry]] = {}
    by_id: dict[str, GateRunEntry] = {}
    for rec in records:
        gate, run_id = str(rec["gate"]), str(rec["run_id"])
        entry = by_id.get(run_id)
        if entry is None:
            entry = GateRunEntry(gate, run_id, str(rec.get("started_at") or rec["at"]),
                                 resumed=bool(rec.get("resumed")))
            by_id[run_id] = entry
            by_gate.setdefault(gate, []).append(entry)
        if rec["kind"] == "result":
            entry.verdict, entry.finished_at = str(rec.get("verdict")), str(rec.get("finished_at") or rec["at"])
            entry.result_sha256 = str(rec.get("result_sha256") or "")
        elif rec["kind"] == "sealed":
            entry.manifest_sha256 = str(rec.get("manifest_sha256") or "")
    return by_gate


def _hhmm(stamp: Optional[str]) -> str:
    try:
        when = _dt.datetime.fromisoformat(str(stamp).replace("Z", "+00:00"))
    except ValueError:
        return str(stamp)
    return when.astimezone(_dt.timezone.utc).strftime("%H:%M")


def runs_line(gate: str, entries: list[GateRunEntry], say: Callable[[str], str] = str) -> str:
    """'G2: 2 runs: FAIL 10:02, PASS 10:19' (UTC; a run without a result says so). ``say``
    translates its fixed words (a report's language; marked for the catalog in
    ``harness.report.labels``): English, the default, is what ``kvgate verify`` prints."""
    parts = []
    for e in entries:
        what = (f"{e.verdict} {_hhmm(e.finished_at)}" if e.verdict
                else say("no result (started %(time)s)") % {"time": _hhmm(e.started_at)})
        parts.append(what + (say(" (resumed)") if e.resumed else ""))
    line = "%(gate)s: %(n)d run: %(runs)s" if len(entries) == 1 else "%(gate)s: %(n)d runs: %(runs)s"
    return say(line) % {"gate": gate, "n": len(entries), "runs": ", ".join(parts)}

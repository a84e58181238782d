"""``kvgate verify CAMPAIGN``'s check of the journal of gate runs (issue 51, ``harness.store.journal``):
the chain holds, it is as long as the runs the gate directories record, its last run of each gate is
the gate present (same run, same ``result.json`` bytes), every record and result is of this
campaign, and ``campaign.manifest`` binds the journal as it is. Every run of every gate is listed;
a gate run more than once is labelled by its result (``harness.report.labels``)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from harness.report.loader import RESULT_FILE
from harness.report.manifest import ManifestError, read_regular
from harness.store.journal import JOURNAL, GateRunEntry, gate_runs, read_journal, runs_line

__all__ = ["JournalCheck", "check_journal"]


@dataclass
class JournalCheck:
    present: bool = False
    problems: list[str] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)  # "G2: 2 runs: FAIL 10:02, PASS 10:19"
    head: str = ""


@dataclass
class _Gate:
    name: str
    custody: Optional[dict[str, Any]]
    result_sha256: str


def _present(campaign_dir: Path) -> dict[str, _Gate]:
    out: dict[str, _Gate] = {}
    for d in sorted(p for p in campaign_dir.iterdir() if p.is_dir() and not p.is_symlink()):
        try:
            raw = read_regular(d / RESULT_FILE)  # never opens a FIFO put in its place
            custody = json.loads(raw).get("custody")
        except (OSError, ManifestError, ValueError, AttributeError):
            continue  # unreadable gates are the campaign manifest check's to name
        out[d.name] = _Gate(d.name, custody if isinstance(custody, dict) else None, hashlib.sha256(raw).hexdigest())
    return out


def _campaign_id(campaign_dir: Path) -> Optional[str]:
    try:
        meta = json.loads(read_regular(campaign_dir / "campaign.json"))
    except (OSError, ManifestError, ValueError):
        return None
    return str(meta["id"]) if isinstance(meta, dict) and meta.get("id") else None


def _gate_problems(gates: dict[str, _Gate], runs: dict[str, list[GateRunEntry]]) -> list[str]:
    out = []
    for gate, entries in runs.items():
        done = [e for e in entries if e.verdict]
        g = gates.get(gate)
        if g is None:
            if done:
                out.append(f"{JOURNAL} records {runs_line(gate, entries)}, but no gate {gate} is present: a gate "
                           "that ran was removed")
            continue
        if not done:
            continue
        last = done[-1]
        run_id = (g.custody or {}).get("run_id")
        if last.run_id != run_id or last.result_sha256 != g.result_sha256:
            out.append(f"{gate}/{RESULT_FILE} is not the last run {JOURNAL} records for {gate} "
                       f"(run {last.run_id[:12]}, {last.verdict} at {last.finished_at}, result sha256 "
                       f"{last.result_sha256}); it is run {str(run_id)[:12]} with sha256 {g.result_sha256}")
    known = {e.run_id for entries in runs.values() for e in entries if e.verdict}
    for g in gates.values():
        run_id = (g.custody or {}).get("run_id")
        if run_id and run_id not in known:
            out.append(f"{JOURNAL} is shorter than the runs the gate directories record: {g.name}/{RESULT_FILE} is "
                       f"run {str(run_id)[:12]}, which the journal does not hold")
        elif not run_id and runs:
            out.append(f"{g.name}/{RESULT_FILE} records no run of this campaign's journal (not written by a gate "
                       "run of this campaign)")
    return out


def _id_problems(campaign_dir: Path, records: list[dict[str, Any]], gates: dict[str, _Gate]) -> list[str]:
    expected = _campaign_id(campaign_dir) or (records[0]["campaign_id"] if records else None)
    if expected is None:
        return []
    out = [f"{JOURNAL} record {r['seq']} is of campaign id {r['campaign_id']}, not {expected}"
           for r in records if r["campaign_id"] != expected][:5]
    out += [f"{g.name}/{RESULT_FILE} is of campaign id {(g.custody or {}).get('campaign_id')}, not {expected}: "
            "a gate of another campaign" for g in gates.values()
            if g.custody and g.custody.get("campaign_id") != expected]
    return out


def check_journal(campaign_dir: Path, recorded_sha256: str) -> JournalCheck:
    """Check the journal of ``campaign_dir``; ``recorded_sha256`` is the digest ``campaign.manifest``
    binds ("" when it binds none)."""
    campaign_dir = Path(campaign_dir)
    read = read_journal(campaign_dir)
    gates = _present(campaign_dir)
    check = JournalCheck(present=read.present, problems=list(read.problems), head=read.head)
    if not read.present:
        if any((g.custody or {}).get("run_id") for g in gates.values()):
            check.problems.append(f"{JOURNAL} is missing, but gates of this campaign record runs of it")
        else:
            check.labels.append(f"no {JOURNAL}: these gates were not written by a gate run of a kvgate that keeps "
                                "a journal, so how often each gate was run is not known")
        return check
    actual = hashlib.sha256(read_regular(campaign_dir / JOURNAL)).hexdigest() if not read.problems else ""
    if not recorded_sha256:
        check.problems.append(f"campaign.manifest does not bind {JOURNAL} (sha256 {actual or '?'})")
    elif actual and actual != recorded_sha256:
        check.problems.append(f"{JOURNAL} changed since campaign.manifest was written: sha256 {actual}, the "
                              f"manifest binds {recorded_sha256}")
    runs = gate_runs(read.records)
    check.runs = [runs_line(g, entries) for g, entries in sorted(runs.items())]
    check.problems += _gate_problems(gates, runs) + _id_problems(campaign_dir, read.records, gates)
    return check

"""Every allowance a gate was decided under, as a label (issue 51 item 4): what the signers accept
knowingly, each in one line saying what it means. Page one of the gate and campaign reports and
``kvgate verify`` show them from this one list; ``kvgate verify --strict`` refuses any.

Read from ``result.json`` alone: an unsigned baseline, a non-stock gate file, a profile's threshold
override, a workload difference accepted with ``--allow-baseline-mismatch``, a storage tier declared
``kind: memory`` (or ``tmpfs``), and a gate run again after an earlier run of it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from harness.records.result import GateResult
from harness.store.journal import GateRunEntry, runs_line

__all__ = ["NOTICE_KINDS", "Label", "gate_labels"]

# shown on page one by their own notices (``_custody``, ``_baseline_mismatch``) and the overrides
# table: the labels block does not repeat them
NOTICE_KINDS = ("unsigned-baseline", "non-stock-gate-file", "baseline-mismatch", "override")


@dataclass(frozen=True)
class Label:
    kind: str
    text: str


def _baseline_labels(result: GateResult) -> list[Label]:
    b = result.baseline if isinstance(result.baseline, Mapping) else {}
    out = []
    if b.get("unsigned_baseline"):
        out.append(Label("unsigned-baseline", f"unsigned baseline: {b.get('gate', 'G2')} of campaign "
                         f"{b.get('campaign', '?')!r} was used without being verified "
                         f"({b.get('unverified_reason', '?')}): nobody vouched for the figures compared against"))
    for a in b.get("accepted_mismatches") or []:
        if isinstance(a, Mapping):
            out.append(Label("baseline-mismatch", f"baseline mismatch allowed: {a.get('field', '?')} was "
                             f"{a.get('baseline')!r} in the baseline and {a.get('this_run')!r} in this run "
                             "(--allow-baseline-mismatch): the runs compared are unlike in that field"))
    return out


def _rerun_label(result: GateResult) -> list[Label]:
    custody = result.custody if isinstance(result.custody, Mapping) else {}
    earlier = [e for e in custody.get("earlier_runs") or [] if isinstance(e, Mapping)]
    runs = [GateRunEntry(result.gate, str(e.get("run_id")), str(e.get("started_at")), bool(e.get("resumed")),
                         e.get("verdict"), e.get("finished_at")) for e in earlier]
    runs.append(GateRunEntry(result.gate, str(custody.get("run_id")), result.started_at, bool(custody.get("resumed")),
                             result.verdict.value, result.finished_at))
    if sum(1 for r in runs if not r.resumed) < 2:
        return []
    before = [r.verdict or "no result" for r in runs[:-1]]
    after = next((v for v in ("FAIL", "ERROR", "INCONCLUSIVE", "NOT_RUN", "no result") if v in before), before[-1])
    return [Label("re-run", f"re-run: {runs_line(result.gate, runs)}; run again after {after}, the result "
                  "shown is the last run's")]


def _memory_labels(result: GateResult) -> list[Label]:
    custody = result.custody if isinstance(result.custody, Mapping) else {}
    return [Label("memory-tier", f"memory tier: {t.get('node')}:{t.get('target')} ({t.get('path')}) is declared "
                  f"kind: {t.get('kind')}: its figures are RAM's, not a storage device's")
            for t in custody.get("memory_tiers") or [] if isinstance(t, Mapping)]


def gate_labels(result: GateResult) -> list[Label]:
    """The labels of one gate's result, in a fixed order."""
    out = _baseline_labels(result)
    for gf in result.gate_files:
        if gf.get("stock") is not True:
            why = ("it differs from the gate file released with this kvgate" if gf.get("stock") is False
                   else "no released digest to compare it with")
            out.append(Label("non-stock-gate-file", f"non-stock gate file {gf.get('path')} (sha256 "
                             f"{str(gf.get('sha256'))[:16]}): {why}, so its thresholds are not the released ones"))
    out += [Label("override", f"threshold override: {result.gate} {c.id} decided at {c.comparator} "
                  f"{c.threshold} by the profile ({c.override_reason}), not by the gate file")
            for c in result.checks if c.override_reason]
    return out + _memory_labels(result) + _rerun_label(result)


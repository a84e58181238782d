"""Every allowance a gate was decided under, as a label (issue 51 item 4): what the signers accept
knowingly, each in one line saying what it means. Page one of the gate and campaign reports and
``kvgate verify`` show them from this one list; ``kvgate verify --strict`` refuses any.

Read from ``result.json`` alone: an unsigned baseline, a non-stock gate file, a profile's threshold
override, a workload difference accepted with ``--allow-baseline-mismatch``, a storage tier declared
``kind: memory`` (or ``tmpfs``), and a gate run again after an earlier run of it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.records.result import GateResult
from harness.report.i18n import N_, _t, language
from harness.store.journal import GateRunEntry, runs_line

__all__ = ["NOTICE_KINDS", "Label", "gate_labels", "labels_in"]

# shown on page one by their own notices (``_custody``, ``_baseline_mismatch``) and the overrides
# table: the labels block does not repeat them
NOTICE_KINDS = ("unsigned-baseline", "non-stock-gate-file", "baseline-mismatch", "override")

# the fixed words of ``harness.store.journal.runs_line`` (the store cannot import the catalog)
RUNS_WORDS = (N_("no result (started %(time)s)"), N_(" (resumed)"), N_("%(gate)s: %(n)d run: %(runs)s"),
              N_("%(gate)s: %(n)d runs: %(runs)s"))


@dataclass(frozen=True)
class Label:
    """One allowance: ``text`` in the report language in force (``harness.report.i18n.language``),
    English outside one, which is what ``kvgate verify`` prints (stable, greppable LABEL lines)."""

    kind: str
    text: str


def _say(message: str, **params: Any) -> str:
    return _t(message) % params


def _baseline_labels(result: GateResult) -> list[Label]:
    b = result.baseline if isinstance(result.baseline, Mapping) else {}
    out = []
    if b.get("unsigned_baseline"):
        text = N_("unsigned baseline: %(gate)s of campaign %(campaign)s was used without being verified "
                  "(%(reason)s): nobody vouched for the figures compared against")
        out.append(Label("unsigned-baseline", _say(text, gate=b.get("gate", "G2"),
                                                   campaign=repr(b.get("campaign", "?")),
                                                   reason=b.get("unverified_reason", "?"))))
    for a in b.get("accepted_mismatches") or []:
        if isinstance(a, Mapping):
            text = N_("baseline mismatch allowed: %(field)s was %(baseline)s in the baseline and %(this_run)s in "
                      "this run (--allow-baseline-mismatch): the runs compared are unlike in that field")
            out.append(Label("baseline-mismatch", _say(text, field=a.get("field", "?"),
                                                       baseline=repr(a.get("baseline")),
                                                       this_run=repr(a.get("this_run")))))
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
    text = N_("re-run: %(runs)s; run again after %(after)s, the result shown is the last run's")
    return [Label("re-run", _say(text, runs=runs_line(result.gate, runs, _t),
                                 after=_t("no result") if after == "no result" else after))]


def _memory_labels(result: GateResult) -> list[Label]:
    custody = result.custody if isinstance(result.custody, Mapping) else {}
    text = N_("memory tier: %(node)s:%(target)s (%(path)s) is declared kind: %(kind)s: its figures are RAM's, not "
              "a storage device's")
    return [Label("memory-tier", _say(text, node=t.get("node"), target=t.get("target"), path=t.get("path"),
                                      kind=t.get("kind")))
            for t in custody.get("memory_tiers") or [] if isinstance(t, Mapping)]


def _gate_file_labels(result: GateResult) -> list[Label]:
    out = []
    for gf in result.gate_files:
        if gf.get("stock") is not True:
            why = (_t("it differs from the gate file released with this kvgate") if gf.get("stock") is False
                   else _t("no released digest to compare it with"))
            text = N_("non-stock gate file %(path)s (sha256 %(sha)s): %(why)s, so its thresholds are not the "
                      "released ones")
            out.append(Label("non-stock-gate-file", _say(text, path=gf.get("path"), sha=str(gf.get("sha256"))[:16],
                                                         why=why)))
    return out


def gate_labels(result: GateResult) -> list[Label]:
    """The labels of one gate's result, in a fixed order."""
    out = _baseline_labels(result) + _gate_file_labels(result)
    text = N_("threshold override: %(gate)s %(check)s decided at %(comparator)s %(threshold)s by the profile "
              "(%(reason)s), not by the gate file")
    out += [Label("override", _say(text, gate=result.gate, check=c.id, comparator=c.comparator, threshold=c.threshold,
                                   reason=c.override_reason))
            for c in result.checks if c.override_reason]
    return out + _memory_labels(result) + _rerun_label(result)


def labels_in(lang: str) -> Callable[[GateResult], list[Label]]:
    """``gate_labels`` in ``lang``, for a template (rendered outside ``language()``)."""
    def labels_of(result: GateResult) -> list[Label]:
        with language(lang):
            return gate_labels(result)

    return labels_of

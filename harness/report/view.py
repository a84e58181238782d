"""Turn a ``GateResult`` into plain rows of text for the templates (HTML, Markdown) and JUnit.

All formatting decisions live here, so every output format says the same thing in the same words.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional
from urllib.parse import quote

from harness.gates import messages as M
from harness.gates.outcome import Message
from harness.report.details import split_messages, split_text
from harness.report.i18n import N_, _t
from harness.report.phrases import say
from harness.report.textutil import concurrency_of
from harness.report.textutil import xml_safe as xml_safe  # re-exported: render and junit use it
from harness.store.schema import CheckResult, GateResult, Interval, Observation, Verdict
from harness.units import UnitKind, format_quantity

EXIT_MEANINGS: dict[int, str] = {
    0: N_("every blocker check passed"),
    1: N_("a blocker check failed or was not run"),
    2: N_("usage or input error: nothing was measured"),
    3: N_("inconclusive: not enough samples to decide a blocker check"),
    4: N_("infrastructure fault: a node, engine or disk failed during the gate"),
    5: N_("internal error in kvgate"),
    130: N_("interrupted: results taken so far are kept"),
}

VERDICT_TEXT: dict[Verdict, str] = {
    Verdict.PASS: N_("passed"),
    Verdict.FAIL: N_("failed"),
    Verdict.INCONCLUSIVE: N_("inconclusive (not passed)"),
    Verdict.NOT_RUN: N_("not run (not passed)"),
    Verdict.ERROR: N_("error (not passed)"),
    Verdict.NOT_APPLICABLE: N_("not applicable (nothing expected)"),
}

EMULATION_NOTICE = N_(
    "Compute was emulated by kvgate's KV emulator: no GPU or NPU ran a model. Storage I/O was real "
    "(KV chunks were written to and read from the configured tiers). These figures are not a "
    "hardware result.")


def fmt(value: Optional[float], unit_kind: str) -> str:
    """A base-unit value for people; unknown unit kinds fall back to a plain number."""
    if value is None:
        return "-"
    try:
        return format_quantity(value, UnitKind(unit_kind))
    except ValueError:
        return "NaN" if isinstance(value, float) and math.isnan(value) else f"{value:g}"


def fmt_interval(interval: Optional[Interval], unit_kind: str, confidence: bool = True) -> str:
    if interval is None:
        return "-"
    text = f"[{fmt(interval.low, unit_kind)}, {fmt(interval.high, unit_kind)}]"
    return f"{text} ({interval.confidence * 100:g}%)" if confidence else text


def expected_text(check: CheckResult) -> str:
    if check.threshold is not None:
        return f"{check.comparator} {check.threshold}"
    if check.threshold_value is not None:
        return f"{check.comparator} {fmt(check.threshold_value, check.unit_kind)}"
    return check.comparator


def _said(msg: Message) -> str:
    """A recorded message in the report's language; a ``%(text)s`` (words a pipeline recorded)
    through ``phrases.say``."""
    if msg.id == M.TEXT:
        text = msg.params.get("text", "")
        return say(text, _t) if isinstance(text, str) else _said(text)
    if not msg.params:
        return _t(msg.id)
    return _t(msg.id) % {k: _said(v) if isinstance(v, Message) else v for k, v in msg.params.items()}


def compose(messages: Sequence[Message], gettext: Callable[[str], str] = _t, sep: str = "; ") -> str:
    """The messages in the report's language (``gettext`` is the report's; kept for callers)."""
    return sep.join(_said(m) for m in messages)


def obs_measured(obs: Observation, unit_kind: str) -> str:
    if obs.measured_msgs:
        return compose(obs.measured_msgs, _t)
    return say(obs.measured_text, _t) if obs.measured_text else fmt(obs.measured, unit_kind)


def obs_reason(obs: Observation) -> str:
    """The reason in the report's language (recorded messages, or recorded words said by
    ``phrases.say``)."""
    return compose(obs.reason_msgs, _t) if obs.reason_msgs else say(obs.reason, _t)


def obs_label(check: CheckResult, obs: Observation) -> str:
    """The part of the observation path that the check's ``*`` matched (``c8``; for a metric with
    several, each part: ``local/fast-disk`` for ``nodes.*.storage.*.fio.seq_read_bw``), or the whole
    path (the full path stays on hover and in result.json)."""
    prefix = check.metric.rstrip("*")
    if check.metric.endswith("*") and check.metric.count("*") == 1 and obs.path.startswith(prefix) \
            and len(obs.path) > len(prefix):
        return obs.path[len(prefix):]
    if "*" in check.metric:
        pattern = r"\.".join("([^.]+)" if part == "*" else re.escape(part) for part in check.metric.split("."))
        m = re.fullmatch(pattern, obs.path)
        if m:
            return "/".join(m.groups())
    return obs.path


@dataclass
class ObsRow:
    label: str
    path: str
    measured: str
    expected: str
    interval: str
    samples: str
    verdict: Verdict
    reason: str
    evidence: list[tuple[str, Optional[str]]]  # (text, href or None when not a safe relative path)
    interval_bare: str = "-"  # without its confidence level (a table whose check states the level)
    details: list[str] = field(default_factory=list)  # rounds, paths, tunables: the appendix's rows (``details``)
    note: str = ""  # the reason without what the check's own row already says (observations table)

    @property
    def interval_stated(self) -> bool:
        """The measured text already gives the interval (a table shows it once)."""
        return self.interval_bare != "-" and self.interval_bare in self.measured


@dataclass
class CheckRow:
    id: str
    description: str
    metric: str
    severity: str
    statistic: str
    expected: str
    measured: str
    interval: str
    verdict: Verdict
    verdict_text: str
    reason: str
    passed: bool
    override_reason: Optional[str]
    observations: list[ObsRow] = field(default_factory=list)
    recorded_reason: str = ""  # the check's own reason as recorded (``reason`` may be built from observations)

    @property
    def intervals_stated(self) -> bool:
        """Every interval the check has is in its measured text already."""
        return any(o.interval_stated for o in self.observations) and \
            all(o.interval_stated or o.interval_bare == "-" for o in self.observations)


def _check_measured(check: CheckResult) -> tuple[str, str]:
    """Measured and interval cells of the checks table: the value itself for one observation,
    a per-observation list when a ``*`` matched several."""
    obs = check.observations
    if not obs:
        return "-", "-"
    if len(obs) == 1:
        return obs_measured(obs[0], check.unit_kind), fmt_interval(obs[0].interval, check.unit_kind)
    measured = "; ".join(f"{obs_label(check, o)}: {obs_measured(o, check.unit_kind)}" for o in obs)
    with_iv = [o for o in obs if o.interval is not None]
    if not with_iv:
        return measured, "-"
    confidences = {o.interval.confidence for o in with_iv if o.interval is not None}
    if len(confidences) == 1:
        text = "; ".join(f"{obs_label(check, o)}: {fmt_interval(o.interval, check.unit_kind, False)}"
                         for o in with_iv)
        return measured, f"{text} ({next(iter(confidences)) * 100:g}%)"
    return measured, "; ".join(f"{obs_label(check, o)}: {fmt_interval(o.interval, check.unit_kind)}"
                               for o in with_iv)


def _joined(check: CheckResult, reason: Callable[[Observation], str], gettext: Callable[[str], str],
            name: Callable[[Observation], str] = lambda o: o.path) -> str:
    """The gate engine's check reason: its worst observations' reasons (``evaluate_check``)."""
    bad = [o for o in check.observations if o.verdict is check.verdict and check.verdict is not Verdict.PASS]
    text = "; ".join(f"{name(o)}: {reason(o) or o.verdict.value}" for o in bad[:5])
    if len(bad) > 5:
        text += "; " + gettext(M.AND_MORE) % {"n": len(bad) - 5}
    return text


def _check_reason(check: CheckResult) -> str:
    if check.reason_msgs:
        return compose(check.reason_msgs, _t)
    if check.reason and check.reason == _joined(check, lambda o: o.reason, str) and \
            any(_note(check, o)[1] for o in check.observations):
        # composed from the observations' reasons: said without their details (the appendix has them)
        return _joined(check, lambda o: _note(check, o)[0], _t, lambda o: obs_label(check, o))
    if check.reason and any(o.reason_msgs for o in check.observations) and \
            check.reason == _joined(check, lambda o: o.reason, str):
        # composed from messages, so it can be said in any language (observations by their label)
        return _joined(check, obs_reason, _t, lambda o: obs_label(check, o))
    if check.reason:
        return say(check.reason, _t)
    bad = [o for o in check.observations if o.verdict is not Verdict.PASS and o.reason]
    return "; ".join(f"{obs_label(check, o)}: {obs_reason(o)}" for o in bad[:5])


def _duration_text(check: CheckResult) -> str:
    """The soak's duration sentence from what ran: the measured and the required duration (the gate
    file's "72 hours" is the requirement, never a statement that the soak lasted that long)."""
    required = fmt(check.threshold_value, "duration") if check.threshold_value is not None else "-"
    measured = [o.measured for o in check.observations if o.measured is not None]
    if not measured:
        return _t("Soak duration: %(required)s required; no duration was measured") % {"required": required}
    return _t("Soak duration: ran %(measured)s; %(required)s required") % {
        "measured": fmt(measured[0], "duration"), "required": required}


# checks whose gate-file sentence states an outcome: said from the measured and required figures
_FROM_THE_RUN: dict[str, Callable[[CheckResult], str]] = {"soak.duration": _duration_text}


def requirement_text(check: CheckResult) -> str:
    """The check's requirement as the report shows it: the gate file's description, except where
    that sentence would state an outcome the run may not have had (``_FROM_THE_RUN``)."""
    built = _FROM_THE_RUN.get(check.metric)
    return built(check) if built is not None else _t(check.description)


def check_row(check: CheckResult, find_evidence: Optional[Callable[[str], list[str]]] = None) -> CheckRow:
    measured, interval = _check_measured(check)
    statistic: str = check.statistic
    if check.statistic == "interval" and check.confidence:
        statistic = _t("interval (%(confidence)s%%)") % {"confidence": f"{check.confidence * 100:g}"}
    elif check.statistic == "point":
        statistic = _t("point estimate")
    row = CheckRow(
        id=check.id, description=requirement_text(check), metric=check.metric, severity=check.severity,
        statistic=statistic, expected=expected_text(check), measured=measured, interval=interval,
        verdict=check.verdict, verdict_text=VERDICT_TEXT[check.verdict], reason=_check_reason(check),
        passed=check.verdict is Verdict.PASS, override_reason=check.override_reason,
        recorded_reason=check.reason or "")
    for o in check.observations:
        note, details = _note(check, o)
        row.observations.append(ObsRow(
            label=obs_label(check, o), path=o.path, measured=obs_measured(o, check.unit_kind),
            expected=o.expected_text or row.expected, interval=fmt_interval(o.interval, check.unit_kind),
            interval_bare=fmt_interval(o.interval, check.unit_kind, confidence=False), note=note,
            details=details,
            samples=_samples(o), verdict=o.verdict, reason=obs_reason(o),
            evidence=[(e, evidence_href(e)) for e in (o.evidence or (find_evidence(o.path) if find_evidence
                                                                      else []))]))
    return row


def _note(check: CheckResult, o: Observation) -> tuple[str, list[str]]:
    """An observation's reason as its cell shows it, and the detail clauses the appendix lists
    (``details``): without the sentence every point observation carries (its check's row says
    "point estimate" once), and without rounds, paths and tunables."""
    if o.reason_msgs:
        msgs = [m for m in o.reason_msgs if not (check.statistic == "point" and m.id == M.POINT_REASON)]
        kept, found = split_messages(msgs)
        return compose(kept, _t), [say(d, _t) for d in found]
    kept_text, found = split_text(o.reason)
    return say(kept_text, _t), [say(d, _t) for d in found]


def evidence_href(path: str) -> Optional[str]:
    """A link target for an evidence path only when it stays relative to the gate directory: a
    report must never point outside itself (no scheme, no absolute path, no ``..``)."""
    p = path.strip()
    if not p or re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", p) or p.startswith(("/", "\\")):
        return None
    if ".." in re.split(r"[/\\]", p):
        return None
    return quote(p, safe="/._-~")


def _samples(o: Observation) -> str:
    if o.n_samples is None:
        return "-"
    text = str(o.n_samples)
    if o.needed_samples:
        text += " " + _t("(about %(n)s needed to decide)") % {"n": o.needed_samples}
    return text


# --- free-form dicts (inventory, profile, measurements) as rows of text -----------------------

def _scalar(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _leaf(key: str, v: Any) -> str:
    """A measurement leaf, with its unit guessed from the key's suffix (``*_bw`` bytes/s,
    ``bytes``, ``seconds``, ``*_ms``); anything else as a plain value."""
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        last = key.rsplit(".", 1)[-1]
        if last.endswith("_bw") or last == "bw":
            return fmt(float(v), "bandwidth")
        if last == "bytes" or last.endswith("_bytes"):
            return fmt(float(v), "bytes")
        if last in ("seconds", "duration") or last.endswith("_s"):
            return fmt(float(v), "duration")
        if last.endswith("_ms"):
            return f"{v:g} ms"
    return _scalar(v)


def flatten(data: Any, prefix: str = "", limit: int = 200) -> list[tuple[str, str]]:
    """Nested dicts/lists as (dotted key, text) rows; lists of scalars joined by commas."""
    rows: list[tuple[str, str]] = []

    def walk(v: Any, key: str) -> None:
        if len(rows) >= limit:
            return
        if isinstance(v, Mapping):
            if not v:
                rows.append((key, "-"))
            for k, sub in v.items():
                walk(sub, f"{key}.{k}" if key else str(k))
        elif isinstance(v, (list, tuple)):
            if all(not isinstance(x, (Mapping, list, tuple)) for x in v):
                rows.append((key, ", ".join(_scalar(x) for x in v) or "-"))
            else:
                for i, sub in enumerate(v):
                    name = sub.get("name") if isinstance(sub, Mapping) else None
                    walk(sub, f"{key}[{name if name is not None else i}]")
        else:
            rows.append((key, _leaf(key, v)))

    walk(data, prefix)
    if len(rows) >= limit:
        rows.append(("…", f"truncated at {limit} rows; see result.json"))
    return rows


def provenance(result: GateResult) -> list[tuple[str, str]]:
    return [
        (N_("Operator"), result.operator or _t("not recorded")),
        (N_("Started"), result.started_at),
        (N_("Finished"), result.finished_at),
        (N_("kvgate version"), result.kvgate_version),
        (N_("Git commit"), result.git_commit or _t("not recorded")),
        (N_("Campaign"), result.campaign),
    ]


@dataclass
class PowerRow:
    """One interval observation's repetitions and power (the "Repetitions and achieved power"
    table beside the checks)."""

    check: str
    path: str
    repetitions: str
    minimum: str
    power: str
    power_repetitions: str


def _count(value: Optional[int]) -> str:
    return "-" if value is None else str(value)


def power_rows(result: GateResult) -> list[PowerRow]:
    """Every interval check's observations that recorded a minimum or an achieved power
    (``observations[].n_samples, min_samples, power, power_repetitions``); point checks have none."""
    return [PowerRow(check=c.id, path=o.path, repetitions=_count(o.n_samples), minimum=_count(o.min_samples),
                     power="-" if o.power is None else f"{o.power * 100:.0f}%",
                     power_repetitions=_count(o.power_repetitions))
            for c in result.checks if c.statistic == "interval"
            for o in c.observations if o.power is not None or o.min_samples is not None]


def _json_text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def accepted_mismatches(result: GateResult) -> list[tuple[str, str, str]]:
    """The workload differences accepted with ``--allow-baseline-mismatch``
    (``result.json: baseline.accepted_mismatches``) as (field, baseline value, this run's value),
    values as JSON text (a string shows its quotes, so ``"2048"`` and ``2048`` differ)."""
    b = result.baseline
    if not isinstance(b, Mapping):
        return []
    return [(str(a.get("field", "?")), _json_text(a.get("baseline")), _json_text(a.get("this_run")))
            for a in b.get("accepted_mismatches") or [] if isinstance(a, Mapping)]


@dataclass
class GateView:
    result: GateResult
    verdict: Verdict
    verdict_text: str
    exit_code: int
    exit_meaning: str
    checks: list[CheckRow]
    counts: dict[str, int]
    blockers_not_passed: list[str]
    provenance: list[tuple[str, str]]
    overrides: list[CheckRow]
    emulated: bool
    emulation_notice: str
    inventory_rows: list[tuple[str, str]]
    profile_rows: list[tuple[str, str]]
    extra_measurements: list[tuple[str, list[tuple[str, str]]]]
    dirname: str = ""  # the gate's directory name inside its campaign (campaign report links)
    manifest_sha256: str = ""  # sha256 of the gate's MANIFEST.sha256 (campaign report), "" if none
    power: list[PowerRow] = field(default_factory=list)
    accepted_mismatches: list[tuple[str, str, str]] = field(default_factory=list)


# measurements with a table or section of their own (tables.py, _g4_soak, _cliff, _tier_hits, ...);
# any other key is shown as rows of text
OWN_SECTIONS = ("sweep", "fio", "expected", "soak", "checkpoint", "modelload", "tier_hits", "expected_reuse",
                "cliff", "nightly", "bandwidth_curve",
                "provisioned")  # provisioned: page one's notice per target


def gate_view(result: GateResult, find_evidence: Optional[Callable[[str], list[str]]] = None) -> GateView:
    """Rows of a gate report; ``find_evidence`` names evidence files for observations that
    recorded none (``harness.report.evidence``)."""
    rows = [check_row(c, find_evidence) for c in result.checks]
    counts = {v.value: sum(1 for c in result.checks if c.verdict is v) for v in Verdict}
    extra = [(name, flatten(value)) for name, value in result.measurements.items()
             if name not in OWN_SECTIONS]
    return GateView(
        result=result, verdict=result.verdict, verdict_text=VERDICT_TEXT[result.verdict],
        exit_code=result.exit_code, exit_meaning=EXIT_MEANINGS.get(result.exit_code, "unknown exit code"),
        checks=rows, counts=counts,
        blockers_not_passed=[r.id for r in rows if r.severity == "blocker" and not r.passed
                             and r.verdict is not Verdict.NOT_APPLICABLE],
        provenance=provenance(result),
        overrides=[r for r in rows if r.override_reason], emulated=result.emulated,
        emulation_notice=EMULATION_NOTICE, inventory_rows=flatten(result.inventory),
        profile_rows=flatten(result.profile), extra_measurements=extra,
        power=power_rows(result), accepted_mismatches=accepted_mismatches(result))


SWEEP_COLUMNS = ("ttft_p50_ms", "ttft_p99_ms", "mean_queue_ms", "output_throughput", "request_throughput",
                 "completed", "failed", "repetitions")


def _cell(v: Any) -> str:
    if isinstance(v, float) and math.isfinite(v) and not v.is_integer():
        return f"{v:,.1f}" if abs(v) >= 10 else f"{v:.3g}"
    return _scalar(v)


def sweep_rows(measurements: Mapping[str, Any]) -> list[list[str]]:
    """The sweep as a table: arm, concurrency, then ``SWEEP_COLUMNS``."""
    sweep = measurements.get("sweep")
    rows: list[list[str]] = []
    if not isinstance(sweep, Mapping):
        return rows
    for arm, points in sweep.items():
        if not isinstance(points, Mapping):
            continue
        keyed = sorted(points.items(), key=lambda kv: (concurrency_of(kv[0]) or 0, str(kv[0])))
        for ckey, v in keyed:
            if not isinstance(v, Mapping):
                continue
            rows.append([str(arm), str(ckey)] + [_cell(v.get(k)) for k in SWEEP_COLUMNS])
    return rows


def fio_rows(measurements: Mapping[str, Any]) -> list[list[str]]:
    fio = measurements.get("fio")
    rows: list[list[str]] = []
    if not isinstance(fio, Mapping):
        return rows
    for node, targets in fio.items():
        if not isinstance(targets, Mapping):
            continue
        for target, v in targets.items():
            if not isinstance(v, Mapping):
                continue
            rows.append([str(node), str(target)] + [
                fmt(v.get(k), "bandwidth") if isinstance(v.get(k), (int, float))
                and not isinstance(v.get(k), bool) else _scalar(v.get(k))
                for k in ("seq_read_bw", "seq_write_bw")])
    return rows


def campaign_verdict(verdicts: Sequence[Verdict]) -> Verdict:
    """PASS only when every gate present passed; otherwise the most serious verdict."""
    for v in (Verdict.ERROR, Verdict.FAIL, Verdict.NOT_RUN, Verdict.INCONCLUSIVE):
        if v in verdicts:
            return v
    return Verdict.PASS if verdicts else Verdict.NOT_RUN


def campaign_provenance(name: str, results: Sequence[GateResult]) -> list[tuple[str, str]]:
    """When and by whom, for a whole campaign: from its first gate's start to its last gate's end
    (ISO-8601 UTC strings sort in time order), never one gate's times as the campaign's."""
    starts = sorted(r.started_at for r in results if r.started_at)
    ends = sorted(r.finished_at for r in results if r.finished_at)
    operators = sorted({r.operator for r in results if r.operator})
    versions = sorted({r.kvgate_version for r in results if r.kvgate_version})
    commits = sorted({r.git_commit for r in results if r.git_commit})
    return [
        (N_("Campaign"), name),
        (N_("Started (first gate)"), starts[0] if starts else _t("not recorded")),
        (N_("Finished (last gate)"), ends[-1] if ends else _t("not recorded")),
        (N_("Operators"), ", ".join(operators) or _t("not recorded")),
        (N_("kvgate version"), ", ".join(versions) or _t("not recorded")),
        (N_("Git commit"), ", ".join(commits) or _t("not recorded")),
    ]


def baseline_rows(result: GateResult) -> list[tuple[str, str]]:
    """The G2 baseline a gate compared against and every difference accepted with
    ``--allow-baseline-mismatch``, as (label msgid, text) rows."""
    b = result.baseline
    if not isinstance(b, Mapping):
        return []
    rows = [(N_("Baseline used"), _t("%(where)s (fingerprint %(digest)s)") % {
        "where": b.get("where", "?"), "digest": str(b.get("digest", "?"))[:16]})]
    if b.get("manifest_sha256"):  # recorded since issue 27: what pins the baseline
        pinned = _t("%(gate)s of campaign %(campaign)s: %(sha)s") % {
            "gate": b.get("gate", "G2"), "campaign": b.get("campaign", "?"), "sha": b["manifest_sha256"]}
        rows.append((N_("Baseline manifest (sha256 of MANIFEST.sha256)"), pinned))
        signers = [f"{s.get('role')} {s.get('signer_id')} ({s.get('fingerprint')})"
                   for s in b.get("signers") or [] if isinstance(s, Mapping)]
        rows.append((N_("Baseline signers"), "; ".join(signers) or "-"))
        rows.append((N_("Baseline custody"), "VERIFIED" if b.get("verified") else
                     _t("unsigned baseline (--allow-unsigned-baseline): %(why)s") % {
                         "why": say(str(b.get("unverified_reason", "?")), _t)}))
    for a in b.get("accepted_mismatches") or []:
        if isinstance(a, Mapping):
            rows.append((N_("Accepted mismatch (--allow-baseline-mismatch)"),
                         _t("%(field)s: baseline %(baseline)s, this run %(this_run)s") % {
                             "field": a.get("field", "?"), "baseline": repr(a.get("baseline")),
                             "this_run": repr(a.get("this_run"))}))
    return rows

"""The nightly regression run: a short measurement, recorded in the history, compared with the
recent runs of the same series (workload fingerprint), reported as result.json + JUnit + HTML +
a trend page under ``reports/nightly-<UTC date-time>/nightly/``.

Steps:

1. Validate the inventory and profile (exit 2 before anything is touched) and open the history
   database (unreachable: exit 4 before measuring).
2. Measure: fio on the candidate arm's storage target (``--fio-repetitions`` runs, so bandwidth has
   samples for a rank test), then the candidate arm's sweep (the profile's concurrencies x
   repetitions, cold-restore protocol), and the baseline arm's sweep with ``--with-baseline``.
   A failed step is a recorded fault; whatever was measured is kept.
3. Compare: per metric, this run's samples against the last ``--baseline-window`` runs of the
   series that had no infrastructure fault (``harness.gates.regression``), and change points over
   the series. One check per tracked metric: a regression FAILs it, no change or an improvement
   PASSes it (an improvement is named), too little history makes it INCONCLUSIVE, an unmeasured
   metric is NOT_RUN. The verdict and exit code come from ``build_gate_result`` (0 no regression,
   1 regression, 3 not enough history, 4 infrastructure fault).
4. Record the run in the history (also when it regressed: a regression that stays is a new level,
   which the change points show) and render the reports and the trend page.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from harness import __version__
from harness.config.crosscheck import check_profile
from harness.config.gatespec import GateSpec
from harness.config.loader import load_gate, load_inventory, load_profile
from harness.errors import ConfigErrors, InfraError, InputError
from harness.exitcodes import ExitCode
from harness.gates.fingerprint import fingerprint_record, workload_fingerprint
from harness.gates.regression import (
    ChangePoint,
    Status,
    WindowComparison,
    change_points,
    compare_to_window,
    min_effect_for,
    what_changed,
)
from harness.gates.result import build_gate_result, utc_now, utc_stamp
from harness.gates.stats import percentile
from harness.paths import gates_dir, reports_dir
from harness.pipelines.nightly import wording
from harness.pipelines.nightly.historyrecords import NIGHTLY_GATE, record_from_result, series_key
from harness.pipelines.shared.context import GateRun, StandaloneOptions, open_standalone_run, summary_of
from harness.pipelines.shared.provisioned import check_enforceable, enforced_rates
from harness.pipelines.shared.sweep import load_sweep, run_arm_sweep
from harness.pipelines.shared.sweepdata import Sweep, sweep_table
from harness.probes.fio_run import run_fio_probe
from harness.progress import Progress
from harness.store.campaign import GateDir
from harness.store.historydb import HistoryDB, StoredRun, open_history
from harness.store.schema import CheckResult, GateResult, Interval, Observation, Verdict

__all__ = ["NightlyOptions", "NightlyOutcome", "run_nightly", "nightly_spec"]

DEFAULT_WINDOW = 10
CHANGE_POINT_SPAN = 365  # runs of the series looked at for change points and drawn on the trend page


@dataclass
class NightlyOptions(StandaloneOptions):
    baseline_window: int = DEFAULT_WINDOW
    min_history: int = 1
    min_effect: dict[str, float] = field(default_factory=dict)  # metric-name part -> fraction
    fio_repetitions: int = 5
    with_baseline: bool = False


@dataclass
class NightlyOutcome:
    exit_code: ExitCode
    verdict: Verdict
    path: Path
    result: GateResult
    comparisons: list[WindowComparison]
    regressions: list[dict[str, Any]]
    improvements: list[dict[str, Any]]
    run_id: int
    series: str
    reports: list[Path]


def nightly_spec() -> GateSpec:
    """The nightly's 'gate': its checks are built per tracked metric at run time. Built without
    validation because its id is not one of G1-G4 (it has no gate file to validate against)."""
    return GateSpec.model_construct(id="nightly", title="Nightly regression",
                                    description="No tracked metric got worse than the recent runs of its series",
                                    prerequisites=[], checks=[])


def _gate_specs() -> list[GateSpec]:
    base = gates_dir()
    if base is None:
        return []
    return [load_gate(p) for p in sorted(Path(base).glob("G*.yaml"))]


def _metric(samples: list[float], unit: str, better: str) -> dict[str, Any]:
    xs = [float(x) for x in samples]
    return {"unit": unit, "better": better, "n": len(xs), "samples": xs,
            "median": statistics.median(xs) if xs else None,
            "low": min(xs) if xs else None, "high": max(xs) if xs else None}


def _sweep_metrics(concurrencies: list[int], sweep: Sweep, prefix: str) -> dict[str, dict[str, Any]]:
    """The tracked sweep metrics: every concurrency of the PROFILE gets its two metrics, with no
    samples when nothing was measured there (so its check is NOT_RUN, never silently absent)."""
    out: dict[str, dict[str, Any]] = {}
    for conc in sorted(concurrencies):
        reps = [r for r in sweep.get(conc, []) if r.completed > 0]
        out[f"{prefix}.c{conc}.ttft_p50_ms"] = _metric([percentile(r.ttft_ms, 50) for r in reps if r.ttft_ms],
                                                       "ms", "lower")
        out[f"{prefix}.c{conc}.output_throughput"] = _metric([r.output_throughput for r in reps], "tok/s", "higher")
    return out


def _fio_metrics(run: GateRun, reps: int) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    arm = run.profile.arm(run.profile.candidate)
    if arm.storage is None:
        run.notes.append(f"arm {arm.name!r} has no storage target: no fio figures")
        return {}, {}
    node = run.node_with_target(arm.storage)
    target = node.target(arm.storage)
    assert target is not None
    read: list[float] = []
    for i in range(1, reps + 1):
        key = f"fio/{node.name}/{target.name}/r{i}"
        done = run.gate_dir.step_done(key)
        if done is None:
            out_dir = Path(run.gate_dir.evidence_path(f"fio/{node.name}/{target.name}/r{i}"))
            with Progress(f"nightly fio {node.name}/{target.name} run {i}/{reps}", enabled=run.progress) as p:
                try:
                    res = run_fio_probe(run.executor(node.name), target, run.profile.probes.fio, out_dir,
                                        job_sets=["seq-read"], progress=p)
                except (InfraError, InputError) as exc:
                    run.fault(f"{node.name}: fio on target {target.name} failed", exc)
                    break
            js = res.job_sets.get("seq-read")
            done = {"seq_read_bw": js.read_bw_bytes if js is not None else None}
            run.gate_dir.mark_step_done(key, done)
        if done.get("seq_read_bw") is not None:
            read.append(float(done["seq_read_bw"]))
    name = f"fio.{node.name}.{target.name}.seq_read_bw"
    chart = {node.name: {target.name: {"seq_read_bw": statistics.median(read) if read else None}}}
    return {name: _metric(read, "B/s", "higher")}, chart


def _versions(run: GateRun) -> dict[str, dict[str, str]]:
    """Software versions of the server nodes (engine, LMCache, drivers, kernel, fio), from their
    facts, so a regression can say what changed. A node whose facts fail is a warning: the
    measurement does not depend on it."""
    from harness.facts.collect import collect_facts

    out: dict[str, dict[str, str]] = {}
    for node in run.server_nodes():
        try:
            facts = collect_facts(run.executor(node.name), node)
        except (InfraError, OSError) as exc:
            run.warn(f"{node.name}: versions not collected", exc)
            continue
        run.gate_dir.write_evidence_json(f"facts/{node.name}.json", facts.model_dump(mode="json"))
        out[node.name] = {k: str(v) for k, v in facts.versions.items() if v}
    return out


def _sweep_arm(run: GateRun, arm: str, label: str) -> Sweep:
    try:
        return run_arm_sweep(run, arm, label=label)
    except InfraError as exc:
        run.fault(f"the {label} sweep stopped", exc)
        return load_sweep(run, arm, run.profile.load.concurrency, run.profile.load.repetitions)


def _provenance(r: Any) -> dict[str, Any]:
    return {"git_commit": r.git_commit, "kvgate_version": r.kvgate_version, "nodes": r.nodes, "versions": r.versions}


def _run_ref(r: Any) -> dict[str, Any]:
    return {"id": getattr(r, "id", None), "campaign": r.campaign, "started_at": r.started_at,
            "git_commit": r.git_commit}


def _check_id(metric: str) -> str:
    return re.sub(r"[^a-z0-9_]+", "_", metric.lower()).strip("_")


def _check(c: WindowComparison, unit: str) -> CheckResult:
    verdict = {Status.REGRESSION: Verdict.FAIL, Status.IMPROVEMENT: Verdict.PASS, Status.NO_CHANGE: Verdict.PASS,
               Status.NOT_ENOUGH_HISTORY: Verdict.INCONCLUSIVE, Status.NOT_MEASURED: Verdict.NOT_RUN}[c.status]
    worse = "rise" if c.better == "lower" else "drop"
    expected = f"no significant {worse} of {c.min_effect:.0%} or more"
    interval = (Interval(low=c.effect_low, high=c.effect_high, confidence=0.95, method="bootstrap-percentile",
                         resamples=2000) if c.effect_low is not None and c.effect_high is not None else None)
    measured_text = (f"{c.effect:+.1%} vs the last {c.window_runs} run(s) ({wording.status_word(c)})"
                     if c.effect is not None else wording.status_word(c))
    why = wording.reason(c, unit)
    obs = Observation(path=c.metric, measured=c.effect, measured_text=measured_text, expected_text=expected,
                      interval=interval, n_samples=c.n_current, verdict=verdict, reason=why)
    # the effect is a relative change: shown as a percentage (+345.2%), never as a ratio (3.45x)
    return CheckResult(
        id=_check_id(c.metric), description=f"{c.metric} ({unit}, {c.better} is better) against the recent runs",
        metric=c.metric, comparator="<=" if c.better == "lower" else ">=", threshold=f"{c.min_effect:.0%}",
        threshold_value=c.min_effect, unit_kind="percent", severity="blocker", statistic="interval",
        confidence=0.95, verdict=verdict, reason=why, observations=[obs])


def _first_bad(n_history: int, window: int, cps: list[ChangePoint], status: Status) -> int:
    """Index in ``history + [this run]`` of the first run at the new level: the latest confirmed
    change point in the same direction when it is the series' last one and lies inside the window
    (the change began a few nights ago and this run confirms it), else this run."""
    if cps and cps[-1].status is status and n_history - window <= cps[-1].index <= n_history:
        return cps[-1].index
    return n_history


def _describe(c: WindowComparison, history: list[StoredRun], window: int, this: dict[str, Any],
              cps: list[ChangePoint]) -> dict[str, Any]:
    runs: list[Any] = list(history)
    first = _first_bad(len(history), window, cps, c.status)
    bad = this if first == len(history) else _run_ref(runs[first])
    bad_prov = this["provenance"] if first == len(history) else _provenance(runs[first])
    good = runs[first - 1] if first >= 1 else None
    return {
        "metric": c.metric, "status": wording.status_word(c), "effect": c.effect, "effect_low": c.effect_low,
        "effect_high": c.effect_high, "p_value": c.p_value, "current_median": c.current_median,
        "window_median": c.window_median, "window_runs": c.window_runs, "min_effect": c.min_effect,
        "last_good": _run_ref(good) if good is not None else None,
        "first_bad": {k: v for k, v in bad.items() if k != "provenance"},
        "what_changed": what_changed(_provenance(good), bad_prov) if good is not None else [],
    }


def run_nightly(*, inventory_path: Path, profile_path: Path, history: Optional[str] = None,
                reports_root: Optional[Path] = None, options: Optional[NightlyOptions] = None) -> NightlyOutcome:
    """One nightly run (see the module docstring)."""
    opts = options or NightlyOptions()
    if opts.baseline_window < 1:
        raise InputError(f"--baseline-window must be at least 1, got {opts.baseline_window}")
    inventory = load_inventory(inventory_path)
    profile = load_profile(profile_path)
    problems = check_profile(profile, [inventory], _gate_specs(), None, str(profile_path))
    if problems:
        raise ConfigErrors(problems)
    root = Path(reports_root) if reports_root else reports_dir()
    with open_history(history, root) as db:
        return _run(db, inventory_path, profile_path, inventory, profile, root, opts)


def _run(db: HistoryDB, inventory_path: Path, profile_path: Path, inventory: Any, profile: Any, root: Path,
         opts: NightlyOptions) -> NightlyOutcome:
    name = opts.campaign or f"nightly-{utc_stamp()}"
    # reports/nightly-<time>/nightly/
    check_enforceable(inventory, accept_new_host_keys=opts.accept_new_host_keys)  # before anything is created
    run = open_standalone_run(root, name, NIGHTLY_GATE, nightly_spec(), inventory, profile,
                              inventory_path=inventory_path, profile_path=profile_path, opts=opts)
    camp, gate_dir, spec = run.campaign, run.gate_dir, run.spec
    try:
        started = utc_now()
        summary = summary_of(run)
        # The series is the workload fingerprint of the candidate arm (harness.gates.fingerprint),
        # without the engine version: an engine upgrade is exactly what a nightly must catch, so it
        # is provenance ("what changed"), not identity.
        fingerprint = fingerprint_record(workload_fingerprint(profile, arm=profile.candidate, inventory=inventory))
        series, fp_fields = series_key({"fingerprint": fingerprint})
        with enforced_rates(run):  # a target's provisioned rate, enforced as in the gates
            measured = _measure(run, summary, opts)
        metrics = measured.metrics
        # History of this series, without runs that met an infrastructure fault.
        past = [r for r in db.runs(series=series, limit=CHANGE_POINT_SPAN, with_metrics=True)
                if r.exit_code != int(ExitCode.INFRA_FAULT)]
        window = past[-opts.baseline_window:]
        this_ref = _this_run_ref(name, started, camp.meta, [n.name for n in inventory.nodes], measured.versions,
                                 summary["profile"].get("engine_version"))
        # A metric the series tracked before and this run lacks is checked too (NOT_RUN), never dropped.
        for r in window:
            for rec in r.metrics:
                if rec.name not in metrics:
                    metrics[rec.name] = _metric([], rec.unit, rec.better)
        judged = _judge(metrics, past, window, this_ref, opts)
        if not metrics and not run.faults:
            run.fault("nothing was measured")
        notes = [*run.notes,
                 f"series {series[:12]}: {len(past)} earlier run(s); window {len(window)} of "
                 f"--baseline-window {opts.baseline_window}",
                 *(f"improvement: {imp['metric']} {imp['effect']:+.1%}" for imp in judged.improvements)]
        measurements: dict[str, Any] = {
            "nightly": {"series": series, "fingerprint": fp_fields, "metrics": metrics,
                        "regressions": judged.regressions, "improvements": judged.improvements,
                        "change_points": judged.change_points, "window": [_run_ref(r) for r in window]},
            "sweep": {arm: sweep_table(s) for arm, s in measured.sweeps.items()},
        }
        if measured.fio_chart:
            measurements["fio"] = measured.fio_chart
        result = build_gate_result(
            spec, judged.checks, campaign=name, started_at=started, campaign_meta=camp.meta,
            inventory=summary["inventory"], profile=summary["profile"], measurements=measurements,
            faults=run.faults, notes=notes, emulated=profile.engine.kind == "sim", fingerprint=fingerprint)
        gate_dir.write_result(result)
        record = record_from_result(result, source=str(gate_dir.result_path))
        run_id, _created = db.add_run(record)
        reports = _render(gate_dir, db, series)
        return NightlyOutcome(ExitCode(result.exit_code), result.verdict, gate_dir.path, result, judged.comparisons,
                              judged.regressions, judged.improvements, run_id, series, reports)
    finally:
        camp.close()


@dataclass
class _Measured:
    """What a nightly run measured: node versions, metrics (samples, unit, better), fio's chart, sweeps."""

    versions: dict[str, dict[str, str]]
    metrics: dict[str, dict[str, Any]]
    fio_chart: dict[str, Any]
    sweeps: dict[str, Sweep]


def _measure(run: GateRun, summary: dict[str, Any], opts: NightlyOptions) -> _Measured:
    """Versions, fio and the candidate's sweep (and the baseline's when asked); the nodes are released
    whatever happens."""
    profile = run.profile
    try:
        versions = _versions(run)
        for node in summary["inventory"]["nodes"]:
            if versions.get(node["name"]):
                node["versions"] = versions[node["name"]]
        if profile.engine.kind == "sim":
            summary["profile"]["engine_version"] = f"kvgate KV emulator {__version__}"
        metrics, fio_chart = _fio_metrics(run, opts.fio_repetitions)
        sweeps = {profile.candidate: _sweep_arm(run, profile.candidate, f"candidate ({profile.candidate})")}
        concs = list(profile.load.concurrency)
        metrics.update(_sweep_metrics(concs, sweeps[profile.candidate], "candidate"))
        if opts.with_baseline and profile.baseline != profile.candidate:
            sweeps[profile.baseline] = _sweep_arm(run, profile.baseline, f"baseline ({profile.baseline})")
            metrics.update(_sweep_metrics(concs, sweeps[profile.baseline], "baseline"))
    finally:
        run.close()
    return _Measured(versions, metrics, fio_chart, sweeps)


@dataclass
class _Judged:
    """Every metric against its window: the comparisons, their checks, regressions, improvements and
    the change points of each metric's series."""

    comparisons: list[WindowComparison] = field(default_factory=list)
    checks: list[CheckResult] = field(default_factory=list)
    regressions: list[dict[str, Any]] = field(default_factory=list)
    improvements: list[dict[str, Any]] = field(default_factory=list)
    change_points: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def _judge(metrics: dict[str, dict[str, Any]], past: list[StoredRun], window: list[StoredRun], this_ref: dict[str, Any],
           opts: NightlyOptions) -> _Judged:
    out = _Judged()
    for metric in sorted(metrics):
        m = metrics[metric]
        effect = min_effect_for(metric, opts.min_effect)
        win = [_samples(r, metric) for r in window]
        c = compare_to_window(metric, m["samples"], win, better=m["better"], min_effect=effect,
                              min_runs=opts.min_history)
        meds = [_median(r, metric) for r in past] + [m["median"]]
        cps = change_points(meds, better=m["better"], min_effect=effect) if len(meds) >= 6 else []
        out.change_points[metric] = [
            {"index": cp.index, "run": _run_ref(past[cp.index]) if cp.index < len(past) else
             {k: v for k, v in this_ref.items() if k != "provenance"},
             "effect": cp.effect, "p_value": cp.p_value, "status": cp.status.value}
            for cp in cps]
        out.comparisons.append(c)
        out.checks.append(_check(c, m["unit"]))
        if c.status is Status.REGRESSION:
            out.regressions.append(_describe(c, past, len(window), this_ref, cps))
        elif c.status is Status.IMPROVEMENT:
            out.improvements.append(_describe(c, past, len(window), this_ref, cps))
    return out


def _this_run_ref(name: str, started: str, meta: dict[str, Any], nodes: list[str],
                  versions: dict[str, dict[str, str]], engine: Optional[str]) -> dict[str, Any]:
    """This run as the regressions and change points name it (``_run_ref``'s shape, with provenance)."""
    return {"id": None, "campaign": name, "started_at": started, "git_commit": meta.get("git_commit"),
            "provenance": {"git_commit": meta.get("git_commit"), "kvgate_version": meta.get("kvgate_version", ""),
                           "nodes": nodes, "versions": _with_engine(nodes, versions, engine)}}


def _with_engine(nodes: list[str], versions: dict[str, dict[str, str]], engine: Optional[str]
                 ) -> dict[str, dict[str, str]]:
    """The versions as the history will store them (``historyrecords``: the engine under every node)."""
    out: dict[str, dict[str, str]] = {}
    for name in nodes:
        sw = dict(versions.get(name) or {})
        if engine:
            sw["engine"] = engine
        if sw:
            out[name] = sw
    return out


def _samples(r: StoredRun, metric: str) -> list[Optional[float]]:
    for m in r.metrics:
        if m.name == metric:
            return list(m.samples) if m.samples else [m.median]
    return []


def _median(r: StoredRun, metric: str) -> Optional[float]:
    for m in r.metrics:
        if m.name == metric:
            return m.median
    return None


def _render(gate_dir: GateDir, db: HistoryDB, series: str) -> list[Path]:
    from harness.report import render_gate_reports, write_manifest
    from harness.report.trend import write_trend_page

    paths = render_gate_reports(gate_dir.path)
    paths.append(write_trend_page(db, series, gate_dir.path / "trend.html", span=CHANGE_POINT_SPAN))
    write_manifest(gate_dir.path)
    return paths


def summarize(outcome: NightlyOutcome) -> Mapping[str, Any]:
    """The figures a caller prints (kept here so the CLI only formats)."""
    return {"regressions": outcome.regressions, "improvements": outcome.improvements}

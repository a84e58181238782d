"""The bandwidth sweep (``kvgate bandwidth-sweep``): how much read bandwidth the candidate's tier needs
for G3 to pass, measured, with its uncertainty.

1. Inputs (exit 2, nothing created): the inventory, the profile and ``gates/G3.yaml`` checked as G3
   checks them; the candidate's target must be a block-device tier whose rate blk-throttle can set
   (``targets``: NFS, Lustre, GDS and memory refused with the reason), and the cgroup must be
   possible there (``check_enforceable`` on a rate of the sweep's).
2. The tier: fio's sequential read on the target as the inventory provisions it (under its own
   declared, enforced rate when it has one; never under a sweep rate), the gates' protocol
   (preconditioned, drained, rounds until steady). Its median is ``tier_fio_read_bps``: each rate of
   the sweep is a fraction of it. The baseline arm is measured once beside it, with G3's
   cold-restore protocol, at the sweep's one concurrency.
3. Each rate, highest first (the profile's ``bandwidth.fractions``, then bisection points where the
   TTFT-reduction verdict changes, until the bracket is within ``bracket_width`` or ``max_points``):
   a cgroup of its own capping the target's devices at the rate; fio's read in it, checked with G1's
   ``provisioned_read`` (not delivered: an error point); the candidate arm's G3 sweep in it (cold
   restore, repetitions, the restore probe); G3's checks on it (``verdicts``).
4. ``measurements["bandwidth_curve"]`` (its layout: the docstring of ``curve``), the brackets
   (``bracket``), and a result whose blockers are the curve's evidence: every rate delivered, every
   point's restores cold and within their storage. The per-rate G3 verdicts are the curve (advisory
   here): a rate at which G3 fails is an answer, not a failure of the sweep.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from harness.config.crosscheck import check_profile
from harness.config.gatespec import GateSpec
from harness.config.loader import load_gate, load_inventory, load_profile
from harness.config.profile import BandwidthSpec, Profile
from harness.config.yamlsource import load_yaml
from harness.errors import ConfigErrors, InfraError, InputError
from harness.estimate.calibration import calibrate_curve
from harness.exitcodes import ExitCode
from harness.gates.evaluate import check_overrides
from harness.gates.gatefile import gate_file_record
from harness.gates.result import build_gate_result, utc_now, utc_stamp
from harness.paths import reports_dir
from harness.pipelines.bandwidth.bracket import next_rate
from harness.pipelines.bandwidth.curve import curve, result_checks
from harness.pipelines.bandwidth.points import (
    PointOutcome,
    SweepContext,
    baseline_figures,
    measure_point,
    point_profile,
    rate_of,
    sub_run,
)
from harness.pipelines.bandwidth.targets import at_rate, check_block_layer, swept_target
from harness.pipelines.bandwidth.verdicts import g3_subset
from harness.pipelines.g3.compare import check_g3_inputs
from harness.pipelines.gaterun.runner import _gate_file
from harness.pipelines.shared.armsteps import arm_cold_restore
from harness.pipelines.shared.context import GateRun, StandaloneOptions, open_standalone_run, summary_of
from harness.pipelines.shared.probesteps import fio_step
from harness.pipelines.shared.provisioned import check_enforceable, enforced_rates, provisioned_labels
from harness.pipelines.shared.sweep import run_arm_sweep
from harness.probes.blkthrottle import rate_text
from harness.store.schema import GateResult, Verdict

__all__ = ["BANDWIDTH_GATE", "BandwidthOptions", "BandwidthOutcome", "run_bandwidth_sweep"]

BANDWIDTH_GATE = "bandwidth"


@dataclass
class BandwidthOptions(StandaloneOptions):
    gates_path: Optional[Path] = None


@dataclass
class BandwidthOutcome:
    exit_code: ExitCode
    verdict: Verdict
    path: Path
    result: GateResult
    reports: list[Path]


def sweep_spec() -> GateSpec:
    """The sweep's 'gate': its checks are G3's and G1's, evaluated per rate (no gate file of its own)."""
    return GateSpec.model_construct(
        id=BANDWIDTH_GATE, title="Bandwidth sweep",
        description="G3 at provisioned read rates of the candidate's tier (blk-throttle): TTFT p50 and throughput "
                    "against bandwidth, and the least bandwidth at which G3's blockers still pass. The blockers here "
                    "are the curve's evidence (each rate delivered, each restore cold and within its storage); "
                    "the per-rate G3 verdicts are the curve",
        prerequisites=[], checks=[])


@dataclass
class _Inputs:
    inventory: Any
    profile: Profile
    spec: BandwidthSpec
    concurrency: int
    g3: GateSpec
    g1: GateSpec
    gate_files: list[dict[str, Any]]


def _inputs(inventory_path: Path, profile_path: Path, gates_path: Optional[Path]) -> _Inputs:
    inventory = load_inventory(inventory_path)
    profile = load_profile(profile_path)
    g3_path, g1_path = _gate_file("G3", gates_path), _gate_file("G1", gates_path)
    g3, g1 = load_gate(g3_path), load_gate(g1_path)
    doc = load_yaml(profile_path)
    problems = check_profile(profile, [inventory], [g3], doc, str(profile_path))
    problems += check_g3_inputs(profile, doc, str(profile_path))
    if problems:
        raise ConfigErrors(problems)
    check_overrides(g3, profile.overrides)
    spec = profile.bandwidth or BandwidthSpec()
    concs = list(profile.load.concurrency)
    conc = spec.concurrency if spec.concurrency is not None else (concs[0] if len(concs) == 1 else None)
    if conc is None or conc not in concs:
        raise InputError(f"{profile_path}: bandwidth.concurrency: expected one of load.concurrency {concs} "
                         f"(the sweep measures one; required when load.concurrency has several), got {conc}")
    return _Inputs(inventory, profile, spec, conc, g3_subset(g3), g1,
                   [gate_file_record(g3_path, g3), gate_file_record(g1_path, g1)])


def check_sweepable(inp: _Inputs, *, accept_new_host_keys: bool = False) -> None:
    """Refuse (exit 2, nothing created) what the sweep cannot set a rate on (``targets``)."""
    from harness.remote.connect import executor_for

    node, target = swept_target(inp.profile, inp.inventory)
    ex = executor_for(inp.inventory, node.name, accept_new_host_keys=accept_new_host_keys)
    try:
        check_block_layer(ex, target)
    finally:
        ex.close()
    check_enforceable(inp.inventory, accept_new_host_keys=accept_new_host_keys)  # as declared
    check_enforceable(at_rate(inp.inventory, node.name, target.name, 1e9),  # and at a rate of the sweep's
                      accept_new_host_keys=accept_new_host_keys)


def _tier_and_baseline(run: GateRun, inp: _Inputs) -> tuple[dict[str, Any], Any, dict[str, Any]]:
    """fio on the tier as provisioned, and the baseline arm once: (tier fio leaf, baseline sweep,
    the baseline's ``recompute`` subtree when it is the recompute arm)."""
    node, target = swept_target(inp.profile, inp.inventory)
    base_prof = point_profile(inp.profile, 0, inp.concurrency)
    br = sub_run(run, base_prof, inp.inventory)
    try:
        with enforced_rates(br):
            fio = fio_step(br, node, target, job_sets=["seq-read"], key="fio/tier")
            base = run_arm_sweep(br, inp.profile.baseline, label=f"baseline ({inp.profile.baseline})")
            recompute: dict[str, Any] = {}
            if inp.profile.recompute == inp.profile.baseline:
                recompute = {"recompute": {"cold_restore": arm_cold_restore(br, inp.profile.baseline, base)}}
    finally:
        br.close()
    return fio.get("seq_read_bw") or {}, base, recompute


def _sweep(ctx: SweepContext, inp: _Inputs, tier_bps: float) -> list[PointOutcome]:
    """The fractions, then bisection on the TTFT-reduction verdict; highest rate first."""
    outcomes: list[PointOutcome] = []
    rates = [(tier_bps * f, f) for f in inp.spec.fractions]
    while rates and len(outcomes) < inp.spec.max_points:
        rate, fraction = rates.pop(0)
        if ctx.run.progress:
            print(f"bandwidth-sweep: point {len(outcomes) + 1} at {rate_text(rate)} ({fraction:.0%} of the tier)",
                  flush=True)
        outcomes.append(measure_point(ctx, len(outcomes) + 1, rate, fraction))
        if not rates:
            nxt = next_rate([o.record for o in outcomes], "ttft_p50_reduction", inp.spec.bracket_width)
            if nxt is not None:
                rates.append((nxt, nxt / tier_bps))
    return sorted(outcomes, key=lambda o: -o.record["provisioned_read_bps"])


def run_bandwidth_sweep(*, inventory_path: Path, profile_path: Path, reports_root: Optional[Path] = None,
                        options: Optional[BandwidthOptions] = None) -> BandwidthOutcome:
    """One bandwidth sweep (see the module docstring)."""
    opts = options or BandwidthOptions()
    inp = _inputs(inventory_path, profile_path, opts.gates_path)
    check_sweepable(inp, accept_new_host_keys=opts.accept_new_host_keys)  # before anything is created
    root = Path(reports_root) if reports_root else reports_dir()
    name = opts.campaign or f"bandwidth-{utc_stamp()}"
    run = open_standalone_run(root, name, BANDWIDTH_GATE, sweep_spec(), inp.inventory, inp.profile,
                              inventory_path=inventory_path, profile_path=profile_path, opts=opts)
    camp = run.campaign
    try:
        started = utc_now()
        outcomes, data = _measure(run, inp)
        result = build_gate_result(
            run.spec, result_checks(outcomes), campaign=name, started_at=started,
            campaign_meta=camp.meta, inventory=summary_of(run)["inventory"], profile=summary_of(run)["profile"],
            measurements={"bandwidth_curve": data["curve"], "provisioned": provisioned_labels(inp.inventory)},
            faults=run.faults, notes=run.notes, emulated=inp.profile.engine.kind == "sim",
            gate_files=inp.gate_files)
        run.gate_dir.write_result(result)
        from harness.report import render_gate_reports, write_manifest

        reports = render_gate_reports(run.gate_dir.path)
        write_manifest(run.gate_dir.path)
        return BandwidthOutcome(ExitCode(result.exit_code), result.verdict, run.gate_dir.path, result, reports)
    finally:
        camp.close()


def _calibrated(run: GateRun, inp: _Inputs, data: dict[str, Any]) -> Optional[dict[str, Any]]:
    """The estimator held to the measured curve (advisory). A fault in it is recorded, never allowed
    to lose the points already measured."""
    try:
        return calibrate_curve(inp.profile, inp.inventory, data)
    except Exception as exc:  # noqa: BLE001 - the curve outlives a bug in its advisory calibration
        run.fault("bandwidth-sweep: the estimator's calibration failed; the curve is kept", exc)
        return None


def _measure(run: GateRun, inp: _Inputs) -> tuple[list[PointOutcome], dict[str, Any]]:
    node, target = swept_target(inp.profile, inp.inventory)
    outcomes: list[PointOutcome] = []
    data: dict[str, Any] = {}
    try:
        leaf, base, recompute = _tier_and_baseline(run, inp)
        tier_bps = rate_of(leaf)
        if tier_bps is None or leaf.get("inconclusive"):
            why = leaf.get("inconclusive") or leaf.get("detail") or "no figure"
            run.fault(f"bandwidth-sweep: the tier's read was not measured ({why}): no rate to take fractions of")
        else:
            g3 = inp.g3
            if not recompute:  # the baseline stores KV (storage against storage): no recompute arm measured
                g3 = g3.model_copy(update={"checks": [c for c in g3.checks if c.id != "recompute_offload_hits"]})
                run.notes.append("the baseline arm is not the recompute arm: recompute_offload_hits is not "
                                 "decided (the sweep compares with the baseline and measures no recompute arm)")
            ctx = SweepContext(run, node, target, inp.concurrency, g3, inp.g1,
                               [o for o in inp.profile.overrides if o.gate == "G3"], base, recompute)
            outcomes = _sweep(ctx, inp, tier_bps)
        data["curve"] = curve(tier_bps, leaf, baseline_figures(base, inp.concurrency), inp.g3, outcomes,
                              [o for o in inp.profile.overrides if o.gate == "G3"], inp.spec, inp.concurrency)
        data["curve"]["estimator"] = _calibrated(run, inp, data["curve"])
    except InfraError as exc:
        run.fault("bandwidth-sweep: stopped", exc)
        data["curve"] = curve(None, {}, baseline_figures({}, inp.concurrency), inp.g3, outcomes, [], inp.spec,
                              inp.concurrency)
    finally:
        run.close()
    return outcomes, data

"""G3, the main gate: the candidate arm under the same workload and cold-restore protocol,
compared per concurrency with the G2 baseline (this campaign's, or another's via --baseline)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any, Optional

from harness.config.crosscheck import _err
from harness.config.profile import Profile
from harness.config.yamlsource import YamlDocument
from harness.errors import ConfigError, InfraError, InputError, KvgateError
from harness.pipelines.g3.identity import compared_tokens, output_identity_measured
from harness.pipelines.shared.armsteps import arm_cold_restore, arm_storage_probes
from harness.pipelines.shared.context import GateRun
from harness.pipelines.shared.loadpoint import expected_reuse_table
from harness.pipelines.shared.slo import capacity_gain_at_slo
from harness.pipelines.shared.sloconfirm import confirm_slo_capacity, load_confirmations
from harness.pipelines.shared.sweep import load_sweep, run_arm_sweep
from harness.pipelines.shared.sweepdata import Sweep, compare_measured, failed_ratio, measurement, sweep_table
from harness.pipelines.shared.tierhits import sweep_tier_rows
from harness.store.campaign import GateDir
from harness.store.schema import Verdict


def check_g3_inputs(profile: Profile, doc: Optional[YamlDocument], path: str) -> list[ConfigError]:
    """What G3 needs from the profile, checked before any node is touched: the candidate arm has a
    storage target and KV offload on (else G3 would measure recompute against recompute, or the
    CPU tier, and call it storage), and the baseline and candidate arms differ in storage."""
    errors: list[ConfigError] = []
    index = {a.name: i for i, a in enumerate(profile.arms)}
    cand = profile.arm(profile.candidate)
    base = profile.arm(profile.baseline)
    ci = index[cand.name]
    if not cand.offload:
        errors.append(_err(doc, ("arms", ci, "offload"),
                           f"G3: the candidate arm {cand.name!r} has offload: false; the candidate must offload "
                           "KV to the storage under test", path))
    if cand.storage is None:
        errors.append(_err(doc, ("arms", ci), f"G3: the candidate arm {cand.name!r} has no storage target; "
                           "name the storage under test with 'storage: TARGET'", path))
    elif base.storage == cand.storage and base.offload:
        errors.append(_err(doc, ("arms", index[base.name], "storage"),
                           f"G3: the baseline arm {base.name!r} and the candidate arm {cand.name!r} both use storage "
                           f"target {cand.storage!r}; G3 compares two different storages", path))
    return errors


def baseline_sweep(run: GateRun, g2: GateDir) -> Sweep:
    """The G2 baseline repetitions, read from the G2 gate's recorded state."""
    profile = run.profile
    sweep = load_sweep(run, profile.baseline, profile.load.concurrency, profile.load.repetitions, gate_dir=g2)
    if not sweep:
        raise InputError(f"the G2 baseline in {g2.path} has no recorded sweep for arm {profile.baseline!r}")
    return sweep


def check_prerequisite(gate_dir: GateDir, where: str, needed_by: str) -> None:
    """Refuse to run ``needed_by`` unless the gate in ``gate_dir`` has passed."""
    pre = gate_dir.gate
    try:
        result = gate_dir.load_result()
    except KvgateError as exc:
        raise InputError(f"{needed_by} needs a passed {pre} ({where}): {exc}") from None
    if result.verdict != Verdict.PASS:
        hint = " or name another campaign with --baseline" if needed_by == "G3" else ""
        raise InputError(f"{needed_by} needs a passed {pre}; {pre} in {where} is {result.verdict.value}, and a gate's "
                         f"result is final in its campaign: run {pre} again in a new campaign{hint}")


def _populate_seconds(base: Path, arm: str, conc: int, reps: int) -> list[float]:
    out = []
    for r in range(1, reps + 1):
        path = base / "evidence" / "sweep" / arm / f"c{conc}" / f"rep{r}" / "populate" / "point-summary.json"
        try:
            duration = json.loads(path.read_text()).get("duration")
        except (OSError, ValueError):
            continue
        if isinstance(duration, (int, float)) and duration > 0:
            out.append(float(duration))
    return out


def write_overhead_measured(cand_base: Path, cand_arm: str, ref_base: Path, ref_arm: str,
                            concurrencies: list[int], reps: int) -> dict[str, Any]:
    """The write path's cost: the candidate's populate pass (which stores every chunk) against the
    reference arm's first pass over the same prompts (which stores nothing), per concurrency."""
    out: dict[str, Any] = {}
    for conc in concurrencies:
        a = _populate_seconds(cand_base, cand_arm, conc, reps)
        b = _populate_seconds(ref_base, ref_arm, conc, reps)
        if not a or not b:
            out[f"c{conc}"] = measurement(None, detail=f"no populate pass recorded for the "
                                          f"{'candidate' if not a else repr(ref_arm)} at concurrency {conc}")
            continue
        ma, mb = statistics.fmean(a), statistics.fmean(b)
        out[f"c{conc}"] = measurement(ma / mb, text=f"{mb:.2f} s -> {ma:.2f} s",
                                      detail=f"populate pass, mean over {len(a)} and {len(b)} repetitions; "
                                             f"reference arm {ref_arm!r}")
    return out


def run_g3(run: GateRun, g2: GateDir) -> tuple[dict[str, Any], dict[str, Any]]:
    profile = run.profile
    base = baseline_sweep(run, g2)
    cand_measured, charts = arm_storage_probes(run, profile.candidate, "candidate")
    sweeps: dict[str, Sweep] = {profile.baseline: base}
    ran: set[str] = set()
    try:
        sweeps[profile.candidate] = run_arm_sweep(run, profile.candidate, label=f"candidate ({profile.candidate})")
        ran.add(profile.candidate)
    except InfraError as exc:
        run.fault(f"the candidate sweep ({profile.candidate}) stopped", exc)
        sweeps[profile.candidate] = load_sweep(run, profile.candidate, profile.load.concurrency,
                                               profile.load.repetitions)
    recompute: Optional[Sweep] = None
    if profile.recompute and profile.recompute not in (profile.baseline, profile.candidate):
        try:
            recompute = run_arm_sweep(run, profile.recompute, label=f"recompute ({profile.recompute})")
        except InfraError as exc:
            run.fault(f"the recompute sweep ({profile.recompute}) stopped", exc)
            recompute = load_sweep(run, profile.recompute, profile.load.concurrency, profile.load.repetitions)
        sweeps[profile.recompute] = recompute
    elif profile.recompute == profile.baseline:
        recompute = base
    cand = sweeps[profile.candidate]
    measured: dict[str, Any] = {
        "candidate": {"fio": cand_measured.get("fio", {}), "failed_ratio": failed_ratio(cand),
                      "cold_restore": arm_cold_restore(run, profile.candidate, cand,
                                                       (cand_measured.get("fio") or {}).get("seq_read_bw"))},
        "compare": compare_measured(cand, base, recompute),
    }
    if recompute is not None and profile.recompute is not None:
        measured["recompute"] = {"cold_restore": arm_cold_restore(run, profile.recompute, recompute)}
    # The reference outputs: the recompute arm's (from G2's records when it is the baseline arm).
    ref_name = profile.recompute or profile.baseline
    ref_sweep = recompute if recompute is not None else base
    ref_base = g2.path if ref_sweep is base else run.path
    measured["compare"]["output_divergence"] = output_identity_measured(
        cand, run.path, ref_sweep, ref_base, profile.load.concurrency, ref_name, tokens=compared_tokens(run.spec))
    if profile.load.cold_restore:
        measured["compare"]["write_overhead"] = write_overhead_measured(
            run.path, profile.candidate, ref_base, ref_name, profile.load.concurrency, profile.load.repetitions)
    if profile.load.slo is not None:
        cand_confirm = confirm_slo_capacity(run, profile.candidate, cand) if profile.candidate in ran else {}
        measured["compare"]["capacity_gain_at_slo"] = capacity_gain_at_slo(
            cand, base, profile.load.slo, cand_confirm, load_confirmations(g2, profile, profile.baseline))
    charts["sweep"] = {arm: sweep_table(s) for arm, s in sweeps.items()}
    charts["tier_hits"] = {a: sweep_tier_rows(s, offload=profile.arm(a).offload) for a, s in sweeps.items()}
    if profile.load.workload == "hash-trace":  # the trace's expected reuse beside the measured hit rate (i19)
        charts["expected_reuse"] = expected_reuse_table(profile, charts["tier_hits"])
    # --- estimate (i15): expected vs measured and the estimate_agreement leaves ---
    from harness.estimate.gatehook import add_expected, baseline_read_bw, fio_value

    bw = {a: v for a, v in ((profile.candidate, fio_value(cand_measured.get("fio", {}))),
                            (profile.baseline, baseline_read_bw(run.profile, g2))) if v}
    add_expected(run, measured, charts, bw)
    # --- end estimate ---
    return measured, charts

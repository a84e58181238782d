"""The capacity-cliff sweep (``kvgate cliff``): where each KV tier fills, and what that costs.

For every swept arm and every working-set size of the profile's ``cliff`` section (``n`` distinct
prefixes of ``prefix_len`` tokens):

1. the point's requests are a hash-id trace (``harness.load.hashtrace.working_set_trace``, block =
   the arm's LMCache chunk): a populate pass over the ``n`` prefixes, then the measured pass(es);
   the trace is kept as evidence in Mooncake JSONL, so the same point replays with the
   ``hash-trace`` workload;
2. one engine per arm serves the points in turn (a restart per point costs seconds of polling
   and changes nothing measured): each point's block ids are new, so an earlier point's chunks
   are only older entries of every tier, evicted before any of this point's, and each tier holds
   exactly what it would hold starting empty. The populate pass runs, the metrics are scraped,
   the measured requests run, the metrics are scraped again; after the last point the engine
   stops and its KV directories are removed (by containment);
3. the point records the prompt tokens served per tier from the engine's counters
   (``tierhits``), TTFT p50/p99, and the **expected reuse**: the share of measured prompt tokens an
   LRU of the arm's largest tier would serve (``hashtrace.expected_reuse``, populate pass as warm-up),
   plus the same for an LRU of each tier's size alone.

Tier boundaries (where each tier fills) are computed, never measured: tier bytes over the KV bytes
per token of the model geometry (the emulator's: its chunk files, ``kv_scale`` and alignment
included; a real engine's: ``harness.estimate`` geometry per TP rank). A tier whose size the
profile does not give (a real engine's HBM, an unbounded disk) has no boundary, and says so.

The expected figure models the tiers as inclusive (every stored chunk in every offload tier, one
LRU of the largest). That is exact for the cyclic order (past a tier's size an LRU walked
cyclically reuses nothing, whatever the policy). With ``order: random`` past the largest tier an
engine whose tiers are not inclusive (the emulator's CPU tier keeps chunks its disk tier evicted)
serves more: up to ``exclusive_hit_rate`` (one LRU of the summed sizes), also recorded.

One check decides the exit code through ``build_gate_result``: ``hit_rate_matches_tier_size``, per
arm and point, the measured hit rate (engine prefix cache + offload tiers) within 5 points of the
expected reuse. A point not measured, whose counters are missing, or whose populate pass's stores
had not landed when its measurement began, is NOT_RUN, never PASS or FAIL. The
result goes to ``reports/cliff-<UTC time>/cliff/`` (result.json, report.html with the cliff charts,
MANIFEST.sha256).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from harness.config.crosscheck import check_profile
from harness.config.gatespec import GateSpec
from harness.config.loader import load_inventory, load_profile
from harness.config.profile import Arm, CliffSpec, Profile
from harness.engines import EngineInstance, get_engine
from harness.engines.base import Engine
from harness.engines.lmcache import disk_ranks
from harness.engines.planning import is_mla
from harness.errors import ConfigErrors, InfraError, InputError
from harness.exitcodes import ExitCode
from harness.gates.result import build_gate_result, utc_now, utc_stamp
from harness.gates.stats import percentile
from harness.load.hashtrace import TraceRequest, build_prompt, expected_reuse, trace_lines, working_set_trace
from harness.load.spec import RequestSpec
from harness.load.workloads import count_tokens
from harness.paths import reports_dir
from harness.pipelines.shared.context import GateRun, StandaloneOptions, open_standalone_run, summary_of
from harness.pipelines.shared.loadpoint import run_point
from harness.pipelines.shared.provisioned import check_enforceable, enforced_rates
from harness.pipelines.shared.sweep import _scrape, _start_instances, _stop_instances
from harness.pipelines.shared.tierhits import tier_hits, tier_rates, tier_rows
from harness.progress import Progress
from harness.store.schema import CheckResult, GateResult, Observation, Verdict

__all__ = ["CLIFF_GATE", "TOLERANCE", "CliffOptions", "CliffOutcome", "cliff_spec", "run_cliff",
           "tier_capacities"]

CLIFF_GATE = "cliff"
TOLERANCE = 0.05  # the "within 5 points" of the expected reuse
CHECK_ID = "hit_rate_matches_tier_size"
LMCACHE_GIB = 1024**3  # LMCache sizes its tiers as GB * 1024**3


@dataclass
class CliffOptions(StandaloneOptions):
    """The cliff takes nothing more than every standalone run."""


@dataclass
class CliffOutcome:
    exit_code: ExitCode
    verdict: Verdict
    path: Path
    result: GateResult
    reports: list[Path]


def cliff_spec() -> GateSpec:
    """The cliff's 'gate': its one check is built at run time (no gate file, like the nightly)."""
    return GateSpec.model_construct(id=CLIFF_GATE, title="Capacity cliff",
                                    description="Hit rate and TTFT against the working-set size, per KV tier",
                                    prerequisites=[], checks=[])


# --- tier sizes ---------------------------------------------------------------------------------

def kv_bytes_per_token(profile: Profile) -> int:
    """KV bytes per token of the whole model (every TP rank together): the x axis of the cliff."""
    return profile.model.kv_geometry.bytes_per_token


def tier_capacities(profile: Profile, arm: Arm) -> dict[str, dict[str, Any]]:
    """Per tier of ``arm``: ``tokens`` it holds (None: not given, or unbounded) and why.

    The emulator stores one file per chunk of ``aligned(bytes_per_token x chunk x kv_scale)`` bytes
    and its CPU tier counts the same size, so a tier of B bytes holds ``B // chunk_bytes`` whole
    chunks; its HBM holds ``hbm_tokens // chunk`` chunks. A real engine's tiers are per TP rank
    (in-process LMCache divides the disk size by the ranks that store: all, or the first alone for
    MLA), each rank holding its share of a token's KV; its HBM prefix cache is not sized by the profile."""
    cs = arm.lmcache.chunk_size
    lm = arm.lmcache
    bpt = kv_bytes_per_token(profile)
    out: dict[str, dict[str, Any]] = {}
    if profile.engine.kind == "sim":
        from harness.sim import directio

        chunk_bytes = directio.aligned_size(max(int(bpt * cs * profile.engine.sim.kv_scale), directio.HEADER))
        out["hbm"] = {"tokens": profile.engine.sim.hbm_tokens // cs * cs,
                      "how": f"emulator HBM: {profile.engine.sim.hbm_tokens} tokens in whole {cs}-token chunks"}

        def fits(nbytes: int) -> int:
            return nbytes // chunk_bytes * cs

        how = f"{chunk_bytes} B per {cs}-token chunk file (kv_scale {profile.engine.sim.kv_scale:g})"
    else:
        from harness.estimate.loader import geometry_for_profile

        tp = profile.model.tensor_parallel_size
        per_rank_token = bpt * geometry_for_profile(profile).rank_share(tp)
        out["hbm"] = {"tokens": None, "how": "the engine's HBM prefix cache is not sized by the profile"}

        def fits(nbytes: int) -> int:
            return int(nbytes // (per_rank_token * cs)) * cs

        how = f"{per_rank_token:.0f} B per token per TP rank ({tp} ranks)"
    if not arm.offload:
        return out
    if lm.local_cpu:
        out["local_cpu"] = {"tokens": fits(int(lm.max_local_cpu_size * LMCACHE_GIB)),
                            "how": f"max_local_cpu_size {lm.max_local_cpu_size:g} GB; {how}"}
    if arm.storage:
        disk = int(lm.max_local_disk_size * LMCACHE_GIB)
        if profile.engine.kind != "sim" and lm.mode == "in_process":
            # LMCache applies the size to each rank that stores (the first alone for MLA)
            disk //= disk_ranks(lm, tp=profile.model.tensor_parallel_size, mla=is_mla(profile))
        out["local_disk"] = ({"tokens": fits(disk), "how": f"max_local_disk_size {lm.max_local_disk_size:g} GB; {how}"}
                             if disk > 0 else {"tokens": None, "how": "max_local_disk_size 0: unbounded"})
    return out


def _largest(caps: dict[str, dict[str, Any]]) -> tuple[Optional[str], Optional[int]]:
    """The tier whose LRU bounds the reuse of an inclusive hierarchy (every stored chunk goes to
    every offload tier): the largest; (tier, None) when it is unbounded; (None, None) when unknown."""
    offload = [t for t in caps if t != "hbm"]
    if offload:
        unbounded = [t for t in offload if caps[t]["tokens"] is None]
        if unbounded:
            return unbounded[0], None
        best = max(offload, key=lambda t: caps[t]["tokens"])
        return best, int(caps[best]["tokens"])
    hbm = caps.get("hbm", {}).get("tokens")
    return ("hbm", int(hbm)) if hbm is not None else (None, None)


# --- inputs -------------------------------------------------------------------------------------

def check_cliff_inputs(profile: Profile, source: str) -> tuple[CliffSpec, list[Arm]]:
    """The cliff section and the swept arms, or an InputError naming the field."""
    spec = profile.cliff
    if spec is None:
        raise InputError(f"{source}: the profile has no 'cliff' section (working-set sizes to sweep); see "
                         "profiles/demo-cliff.yaml")
    names = spec.arms or [a.name for a in profile.arms]
    known = [a.name for a in profile.arms]
    arms = []
    for name in names:
        if name not in known:
            raise InputError(f"{source}: cliff.arms: {name!r} is not one of the arms ({', '.join(known)})")
        arm = profile.arm(name)
        cs = arm.lmcache.chunk_size
        if spec.prefix_len % cs:
            raise InputError(f"{source}: cliff.prefix_len {spec.prefix_len}: expected whole chunks of arm "
                             f"{name!r} (chunk_size {cs})")
        if spec.suffix_len >= cs:
            raise InputError(f"{source}: cliff.suffix_len {spec.suffix_len}: expected fewer tokens than a chunk "
                             f"of arm {name!r} ({cs})")
        arms.append(arm)
    return spec, arms


# --- one point ----------------------------------------------------------------------------------

def _requests(reqs: list[TraceRequest], block: int, seed: int, tag: str) -> list[RequestSpec]:
    out = []
    for r in reqs:
        prompt = build_prompt(r, block, seed)
        out.append(RequestSpec(f"{tag}-{r.line:06d}", prompt, count_tokens(prompt), r.output_length,
                               meta={"workload": "cliff", "trace_line": r.line, **r.extra}))
    return out


def _expected(reqs: list[TraceRequest], populate: int, block: int, caps: dict[str, dict[str, Any]]
              ) -> dict[str, Any]:
    pairs = [(r.input_length, r.hash_ids) for r in reqs]
    tier, tokens = _largest(caps)
    out: dict[str, Any] = {"tier": tier, "capacity_tokens": tokens, "hit_rate": None, "by_tier": {}}
    if tier is not None:
        est = expected_reuse(pairs, block, (tokens or 0) // block, count_from=populate)
        out["hit_rate"] = est.ratio
        out["prompt_tokens"] = est.prompt_tokens
        out["reused_tokens"] = est.reused_tokens
    for name, cap in caps.items():
        if cap["tokens"] is not None:
            out["by_tier"][name] = expected_reuse(pairs, block, cap["tokens"] // block, count_from=populate).ratio
    # The other bound, for information: tiers holding disjoint chunks (an exclusive hierarchy) reuse
    # like one LRU of their summed size. The check uses the inclusive figure above.
    sizes = [c["tokens"] for c in caps.values()]
    if sizes and all(s is not None for s in sizes):
        out["exclusive_hit_rate"] = expected_reuse(pairs, block, sum(s // block for s in sizes if s is not None),
                                                   count_from=populate).ratio
    return out


STORED = "lmcache:num_stored_tokens"
# The bound on waiting for the populate pass's stores. Generous: the wait ends as soon as they
# landed, and a machine whose disk is shared (CI: fio beside it) took longer than 30 s.
SETTLE_S = 120.0


def _stored(snaps: list[Any]) -> Optional[float]:
    values = [s.value(STORED) if s is not None else None for s in snaps]
    return None if not values or any(v is None for v in values) else float(sum(v for v in values if v is not None))


def _settle(run: GateRun, engine: Engine, instances: list[EngineInstance], arm: Arm, want_tokens: int,
            point: dict[str, Any]) -> list[Any]:
    """The scrape that opens the measured window, taken once the populate pass's chunks are stored.

    Engines store new KV behind the response (the emulator's write-behind, LMCache's asynchronous
    store); on a busy node the measured requests could otherwise overtake the stores and miss
    chunks the LRU model counts as present. Waits until the store counter rose by the populate
    pass's whole chunks since the previous point (at most ``SETTLE_S``); an engine that exposes no
    store counter is measured at once, and the point says so. ``point["settled"]``: True, False (the
    point is then NOT_RUN: its tiers did not hold what the LRU model counts), None (no counter)."""
    snaps = _scrape(run, engine, instances)
    if not arm.offload:
        return snaps
    start = _stored(snaps)
    if start is None:
        point["settle"] = f"the engine exposes no {STORED}: measured without waiting for its stores"
        return snaps
    target = float(point.get("stored_before") or 0.0) + want_tokens
    deadline = time.monotonic() + SETTLE_S
    stored: Optional[float] = start
    while stored is not None and stored < target and time.monotonic() < deadline:
        time.sleep(0.2)
        snaps = _scrape(run, engine, instances)
        stored = _stored(snaps)
    point["settle"] = (f"{STORED} reached {stored:.0f} of {target:.0f} before the measurement"
                       if stored is not None else f"{STORED} disappeared while waiting")
    point["settled"] = stored is not None and stored >= target
    if not point["settled"]:
        run.notes.append(f"{arm.name} {point['prefixes']} prefixes: {point['settle']} after {SETTLE_S:.0f} s; "
                         "the point is not judged")
    return snaps


def _run_point(run: GateRun, engine: Engine, instances: list[EngineInstance], arm: Arm, spec: CliffSpec,
               prefixes: int, first_id: int, stored_before: Optional[float], progress: Progress) -> dict[str, Any]:
    """Measure one working-set size of ``arm`` on its running engine; returns the point's record."""
    profile = run.profile
    cs = arm.lmcache.chunk_size
    caps = tier_capacities(profile, arm)
    reqs, populate = working_set_trace(prefixes=prefixes, prefix_blocks=spec.prefix_len // cs, block_size=cs,
                                       suffix_len=spec.suffix_len, passes=spec.passes, order=spec.order,
                                       output_length=spec.output_len, seed=profile.load.seed, first_id=first_id)
    key = f"cliff/{arm.name}/ws{prefixes}"
    point_dir = run.gate_dir.evidence_path(key)
    point_dir.mkdir(parents=True, exist_ok=True)
    (point_dir / "trace.jsonl").write_text("".join(trace_lines(reqs)))
    tokens = prefixes * spec.prefix_len
    point: dict[str, Any] = {
        "prefixes": prefixes, "tokens": tokens, "bytes": tokens * kv_bytes_per_token(profile),
        "requests": len(reqs) - populate, "populate_requests": populate,
        "expected": _expected(reqs, populate, cs, caps), "evidence": [f"evidence/{key}/trace.jsonl"],
        "stored_before": stored_before,
    }
    specs = _requests(reqs, cs, profile.load.seed, f"ws{prefixes}")
    client = run.client_node(run.server_nodes()[0])
    progress.status(f"{arm.name} ws{prefixes}: populating {populate} prefixes")
    run_point(run, client, instances, specs[:populate], spec.concurrency, point_dir / "populate",
              f"{arm.name} ws{prefixes} populate")
    before = _settle(run, engine, instances, arm, populate * (spec.prefix_len // cs) * cs, point)
    progress.status(f"{arm.name} ws{prefixes}: measuring {len(specs) - populate} requests")
    res = run_point(run, client, instances, specs[populate:], spec.concurrency, point_dir / "measure",
                    f"{arm.name} ws{prefixes}")
    after = _scrape(run, engine, instances)
    point["stored_after"] = _stored(after)
    hits = tier_hits(before, after, cs)
    if not arm.offload and hits.get("offload") is None:
        hits["offload"] = 0.0  # no connector at all: nothing can come from an offload tier
    rates = tier_rates(hits)
    point.update({
        "hits": hits, "rates": rates, "measured_hit_rate": rates["total"],
        "ttft_p50_ms": percentile(res.ttft_ms, 50) if res.ttft_ms else None,
        "ttft_p99_ms": percentile(res.ttft_ms, 99) if res.ttft_ms else None,
        "completed": res.summary.get("completed"), "failed": res.summary.get("failed"),
    })
    point["evidence"] += res.evidence
    (point_dir / "point.json").write_text(json.dumps(point, indent=2, default=str) + "\n")
    return point


# --- the check ----------------------------------------------------------------------------------

def _pct(x: Optional[float]) -> str:
    return "-" if x is None else f"{x * 100:.1f}%"


def _observation(arm: str, prefixes: int, point: Optional[dict[str, Any]], fault: Optional[str]) -> Observation:
    """The point's observation; ``measured`` is the distance (a fraction) between the measured hit
    rate and the expected reuse, the figure the threshold applies to."""
    path = f"cliff.hit_rate_gap.{arm}.ws{prefixes}"
    expected_text = f"within {TOLERANCE * 100:.0f} points of the expected reuse"
    if point is None:
        return Observation(path=path, expected_text=expected_text, verdict=Verdict.NOT_RUN,
                           reason=fault or "the point was not measured", caused_by_fault=fault is not None)
    exp = point["expected"]
    measured = point.get("measured_hit_rate")
    evidence = list(point.get("evidence") or [])
    if not point.get("completed") or point.get("failed"):
        return Observation(path=path, expected_text=expected_text, verdict=Verdict.NOT_RUN,
                           reason=f"{point.get('completed') or 0} request(s) completed, {point.get('failed') or 0} "
                                  "failed: the point's counters do not describe the trace", evidence=evidence)
    if point.get("settled") is False:
        # the tiers still lacked chunks the model counts as present (or, LRU order shifted by the
        # late stores, held ones it counts as evicted): unlike states, whatever the figure reads
        return Observation(path=path, expected_text=expected_text, verdict=Verdict.NOT_RUN, evidence=evidence,
                           reason=f"the populate pass's stores had not landed when the measurement began "
                                  f"({point.get('settle')} after {SETTLE_S:.0f} s)")
    if measured is None:
        return Observation(path=path, expected_text=expected_text, verdict=Verdict.NOT_RUN, evidence=evidence,
                           reason="the engine exposed no prefix-cache query/hit or offload-hit counters")
    if exp.get("hit_rate") is None:
        return Observation(path=path, measured_text=f"{_pct(measured)} measured", expected_text=expected_text,
                           verdict=Verdict.NOT_RUN, evidence=evidence,
                           reason="no tier of this arm has a size in the profile: no expected reuse")
    diff = measured - exp["hit_rate"]
    ok = abs(diff) <= TOLERANCE + 1e-12
    text = f"{_pct(measured)} vs {_pct(exp['hit_rate'])} ({diff * 100:+.1f} pt)"
    return Observation(path=path, measured=abs(diff), measured_text=text,
                       expected_text=f"{_pct(exp['hit_rate'])} +- {TOLERANCE * 100:.0f} points "
                                     f"(LRU of the {exp['tier']} tier)",
                       verdict=Verdict.PASS if ok else Verdict.FAIL, evidence=evidence,
                       reason="" if ok else f"measured hit rate is {abs(diff) * 100:.1f} points from the "
                                            "expected reuse: the tiers do not hold what their sizes say")


def _check(observations: list[Observation]) -> CheckResult:
    verdicts = [o.verdict for o in observations]
    if Verdict.FAIL in verdicts:
        verdict, reason = Verdict.FAIL, f"{verdicts.count(Verdict.FAIL)} point(s) off the expected reuse"
    elif Verdict.NOT_RUN in verdicts or not verdicts:
        verdict, reason = Verdict.NOT_RUN, f"{verdicts.count(Verdict.NOT_RUN)} point(s) without a measured hit rate"
    else:
        verdict, reason = Verdict.PASS, ""
    return CheckResult(
        id=CHECK_ID, description="Measured hit rate (engine counters) matches the reuse an LRU of the "
        "configured tier size gives for the same requests, at every working-set size",
        metric="cliff.hit_rate_gap.*", comparator="<=", threshold=f"{TOLERANCE * 100:.0f} points",
        threshold_value=TOLERANCE, unit_kind="percent", severity="blocker", statistic="point",
        verdict=verdict, reason=reason, observations=observations)


def _sweep_arm(run: GateRun, arm: Arm, spec: CliffSpec, progress: Progress,
               observations: list[Observation]) -> dict[str, Any]:
    """Every working-set size of ``arm`` on one engine; an observation per size is appended."""
    profile = run.profile
    bpt = kv_bytes_per_token(profile)
    caps = tier_capacities(profile, arm)
    boundaries = {t: {**c, "bytes": c["tokens"] * bpt if c["tokens"] is not None else None} for t, c in caps.items()}
    points: list[dict[str, Any]] = []
    fault: Optional[str] = None
    engine = get_engine(profile.engine.kind)
    instances: list[EngineInstance] = []
    try:
        try:
            progress.status(f"{arm.name}: starting {profile.engine.kind}", force=True)
            instances = _start_instances(run, engine, run.server_nodes()[0], arm)
        except InfraError as exc:
            fault = f"arm {arm.name}: the engine did not start: {exc}"
            run.fault(f"cliff: arm {arm.name}: the engine did not start", exc)
        first_id = 0
        stored: Optional[float] = 0.0  # a fresh engine has stored nothing
        for n in spec.prefixes:
            point = None
            if fault is None:
                try:
                    point = _run_point(run, engine, instances, arm, spec, n, first_id, stored, progress)
                    stored = point.get("stored_after")
                except InfraError as exc:
                    fault = f"arm {arm.name} stopped at {n} prefixes: {exc}"
                    run.fault(f"cliff: arm {arm.name} at {n} prefixes", exc)
            # more ids than the point uses (its prefix blocks and one suffix block per request)
            first_id += n * (spec.prefix_len // arm.lmcache.chunk_size + 1) * (spec.passes + 1)
            if point is not None:
                points.append(point)
                run.gate_dir.mark_step_done(f"cliff/{arm.name}/ws{n}", point)
                progress.update(1, f"{arm.name} ws{n}: hit {_pct(point['measured_hit_rate'])} "
                                   f"(expected {_pct(point['expected']['hit_rate'])}), TTFT p50 "
                                   f"{point['ttft_p50_ms'] or math.nan:.0f} ms")
            observations.append(_observation(arm.name, n, point, fault))
    finally:
        if instances:
            _stop_instances(run, engine, instances, arm)
    return {"offload": arm.offload, "chunk_size": arm.lmcache.chunk_size, "boundaries": boundaries,
            "points": points}


# --- the run ------------------------------------------------------------------------------------

def run_cliff(*, inventory_path: Path, profile_path: Path, reports_root: Optional[Path] = None,
              options: Optional[CliffOptions] = None) -> CliffOutcome:
    """One capacity-cliff sweep (see the module docstring)."""
    opts = options or CliffOptions()
    inventory = load_inventory(inventory_path)
    profile = load_profile(profile_path)
    problems = check_profile(profile, [inventory], [], None, str(profile_path))
    if problems:
        raise ConfigErrors(problems)
    spec, arms = check_cliff_inputs(profile, str(profile_path))
    root = Path(reports_root) if reports_root else reports_dir()
    name = opts.campaign or f"cliff-{utc_stamp()}"
    check_enforceable(inventory, accept_new_host_keys=opts.accept_new_host_keys)  # before anything is created
    run = open_standalone_run(root, name, CLIFF_GATE, cliff_spec(), inventory, profile,
                              inventory_path=inventory_path, profile_path=profile_path, opts=opts)
    camp, gate_dir, gspec = run.campaign, run.gate_dir, run.spec
    try:
        started = utc_now()
        summary = summary_of(run)
        bpt = kv_bytes_per_token(profile)
        cliff: dict[str, Any] = {"kv_bytes_per_token": bpt, "prefix_len": spec.prefix_len,
                                 "order": spec.order, "passes": spec.passes, "tolerance": TOLERANCE, "arms": {}}
        observations: list[Observation] = []
        tier_table: dict[str, list[dict[str, Any]]] = {}
        progress = Progress("cliff", total=len(arms) * len(spec.prefixes), enabled=opts.progress)
        try:
            with enforced_rates(run):  # a target's provisioned rate, enforced as in the gates
                for arm in arms:
                    cliff["arms"][arm.name] = _sweep_arm(run, arm, spec, progress, observations)
                    points = cliff["arms"][arm.name]["points"]
                    tier_table[arm.name] = tier_rows([(f"{p['prefixes']} prefixes", p["hits"]) for p in points])
        finally:
            progress.finish("cliff done")
            run.close()
        notes = list(run.notes)
        notes.append(f"working set = prefixes x {spec.prefix_len} tokens x {bpt} B of KV per token (model "
                     f"geometry); {spec.order} order, {spec.passes} measured pass(es) after a populate pass; "
                     "one engine per arm, new block ids per point")
        measurements: dict[str, Any] = {"cliff": cliff, "tier_hits": tier_table}
        result = build_gate_result(
            gspec, [_check(observations)], campaign=name, started_at=started, campaign_meta=camp.meta,
            inventory=summary["inventory"], profile=summary["profile"], measurements=measurements,
            faults=run.faults, notes=notes, emulated=profile.engine.kind == "sim")
        gate_dir.write_result(result)
        from harness.report import render_gate_reports, write_manifest

        reports = render_gate_reports(gate_dir.path)
        write_manifest(gate_dir.path)
        return CliffOutcome(ExitCode(result.exit_code), result.verdict, gate_dir.path, result, reports)
    finally:
        camp.close()


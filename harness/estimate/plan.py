"""The estimate of one profile: KV sizes, capacity plan, predicted TTFT and throughput per arm and
concurrency, break-even bandwidth and the bandwidth the G3 TTFT threshold needs.

Pure: every input is a plain value or an already-loaded model (``Profile``); the CLI and the gate
pipelines gather the inputs (config.json, inventory, measured bandwidths) and call
``estimate_profile``. The result is a JSON-able dict (``Estimate.as_dict``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Optional

from harness.config.profile import Arm, Profile
from harness.estimate.geometry import ModelGeometry, kv_sizes
from harness.estimate.hardware import ACCELERATORS, Accelerator
from harness.estimate.timing import (
    Compute,
    Engine,
    PointPrediction,
    Tier,
    Workload,
    bandwidth_for_reduction,
    break_even_bandwidth,
    predict_point,
)

LMCACHE_GIB = 1024**3  # LMCache sizes its tiers as GB x 1024**3
# The emulator reads each request's chunks in one of 4 reader threads (harness/sim/kvstore.py,
# ThreadPoolExecutor(max_workers=4)); a real LMCache's parallelism is not modelled (None).
SIM_READ_STREAMS = 4
DEFAULT_EFFICIENCY = 0.4  # share of the peak a long prefill reaches; set it, or calibrate it
DEFAULT_MAX_BATCH = 256  # vLLM's --max-num-seqs default
DEFAULT_DECODE_TPS = 20.0  # per-request decode rate on a real engine when none is given
DEFAULT_GPU_UTIL = 0.9  # vLLM's --gpu-memory-utilization default
G3_TTFT_REDUCTION = 0.25  # gates/G3.yaml ttft_p50_reduction
G3_READ_BW = 5e9  # gates/G3.yaml read_bandwidth


@dataclass
class EstimateInputs:
    """What the estimate needs beyond the profile. Bandwidths are per arm name, B/s."""

    geometry: ModelGeometry
    accelerator: Optional[Accelerator] = None
    peak_flops: Optional[float] = None  # per device; overrides the preset
    efficiency: float = DEFAULT_EFFICIENCY
    hbm_bytes: Optional[float] = None  # per device; overrides the preset
    read_bw: dict[str, float] = field(default_factory=dict)
    read_bw_source: dict[str, str] = field(default_factory=dict)
    per_chunk_s: float = 0.0
    stream_bw: dict[str, float] = field(default_factory=dict)  # one request's sequential read rate
    decode_tokens_per_s: Optional[float] = None
    compute_tokens_per_s: Optional[float] = None  # a calibrated prefill rate (replaces FLOPs)
    compute_flops_per_s: Optional[float] = None  # calibrated effective FLOP/s of one instance
    compute_source: str = ""
    g3_reduction: float = G3_TTFT_REDUCTION
    g3_read_bw: float = G3_READ_BW


@dataclass
class Estimate:
    data: dict[str, Any]
    engine: Optional[Engine]
    workload: Workload

    def as_dict(self) -> dict[str, Any]:
        return self.data


def _arg(extra: list[str], flag: str) -> Optional[str]:
    for i, a in enumerate(extra):
        if a == flag and i + 1 < len(extra):
            return extra[i + 1]
        if a.startswith(flag + "="):
            return a.split("=", 1)[1]
    return None


def _float_arg(extra: list[str], flag: str, default: float) -> float:
    v = _arg(extra, flag)
    try:
        return float(v) if v is not None else default
    except ValueError:
        return default


def devices_per_instance(profile: Profile) -> int:
    return profile.model.tensor_parallel_size * profile.model.nodes_per_instance


def build_engine(profile: Profile, inp: EstimateInputs, notes: list[str]) -> Optional[Engine]:
    """The engine side of the time model, or None when compute cannot be known (notes say why)."""
    eng = profile.engine
    if eng.kind == "sim":
        s = eng.sim
        rate = inp.compute_tokens_per_s or s.prefill_tokens_per_s
        return Engine(Compute(tokens_per_s=rate, shared=False), s.max_batch, s.decode_tokens_per_s)
    max_batch = int(_float_arg(eng.extra_args, "--max-num-seqs", DEFAULT_MAX_BATCH))
    decode = inp.decode_tokens_per_s or DEFAULT_DECODE_TPS
    if inp.decode_tokens_per_s is None:
        notes.append(f"decode rate assumed {DEFAULT_DECODE_TPS:g} tok/s per request (give --decode-tps)")
    if inp.compute_tokens_per_s is not None:
        return Engine(Compute(tokens_per_s=inp.compute_tokens_per_s, shared=True), max_batch, decode)
    if inp.compute_flops_per_s is not None:
        return Engine(Compute(flops_per_s=inp.compute_flops_per_s, shared=True), max_batch, decode)
    peak = inp.peak_flops or (inp.accelerator.peak_flops if inp.accelerator else None)
    if peak is None:
        acc = inp.accelerator.name if inp.accelerator else "the accelerator (no inventory given)"
        notes.append(f"no peak FLOP/s for {acc}: TTFT, break-even and G3 bandwidth need --peak-tflops "
                     "(or --campaign with a measured recompute arm to calibrate)")
        return None
    if inp.peak_flops is None and inp.accelerator is not None and inp.accelerator.stand_in:
        notes.append(f"peak of {inp.accelerator.name}: {inp.accelerator.stand_in}")
    flops = peak * devices_per_instance(profile) * inp.efficiency
    return Engine(Compute(flops_per_s=flops, shared=True), max_batch, decode)


def _tier(profile: Profile, arm: Arm, inp: EstimateInputs) -> Optional[Tier]:
    bw = inp.read_bw.get(arm.name)
    if bw is None:
        return None
    streams = SIM_READ_STREAMS if profile.engine.kind == "sim" else None
    return Tier(arm.storage or arm.name, bw, inp.per_chunk_s, inp.stream_bw.get(arm.name), streams)


def capacity_plan(profile: Profile, inp: EstimateInputs, request_bytes: int) -> dict[str, Any]:
    """KV footprint against HBM, the CPU tier and the disk tier of every offloading arm."""
    geom = inp.geometry
    out: dict[str, Any] = {"request_bytes": request_bytes, "concurrency": list(profile.load.concurrency)}
    hbm = inp.hbm_bytes or (inp.accelerator.memory_bytes if inp.accelerator else None)
    devices = devices_per_instance(profile)
    if hbm is not None:
        util = _float_arg(profile.engine.extra_args, "--gpu-memory-utilization", DEFAULT_GPU_UTIL)
        weights = (geom.total_params or 0.0) * geom.weight_dtype_bytes
        budget = hbm * devices * util - weights
        out["hbm"] = {
            "per_device": hbm, "devices": devices, "utilization": util, "weights": weights,
            "kv_budget": budget,
            "requests_fit": int(budget // request_bytes) if budget > 0 and request_bytes else 0,
            "fits": {str(c): budget > 0 and c * request_bytes <= budget for c in profile.load.concurrency},
        }
    working_set = profile.load.prompts_per_point  # contexts one point populates (long-doc: one per prompt)
    arms: dict[str, Any] = {}
    for arm in profile.arms:
        if not arm.offload:
            continue
        lm = arm.lmcache
        cpu = lm.max_local_cpu_size * LMCACHE_GIB if lm.local_cpu else 0.0
        disk = lm.max_local_disk_size * LMCACHE_GIB if arm.storage else 0.0
        held = int(disk // request_bytes) if request_bytes else 0
        arms[arm.name] = {
            "cpu_bytes": cpu, "cpu_requests": int(cpu // request_bytes) if request_bytes else 0,
            "disk_bytes": disk, "disk_requests": held, "working_set_requests": working_set,
            "recompute_share": max(0.0, 1.0 - held / working_set) if working_set else 0.0,
        }
    out["arms"] = arms
    return out


def estimate_profile(profile: Profile, inp: EstimateInputs) -> Estimate:
    """Everything ``kvgate estimate`` prints and the reports' expected block; see the module doc."""
    geom = inp.geometry
    load = profile.load
    notes: list[str] = []
    chunk = next((a.lmcache.chunk_size for a in profile.arms if a.offload), 256)
    query = 16 if load.workload == "long-doc" else 0  # the long-doc question after the document
    request_tokens = load.input_len + query
    sizes = kv_sizes(geom, request_tokens=request_tokens, chunk_size=chunk, tp=profile.model.tensor_parallel_size)
    cap = capacity_plan(profile, inp, sizes.per_request)
    data: dict[str, Any] = {
        "model": _model_data(geom),
        "kv": {
            "per_token": sizes.per_token, "per_chunk": sizes.per_chunk, "chunk_size": chunk,
            "per_request": sizes.per_request, "request_tokens": request_tokens,
            "per_rank_per_request": sizes.per_rank_per_request, "tp": sizes.tp,
        },
        "capacity": cap,
        "accelerator": _accelerator_data(profile, inp),
        "notes": notes,
    }
    if profile.engine.kind != "sim" and geom.active_params is not None:
        # the break-even of the reused context on each preset part with a published peak, at the
        # profile's devices per instance and the efficiency: a reference when the part is unknown
        data["break_even_by_accelerator"] = {
            a.name: break_even_bandwidth(geom, Compute(flops_per_s=a.peak_flops * devices_per_instance(profile)
                                                       * inp.efficiency), request_tokens)
            for a in ACCELERATORS.values() if a.peak_flops is not None and not a.stand_in}
    cap["devices"] = devices_per_instance(profile)
    # restore-bound G3 need: TTFT scales with 1/bandwidth, so a reduction r needs 1/(1-r) the bandwidth
    data["g3"] = {"ttft_reduction": inp.g3_reduction, "read_bw_threshold": inp.g3_read_bw,
                  "needed_ratio": 1.0 / (1.0 - inp.g3_reduction), "needed_bw": {}}
    engine = build_engine(profile, inp, notes)
    work = Workload(request_tokens, load.output_len, chunk, load.hit_ratio)
    est = Estimate(data, engine, work)
    if inp.compute_source:
        notes.append(inp.compute_source)
    if engine is None:
        return est
    data["compute"] = {"flops_per_s": engine.compute.flops_per_s, "tokens_per_s": engine.compute.tokens_per_s,
                       "shared": engine.compute.shared, "max_batch": engine.max_batch,
                       "decode_tokens_per_s": engine.decode_tokens_per_s,
                       "recompute_s": engine.compute.seconds(geom, request_tokens)}
    be = break_even_bandwidth(geom, engine.compute, request_tokens, per_chunk_s=inp.per_chunk_s, chunk_size=chunk)
    data["break_even_bw"] = be
    arms_out, tiers = _predict_arms(profile, inp, engine, work, cap)
    data["arms"] = arms_out
    data["compare"] = _compare(profile, arms_out)
    data["g3"] = _g3_needs(profile, inp, geom, engine, work, tiers, arms_out)
    return est


def _model_data(geom: ModelGeometry) -> dict[str, Any]:
    return {
        "name": geom.name, "source": geom.source, "attention": geom.attention, "layers": geom.layers,
        "kv_heads": geom.kv_heads, "head_dim": geom.head_dim, "kv_lora_rank": geom.kv_lora_rank,
        "qk_rope_head_dim": geom.qk_rope_head_dim, "kv_dtype_bytes": geom.kv_dtype_bytes,
        "sliding_layers": geom.sliding_layers, "active_params": geom.active_params,
        "total_params": geom.total_params,
    }


def _accelerator_data(profile: Profile, inp: EstimateInputs) -> Optional[dict[str, Any]]:
    if inp.accelerator is None:
        return None
    return {
        "name": inp.accelerator.name, "peak_flops": inp.peak_flops or inp.accelerator.peak_flops,
        "memory_bytes": inp.hbm_bytes or inp.accelerator.memory_bytes, "source": inp.accelerator.source,
        "devices": devices_per_instance(profile), "efficiency": inp.efficiency,
        "peak_stand_in": inp.peak_flops is None and bool(inp.accelerator.stand_in),
    }


def _predict_arms(profile: Profile, inp: EstimateInputs, engine: Engine, work: Workload,
                  cap: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Optional[Tier]]]:
    """Each arm's predicted points (its tier's read bandwidth, the share of its contexts its tiers
    cannot hold recomputed), and the tiers; an offload arm with no known bandwidth says what is missing."""
    arms_out: dict[str, Any] = {}
    tiers: dict[str, Optional[Tier]] = {}
    for arm in profile.arms:
        tier = _tier(profile, arm, inp) if arm.offload else None
        tiers[arm.name] = tier
        entry: dict[str, Any] = {"offload": arm.offload, "storage": arm.storage,
                                 "read_bw": tier.read_bw if tier else None,
                                 "read_bw_source": inp.read_bw_source.get(arm.name, ""), "points": {}}
        if arm.offload and tier is None:
            entry["missing"] = (f"no read bandwidth for arm {arm.name!r} (give --read-bw {arm.name}=5GB/s, "
                                "or --campaign with its fio figure)")
            arms_out[arm.name] = entry
            continue
        share = cap["arms"].get(arm.name, {}).get("recompute_share", 0.0)
        arm_work = Workload(work.input_tokens, work.output_tokens, work.chunk_size, work.hit_ratio * (1.0 - share))
        for c in profile.load.concurrency:
            entry["points"][str(c)] = predict_point(inp.geometry, engine, arm_work, tier, c).as_dict()
        arms_out[arm.name] = entry
    return arms_out, tiers


def _p(arms: Mapping[str, Any], arm: Optional[str], c: int) -> Optional[Mapping[str, Any]]:
    if arm is None:
        return None
    pt = arms.get(arm, {}).get("points", {}).get(str(c))
    return pt if isinstance(pt, Mapping) else None


def _compare(profile: Profile, arms: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for c in profile.load.concurrency:
        cand, base = _p(arms, profile.candidate, c), _p(arms, profile.baseline, c)
        rec = _p(arms, profile.recompute, c)
        row: dict[str, Any] = {"ttft_reduction": None, "throughput_gain": None, "recompute_speedup": None}
        if cand and base:
            row["ttft_reduction"] = 1 - cand["ttft_s"] / base["ttft_s"]
            row["throughput_gain"] = cand["output_tokens_per_s"] / base["output_tokens_per_s"] - 1
        if cand and rec:
            row["recompute_speedup"] = rec["ttft_s"] / cand["ttft_s"]
        out[str(c)] = row
    return out


def _g3_needs(profile: Profile, inp: EstimateInputs, geom: ModelGeometry, engine: Engine, work: Workload,
              tiers: Mapping[str, Optional[Tier]], arms: Mapping[str, Any]) -> dict[str, Any]:
    """Bandwidth the candidate needs for the G3 TTFT threshold against the baseline, per concurrency."""
    out: dict[str, Any] = {"ttft_reduction": inp.g3_reduction, "read_bw_threshold": inp.g3_read_bw,
                           "needed_ratio": 1.0 / (1.0 - inp.g3_reduction), "needed_bw": {}}
    cand = profile.arm(profile.candidate)
    template = tiers.get(cand.name) or Tier(cand.storage or cand.name, 1e9, inp.per_chunk_s,
                                            None, SIM_READ_STREAMS if profile.engine.kind == "sim" else None)
    for c in profile.load.concurrency:
        base = _p(arms, profile.baseline, c)
        if base is None:
            out["needed_bw"][str(c)] = None
            continue
        out["needed_bw"][str(c)] = bandwidth_for_reduction(
            geom, engine, work, baseline_ttft_s=float(base["ttft_s"]), reduction=inp.g3_reduction,
            concurrency=c, template=template)
    return out


def point_prediction(d: Mapping[str, Any]) -> PointPrediction:
    """A ``PointPrediction`` back from its dict (reports, calibration); the two limits are absent
    from estimates recorded before they existed."""
    optional = {"ttft_random_s", "ttft_waves_s"}
    return PointPrediction(**{k: d[k] for k in PointPrediction.__dataclass_fields__ if k in d or k not in optional})


def calibrate_compute(profile: Profile, inp: EstimateInputs, concurrency: int, measured_ttft_s: float
                      ) -> Optional[float]:
    """The compute rate at which the recompute arm's predicted TTFT at ``concurrency`` equals the
    measured one: tokens/s per request for the emulator, effective FLOP/s of one instance for a
    real engine (None when the geometry has no parameter count or nothing matches). Set it as
    ``compute_tokens_per_s`` / ``compute_flops_per_s``; that arm then agrees by construction."""
    geom = inp.geometry
    load = profile.load
    request_tokens = load.input_len + (16 if load.workload == "long-doc" else 0)
    work = Workload(request_tokens, load.output_len, 256, 0.0)
    sim = profile.engine.kind == "sim"
    if not sim and geom.active_params is None:
        return None
    probe = EstimateInputs(geometry=geom, decode_tokens_per_s=inp.decode_tokens_per_s, peak_flops=1.0)
    base = build_engine(profile, probe, [])
    if base is None:
        return None

    def ttft(rate: float) -> float:
        compute = Compute(tokens_per_s=rate, shared=not sim) if sim else Compute(flops_per_s=rate, shared=True)
        engine = Engine(compute, base.max_batch, base.decode_tokens_per_s, base.fixed_s)
        return predict_point(geom, engine, work, None, concurrency).ttft_s

    lo, hi = (1.0, 1e12) if sim else (1e9, 1e21)
    if not ttft(hi) <= measured_ttft_s <= ttft(lo):
        return None
    for _ in range(200):  # TTFT falls as the rate grows: bisect on the log of the rate
        mid = (lo * hi) ** 0.5
        if ttft(mid) > measured_ttft_s:
            lo = mid
        else:
            hi = mid
        if hi / lo < 1 + 1e-9:
            break
    return float((lo * hi) ** 0.5)

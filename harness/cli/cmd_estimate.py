"""``kvgate estimate --profile P``: what the storage tier should deliver for a profile (KV sizes,
capacity, predicted TTFT and throughput, break-even bandwidth, the bandwidth G3 needs), and with
``--campaign`` the expected next to the measured."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, Optional

from harness.cli.table import render_table
from harness.config.loader import load_inventory, load_profile
from harness.config.profile import Profile
from harness.errors import InputError
from harness.estimate.calibration import Calibration, load_calibration
from harness.estimate.compare import expected_vs_measured
from harness.estimate.hardware import Accelerator, find_accelerator
from harness.estimate.loader import geometry_for_profile
from harness.estimate.measured import campaign_figures
from harness.estimate.plan import DEFAULT_EFFICIENCY, EstimateInputs, calibrate_compute, estimate_profile
from harness.exitcodes import ExitCode
from harness.paths import reports_dir
from harness.units import UnitKind, UnitParseError, format_quantity, parse_quantity


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "estimate",
        help="what the storage tier should deliver: KV size, break-even and needed bandwidth, expected TTFT",
        description="Estimate a profile's KV cache (per token, chunk, request and TP rank), the capacity "
        "plan against HBM and the LMCache tiers, predicted TTFT p50 and throughput per arm and "
        "concurrency, the break-even read bandwidth against recompute and the bandwidth the G3 TTFT "
        "threshold needs. With --campaign, use its fio bandwidths and print expected vs measured. "
        "Formulas: docs/estimator.md.",
    )
    p.add_argument("--profile", required=True, type=Path, help="profile YAML")
    p.add_argument("--inventory", type=Path, help="inventory YAML (accelerator model, count and memory)")
    p.add_argument("--campaign", help="campaign name (under --reports) or directory: use its measured figures")
    p.add_argument("--calibration", metavar="CAMPAIGN",
                   help="campaign name (under --reports) or directory whose bandwidth sweep calibrated the "
                   "storage path's read efficiency: apply it to the offloading arms' read bandwidths")
    p.add_argument("--reports", type=Path, help="reports root (default: reports/)")
    p.add_argument("--model-config", type=Path, help="the model's config.json (overrides the profile's)")
    p.add_argument("--accelerator", help="accelerator model, e.g. H800, MI308X (default: the inventory's)")
    p.add_argument("--peak-tflops", type=float, help="dense BF16 peak per device, TFLOPS")
    p.add_argument("--efficiency", type=float, default=DEFAULT_EFFICIENCY,
                   help=f"share of the peak a prefill reaches (default {DEFAULT_EFFICIENCY})")
    p.add_argument("--hbm", help="accelerator memory per device, e.g. '192 GB'")
    p.add_argument("--read-bw", action="append", default=[], metavar="ARM=BW",
                   help="read bandwidth of an arm's tier, e.g. candidate=5GB/s (repeatable)")
    p.add_argument("--chunk-overhead", default="0s", help="fixed cost per chunk read, e.g. 2ms (default 0)")
    p.add_argument("--decode-tps", type=float, help="decode tokens/s per request on a real engine")
    p.add_argument("--json", action="store_true", help="print the estimate as JSON")
    p.set_defaults(func=run)


def _quantity(text: str, kind: UnitKind, what: str) -> float:
    try:
        return float(parse_quantity(text, kind).value)
    except UnitParseError as exc:
        raise InputError(f"{what}: {exc}") from None


def _accelerator(args: argparse.Namespace, profile_accelerator: Optional[str] = None
                 ) -> tuple[Optional[Accelerator], Optional[float]]:
    """The accelerator: --accelerator, else the inventory's, else the profile's ``model.accelerator``."""
    name = args.accelerator
    hbm = _quantity(args.hbm, UnitKind.BYTES, "--hbm") if args.hbm else None
    if name is None and args.inventory is not None:
        inv = load_inventory(args.inventory)
        for node in inv.nodes:
            acc = getattr(node, "accelerators", None)
            if acc is not None and getattr(acc, "model", None):
                name = acc.model
                if hbm is None and acc.memory:
                    hbm = float(acc.memory)
                break
    if name is None:
        name = profile_accelerator
    if name is None:
        return None, hbm
    preset = find_accelerator(name)
    if preset is None:
        preset = Accelerator(name, hbm, None, "not a preset: give --peak-tflops and --hbm")
    return preset, hbm


def _campaign_dir(args: argparse.Namespace, name: Optional[str] = None) -> Optional[Path]:
    """The directory of ``name`` (default --campaign): a directory as given, else under --reports."""
    name = args.campaign if name is None else name
    if not name:
        return None
    path = Path(name)
    if path.is_dir():
        return path
    root: Path = args.reports or reports_dir()
    return root / str(name)


def _apply_calibration(profile: Profile, inp: EstimateInputs, cal: Calibration) -> None:
    """The engine gets ``value`` x each offloading arm's tier bandwidth (fio or --read-bw); a
    calibration of another engine kind is refused (one engine's restore path is not another's)."""
    if cal.engine is not None and cal.engine != profile.engine.kind:
        raise InputError(f"{cal.source}: its bandwidth curve was measured with engine {cal.engine!r}; this "
                         f"profile's engine is {profile.engine.kind!r}: the read efficiency of one engine's "
                         "restore path says nothing of another's (calibrate on a campaign of the same engine)")
    for arm in profile.arms:
        if arm.offload and arm.name in inp.read_bw:
            inp.read_bw[arm.name] *= cal.value
            inp.read_bw_source[arm.name] = (f"{inp.read_bw_source.get(arm.name) or 'read bandwidth'} x "
                                            f"{cal.parameter} {cal.value:.3f}")


def _calibration_data(d: dict[str, Any], cal: Calibration) -> None:
    """The calibration block, and G3's needed bandwidth back in the tier's own (fio) terms."""
    needed = d.get("g3", {}).get("needed_bw") or {}
    d["calibration"] = {"parameter": cal.parameter, "value": cal.value, "source": str(cal.source),
                        "worst_calibrated_rel_error": cal.worst_calibrated_rel_error, "limits": cal.limits,
                        "needed_tier_bw": {c: None if v is None else v / cal.value for c, v in needed.items()}}
    d["notes"].append(f"{cal.parameter} {cal.value:.3f} calibrated on the bandwidth curve of {cal.source}: the "
                      "engine's restores get that share of a tier's fio read bandwidth"
                      + (f" (worst calibrated error there {cal.worst_calibrated_rel_error:.1%})"
                         if cal.worst_calibrated_rel_error is not None else ""))
    if cal.limits:
        d["notes"].append(f"calibration limits: {cal.limits}")


def build(args: argparse.Namespace) -> dict[str, Any]:
    profile = load_profile(args.profile)
    geom = geometry_for_profile(profile, profile_path=args.profile, model_config=args.model_config)
    acc, hbm = _accelerator(args, profile.model.accelerator)
    if not 0 < args.efficiency <= 1:
        raise InputError(f"--efficiency {args.efficiency}: expected a share in (0, 1]")
    inp = EstimateInputs(geometry=geom, accelerator=acc, efficiency=args.efficiency, hbm_bytes=hbm,
                         peak_flops=args.peak_tflops * 1e12 if args.peak_tflops else None,
                         per_chunk_s=_quantity(args.chunk_overhead, UnitKind.DURATION, "--chunk-overhead"),
                         decode_tokens_per_s=args.decode_tps)
    camp = _campaign_dir(args)
    figures = campaign_figures(camp, profile) if camp else None
    if figures:
        inp.read_bw.update(figures.read_bw)
        inp.read_bw_source.update(figures.read_bw_source)
    names = {a.name for a in profile.arms}
    for item in args.read_bw:
        arm, sep, bw = item.partition("=")
        if not sep or arm not in names:
            raise InputError(f"--read-bw {item!r}: expected ARM=BANDWIDTH with ARM one of {', '.join(sorted(names))}")
        inp.read_bw[arm] = _quantity(bw, UnitKind.BANDWIDTH, f"--read-bw {arm}")
        inp.read_bw_source[arm] = "given with --read-bw"
    if figures is not None and profile.recompute and figures.sweeps.get(profile.recompute):
        table = figures.sweeps[profile.recompute]
        low = min(table, key=int)
        raw = table[low].get("ttft_p50_ms")
        p50 = float(raw) if isinstance(raw, (int, float)) else 0.0
        rate = calibrate_compute(profile, inp, int(low), p50 / 1000) if p50 > 0 else None
        if rate is not None:
            if profile.engine.kind == "sim":
                inp.compute_tokens_per_s = rate
                what = f"{rate:,.0f} tok/s per request"
            else:
                inp.compute_flops_per_s = rate
                what = f"{rate / 1e12:,.0f} TFLOP/s effective"
            inp.compute_source = (f"compute calibrated from the recompute arm {profile.recompute!r} at c{low} "
                                  f"(measured TTFT p50 {p50 / 1000:.3f} s): {what}; that arm agrees "
                                  "by construction")
    cal_dir = _campaign_dir(args, args.calibration) if args.calibration else None
    cal = load_calibration(cal_dir) if cal_dir is not None else None
    if cal is not None:
        _apply_calibration(profile, inp, cal)
    data = estimate_profile(profile, inp).as_dict()
    if cal is not None:
        _calibration_data(data, cal)
    data["profile"] = profile.name
    data["baseline_offloads"] = profile.arm(profile.baseline).offload
    if figures is not None:
        data["campaign"] = {"path": str(camp), "gates": figures.gates}
        data["expected_vs_measured"] = expected_vs_measured(
            data, figures.sweeps, arms=[a.name for a in profile.arms if a.name in figures.sweeps],
            recompute_arm=profile.recompute)
    return data


def _bytes(v: Optional[float]) -> str:
    return "-" if v is None else format_quantity(v, UnitKind.BYTES)


def _bw(v: Optional[float]) -> str:
    return "unreachable" if v is None else format_quantity(v, UnitKind.BANDWIDTH)


def _gib(v: Optional[float]) -> str:
    if v is None:
        return "-"
    return f"{v / 2**30:,.2f} GiB" if abs(v) >= 2**30 else f"{v / 2**20:,.2f} MiB"


def render_text(d: dict[str, Any]) -> str:
    out: list[str] = [f"Estimate for profile {d['profile']} (formulas: docs/estimator.md)", ""]
    out += _model_lines(d) + _kv_and_capacity_lines(d) + _g3_lines(d) + _calibration_lines(d) + _arm_tables(d)
    out += _expected_vs_measured(d)
    if d["notes"]:
        out += ["", "Notes"] + [f"- {n}" for n in d["notes"]]
    return "\n".join(out)


def _model_lines(d: dict[str, Any]) -> list[str]:
    """The model: geometry, parameters, where they came from."""
    m = d["model"]
    out: list[str] = []
    shape = (f"MLA latent {m['kv_lora_rank']} + rope {m['qk_rope_head_dim']}" if m["attention"] == "mla"
             else f"{m['kv_heads']} KV heads x {m['head_dim']}")
    out.append(f"Model        {m['name']}: {m['layers']} layers, {shape}, KV dtype {m['kv_dtype_bytes']} B"
               + (f", {m['sliding_layers']} sliding-window layers" if m["sliding_layers"] else ""))
    if m["active_params"]:
        out.append(f"             active {m['active_params'] / 1e9:.4g} B params/token (no embeddings), "
                   f"total {m['total_params'] / 1e9:.4g} B")
    out.append(f"             source: {m['source']}")
    out.append("")
    return out


def _kv_and_capacity_lines(d: dict[str, Any]) -> list[str]:
    """KV sizes, what HBM and the tiers hold, the accelerator and the recompute time."""
    kv = d["kv"]
    out: list[str] = []
    out.append(f"KV per token       {kv['per_token']:,} B ({kv['per_token'] / 1024:,.1f} KiB)")
    out.append(f"KV per chunk       {_bytes(kv['per_chunk'])} ({kv['chunk_size']} tokens)")
    out.append(f"KV per request     {_gib(kv['per_request'])} ({kv['request_tokens']:,} tokens)")
    out.append(f"KV per TP rank     {_gib(kv['per_rank_per_request'])} per request (TP {kv['tp']})")
    cap = d["capacity"]
    if "hbm" in cap:
        h = cap["hbm"]
        out.append(f"HBM                {h['devices']} x {_bytes(h['per_device'])} x {h['utilization']:g} - weights "
                   f"{_gib(h['weights'])} = KV budget {_gib(h['kv_budget'])}: {h['requests_fit']} requests fit")
        out.append("                   " + ", ".join(f"c{c} {'fits' if ok else 'does NOT fit'}"
                                                   for c, ok in h["fits"].items()))
    for arm, a in cap["arms"].items():
        out.append(f"Tiers ({arm})".ljust(19) + f"CPU {_gib(a['cpu_bytes'])} holds {a['cpu_requests']} requests; "
                   f"disk {_gib(a['disk_bytes'])} holds {a['disk_requests']} of the {a['working_set_requests']} "
                   f"contexts a point populates; recompute share {a['recompute_share']:.0%}")
    if "hbm" not in cap:
        out.append("HBM                unknown accelerator memory (give --inventory, --accelerator or --hbm)")
    acc = d.get("accelerator")
    if acc:
        peak = "unknown" if acc["peak_flops"] is None else f"{acc['peak_flops'] / 1e12:,.0f} TFLOPS"
        if acc.get("peak_stand_in"):
            peak += " (a stand-in upper bound, see Notes)"
        out.append(f"Accelerator        {acc['name']} x {acc['devices']}, peak {peak}/device, efficiency "
                   f"{acc['efficiency']:g} ({acc['source']})")
    if "compute" in d:
        c = d["compute"]
        rate = (f"{c['flops_per_s'] / 1e12:,.0f} TFLOP/s effective" if c["flops_per_s"]
                else f"{c['tokens_per_s']:,.0f} tok/s per request")
        out.append(f"Recompute          {c['recompute_s']:.3f} s for one request alone ({rate})")
    return out


def _g3_lines(d: dict[str, Any]) -> list[str]:
    """Break-even bandwidth and what G3 needs."""
    kv = d["kv"]
    out: list[str] = []
    out.append("")
    out.append(f"Break-even read bandwidth (restoring {kv['request_tokens']:,} tokens takes as long as "
               f"recomputing them): {_bw(d['break_even_bw']) if 'break_even_bw' in d else 'needs the peak'}")
    if d.get("break_even_by_accelerator"):
        out.append(f"  per preset part (x{d['capacity'].get('devices', '')} devices, same efficiency): " + ", ".join(
            f"{k} {_bw(v)}" for k, v in d["break_even_by_accelerator"].items()))
    g = d["g3"]
    ratio = (f"about {g['needed_ratio']:.2f}x the baseline's when restore dominates TTFT"
             if d.get("baseline_offloads", True) else "what the model below says (the baseline recomputes)")
    out.append(f"G3 needs           TTFT p50 -{g['ttft_reduction']:.0%} vs the baseline: candidate read bandwidth "
               f"{ratio} and >= {_bw(g['read_bw_threshold'])} (read-bandwidth check)")
    if g["needed_bw"] and any(v is not None for v in g["needed_bw"].values()):
        out.append("                   with this model: " + ", ".join(
            f"c{c} {_bw(v)}" for c, v in g["needed_bw"].items()))
    elif "break_even_bw" in d and d.get("baseline_offloads", True):
        out.append("                   in absolute terms per concurrency: give the baseline's read bandwidth "
                   "(--read-bw BASELINE_ARM=BW, or --campaign with its fio figure)")
    return out


def _calibration_lines(d: dict[str, Any]) -> list[str]:
    """The calibration applied (--calibration) and what G3 needs of the tier in fio terms."""
    cal = d.get("calibration")
    if not cal:
        return []
    out = [f"Calibrated         {cal['parameter']} {cal['value']:.3f} from {cal['source']}"]
    if cal["needed_tier_bw"]:
        out.append("G3 needs (tier)    fio read bandwidth of the candidate's tier, calibrated: " + ", ".join(
            f"c{c} {_bw(v)}" for c, v in cal["needed_tier_bw"].items()))
    return out


def _arm_tables(d: dict[str, Any]) -> list[str]:
    """Predicted TTFT and throughput per arm and concurrency, and their comparison."""
    out: list[str] = []
    if d.get("arms"):
        rows = []
        for arm, a in d["arms"].items():
            if not a["points"]:
                rows.append([arm, "-", "-", "-", "-", a.get("missing", "")])
            for c, p in a["points"].items():
                rows.append([arm, c, f"{p['ttft_s']:.3f}", f"{p['output_tokens_per_s']:.1f}", p["bottleneck"],
                             f"{_bw(a['read_bw'])} {a['read_bw_source']}".strip() if a["read_bw"] else "recompute"])
        out += ["", "Predicted per arm and concurrency",
                render_table(["arm", "conc", "TTFT p50 s", "output tok/s", "bottleneck", "tier read"], rows)]
        comp = [[c, _pct(r["ttft_reduction"], neg=True), _pct(r["throughput_gain"]),
                 "-" if r["recompute_speedup"] is None else f"{r['recompute_speedup']:.1f}x"]
                for c, r in d["compare"].items()]
        out += ["", render_table(["conc", "TTFT p50 change", "throughput gain", "vs recompute"], comp)]
    return out


def _expected_vs_measured(d: dict[str, Any]) -> list[str]:
    """Predicted against measured TTFT, when a campaign was given."""
    out: list[str] = []
    evm = d.get("expected_vs_measured")
    if evm:
        rows = [[r["arm"], r["concurrency"], _ms(r["predicted_ttft_p50_ms"]), _ms(r["measured_ttft_p50_ms"]),
                 "-" if r["factor"] is None else f"{r['factor']:.2f}x", r["cause"]] for r in evm["rows"]]
        out += ["", f"Expected vs measured ({d['campaign']['path']}; agreement within {evm['factor_limit']:g}x)",
                render_table(["arm", "conc", "predicted p50 s", "measured p50 s", "factor", "likely cause"], rows)]
    return out


def _pct(v: Optional[float], neg: bool = False) -> str:
    if v is None:
        return "-"
    return f"{-v:+.1%}" if neg else f"{v:+.1%}"


def _ms(v: Optional[float]) -> str:
    return "-" if v is None else f"{v / 1000:.3f}"


def run(args: argparse.Namespace) -> int:
    data = build(args)
    print(json.dumps(data, indent=2) if args.json else render_text(data))
    return int(ExitCode.OK)

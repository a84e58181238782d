"""``kvgate bandwidth-sweep --inventory I --profile P`` (or ``--demo``): G3 at provisioned read rates."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Optional

from harness.cli.runoptions import add_campaign_run_options
from harness.exitcodes import EXIT_CODE_HELP
from harness.terminaltext import for_terminal


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "bandwidth-sweep",
        help="TTFT/throughput against the candidate tier's read bandwidth, and the least bandwidth G3 passes at",
        description="Measure the candidate arm with G3's cold-restore protocol, repetitions and checks at read "
        "rates that are fractions of its tier's measured fio read bandwidth (profile 'bandwidth': default 100, 75, "
        "50, 35, 25%), each enforced by blk-throttle in a cgroup and verified by fio in it first (a rate the "
        "kernel did not deliver is an error point), then bisect where the TTFT-reduction verdict changes until the "
        "bracket is within 15% or the point limit. The baseline arm is measured once beside it. Block-device "
        "tiers only (NFS, Lustre, GDS and memory are refused before anything runs). Writes result.json, "
        "report.html and MANIFEST.sha256 under reports/bandwidth-<UTC time>/bandwidth/. Exit 0: every rate was "
        "delivered and every point's restores were cold and within their storage (the per-rate G3 verdicts are "
        "the curve); 1: a point's evidence failed; 4: an infrastructure fault.",
        epilog="exit codes:\n" + EXIT_CODE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--inventory", type=Path, help="inventory YAML")
    p.add_argument("--profile", type=Path, help="profile YAML (its optional 'bandwidth' section sets the rates)")
    p.add_argument("--demo", action="store_true", help="the demo: this machine, the KV emulator, the demo's "
                   "provisioned local-disk target (inventory/localhost.yaml, profiles/demo-bandwidth.yaml)")
    p.add_argument("--gates", type=Path, default=None, help="directory of gate files (default: gates/)")
    add_campaign_run_options(p, default_prefix="bandwidth")
    p.set_defaults(func=run)


def _bps(x: Any) -> str:
    return f"{x / 1e6:8.1f} MB/s" if isinstance(x, (int, float)) else f"{'-':>13}"


def _interval(iv: Optional[list[float]], fmt: str) -> str:
    return f"[{fmt.format(iv[0])}, {fmt.format(iv[1])}]" if iv else "[-]"


def _num(x: Any, fmt: str) -> str:
    return fmt.format(x) if isinstance(x, (int, float)) else "-"


def print_curve(curve: dict[str, Any]) -> None:
    """The curve, its brackets and the baseline, as the terminal shows them."""
    base = curve.get("baseline") or {}
    thr = curve.get("thresholds") or {}
    print(f"\ntier read (fio, as provisioned): {_bps(curve.get('tier_fio_read_bps')).strip()}; baseline TTFT p50 "
          f"{_num(base.get('ttft_p50_ms'), '{:.1f}')} ms {_interval(base.get('ttft_p50_interval_ms'), '{:.1f}')}, "
          f"{_num(base.get('throughput_tok_s'), '{:.1f}')} tok/s; G3 thresholds: TTFT p50 reduction >= "
          f"{_num(thr.get('ttft_p50_reduction'), '{:.0%}')}, throughput gain >= "
          f"{_num(thr.get('throughput_gain'), '{:.0%}')}")
    errors = _estimator_errors(curve.get("estimator"))
    print("  provisioned  share    fio read     TTFT p50 ms [95% interval]    tok/s [interval]        "
          "TTFT verdict  throughput verdict  estimator error  slices")
    for p in curve.get("points") or []:
        v = p.get("verdicts") or {}
        est = errors.get(p.get("provisioned_read_bps"), "-")
        ttft = f"{_num(p.get('ttft_p50_ms'), '{:7.1f}')} {_interval(p.get('ttft_p50_interval_ms'), '{:.1f}')}"
        tok = f"{_num(p.get('throughput_tok_s'), '{:6.1f}')} {_interval(p.get('throughput_interval'), '{:.1f}')}"
        print(f"  {_bps(p.get('provisioned_read_bps'))} {p.get('fraction', 0):6.1%} {_bps(p.get('fio_read_bps'))}  "
              f"{ttft:<29} {tok:<23} {v.get('ttft_p50_reduction', '-'):<13} {v.get('throughput_gain', '-'):<19}"
              f"{est:<16} {_num(p.get('throttle_slices'), '{:.1f}')}")
        if p.get("error"):
            print(f"      error: {for_terminal(str(p['error']))}")
    for cid, b in (curve.get("bracket") or {}).items():
        width = b.get("relative_width")
        print(f"least bandwidth passing {cid}: {b.get('status')}; lowest PASS "
              f"{_bps(b.get('lowest_pass_bps')).strip()}, highest not PASS "
              f"{_bps(b.get('highest_not_pass_bps')).strip()}"
              + (f" (bracket {width:.0%} of its lower end)" if isinstance(width, float) else ""))
    _print_estimator(curve.get("estimator"))
    quant = curve.get("throttle_quantization")
    if quant:
        print(f"note: {quant['text']}")


def _estimator_errors(est: Any) -> dict[Any, str]:
    """Per rate, the calibrated estimator's relative error (the uncalibrated one beside it)."""
    out: dict[Any, str] = {}
    for q in (est or {}).get("points") or []:
        cal, raw = q.get("calibrated_rel_error"), q.get("rel_error")
        if isinstance(cal, (int, float)):
            out[q.get("provisioned_read_bps")] = f"{cal:+.0%} ({_num(raw, '{:+.0%}')})"
    return out


def _print_estimator(est: Any) -> None:
    if not est:
        print("estimator: not held to this curve")
        return
    if not isinstance(est.get("value"), (int, float)):
        print(f"estimator: not calibrated ({est.get('reason') or 'no reason recorded'})")
        return
    print(f"estimator: {est.get('parameter')} {est['value']:.3f} fitted; worst error "
          f"{_num(est.get('worst_calibrated_rel_error'), '{:.0%}')} calibrated "
          f"({_num(est.get('worst_rel_error'), '{:.0%}')} uncalibrated), goal "
          f"{_num(est.get('goal'), '{:.0%}')} at every point"
          + {True: "", False: ": not met"}.get(est.get("within_goal"), ": undecided (too few points)"))
    if est.get("limits"):
        print(f"  limits: {for_terminal(str(est['limits']))}")


def run(args: argparse.Namespace) -> int:
    from harness.errors import InputError

    if args.demo:
        from harness.gates.result import utc_stamp
        from harness.pipelines.bandwidth.demo import run_bandwidth_demo

        out, seconds = run_bandwidth_demo(args.campaign or f"demo-bandwidth-{utc_stamp()}",
                                          reports_root=args.reports, progress=not args.no_progress,
                                          inventory=args.inventory, profile=args.profile)
    else:
        if args.inventory is None or args.profile is None:
            raise InputError("bandwidth-sweep needs --inventory and --profile (or --demo)")
        from harness.pipelines.bandwidth.run import BandwidthOptions, run_bandwidth_sweep

        if args.create_local_targets:
            from harness.pipelines.gaterun.demo import prepare_local_targets

            prepare_local_targets(args.inventory)
        opts = BandwidthOptions(campaign=args.campaign, accept_new_host_keys=args.accept_new_host_keys,
                                progress=not args.no_progress, gates_path=args.gates)
        out = run_bandwidth_sweep(inventory_path=args.inventory, profile_path=args.profile,
                                  reports_root=args.reports, options=opts)
        seconds = None
    print_curve(out.result.measurements.get("bandwidth_curve") or {})
    for fault in out.result.faults:
        print(f"fault: {fault}")
    took = f" in {seconds:.0f} s" if seconds is not None else ""
    print(f"bandwidth-sweep {out.result.campaign}: {out.verdict.value} (exit {int(out.exit_code)}){took}")
    print(f"report: {out.path / 'report.html'}")
    return int(out.exit_code)

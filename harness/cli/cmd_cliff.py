"""``kvgate cliff --inventory I --profile P``: the capacity-cliff sweep."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.cli.runoptions import add_campaign_run_options
from harness.exitcodes import EXIT_CODE_HELP


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "cliff",
        help="capacity-cliff sweep: hit rate per KV tier and TTFT p50 against the working-set size",
        description="Sweep the working set of the profile's 'cliff' section (distinct prefixes x prefix "
        "length) from well below to several times the KV tiers, per arm, on a fresh engine per point: "
        "populate, then measure the prompt tokens each tier served (the engine's counters) and TTFT. Each "
        "point's trace is kept in Mooncake JSONL; its expected reuse under an LRU of the configured tier "
        "size is reported beside the measured hit rate, and the tier boundaries (tier bytes over the KV "
        "bytes per token of the model geometry) are marked on the charts. Writes result.json, report.html "
        "and MANIFEST.sha256 under reports/cliff-<UTC time>/cliff/. Exit 0: every point's hit rate is "
        "within 5 points of the expected reuse; 1: a point is off (or unmeasured); 4: an infrastructure fault.",
        epilog="exit codes:\n" + EXIT_CODE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--inventory", required=True, type=Path, help="inventory YAML")
    p.add_argument("--profile", required=True, type=Path,
                   help="profile YAML with a 'cliff' section (e.g. profiles/demo-cliff.yaml)")
    add_campaign_run_options(p, default_prefix="cliff")
    p.set_defaults(func=run)


def _pct(x: object) -> str:
    return f"{x * 100:5.1f}%" if isinstance(x, float) else "    -"


def run(args: argparse.Namespace) -> int:
    from harness.pipelines.cliff.run import CliffOptions, run_cliff

    if args.create_local_targets:
        from harness.pipelines.gaterun.demo import prepare_local_targets

        prepare_local_targets(args.inventory)
    opts = CliffOptions(campaign=args.campaign, accept_new_host_keys=args.accept_new_host_keys,
                        progress=not args.no_progress)
    out = run_cliff(inventory_path=args.inventory, profile_path=args.profile, reports_root=args.reports,
                    options=opts)
    cliff = out.result.measurements.get("cliff", {})
    print()
    for arm, data in (cliff.get("arms") or {}).items():
        bounds = ", ".join(f"{t} {b['tokens']} tokens" if b.get("tokens") is not None else f"{t} unsized"
                           for t, b in (data.get("boundaries") or {}).items())
        print(f"arm {arm}: tiers fill at {bounds}")
        print("  prefixes   tokens  expected  measured      hbm      cpu     disk  TTFT p50 (ms)")
        for p in data.get("points") or []:
            r = p.get("rates") or {}
            ttft = p.get("ttft_p50_ms")
            ttft_text = f"{ttft:13.1f}" if isinstance(ttft, (int, float)) else f"{'-':>13}"
            print(f"  {p['prefixes']:8d} {p['tokens']:8d}    {_pct(p['expected'].get('hit_rate'))}    "
                  f"{_pct(p.get('measured_hit_rate'))}   {_pct(r.get('hbm'))}   {_pct(r.get('local_cpu'))}   "
                  f"{_pct(r.get('local_disk'))}  {ttft_text}")
    for fault in out.result.faults:
        print(f"fault: {fault}")
    print(f"cliff {out.result.campaign}: {out.verdict.value} (exit {int(out.exit_code)})")
    print(f"report: {out.path / 'report.html'}")
    return int(out.exit_code)

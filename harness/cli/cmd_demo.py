"""``kvgate demo``: G1 -> G2 -> G3 -> G4 on localhost with the KV emulator and real fio."""

from __future__ import annotations

import argparse
import datetime as _dt
from pathlib import Path

GATES = ("G1", "G2", "G3", "G4")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "demo",
        help="G1 -> G2 -> G3 -> G4 on localhost with the KV emulator and real fio",
        description="Run the gates G1, G2, G3 and G4 (its soak compressed to 90 seconds) on this machine: "
        "inventory/localhost.yaml (its disk provisioned at 150 MB/s of reads, enforced with blk-throttle when "
        "kvgate runs as root with an io controller; on the raw disk otherwise, and it says so), "
        "profiles/demo.yaml, the KV emulator as the engine (compute emulated, storage I/O real) and real "
        "fio. Prints each gate's verdict and the path of the HTML report; about 4-5 minutes. Stops at the first "
        "gate that does not pass, since the next one needs it, and says so.",
    )
    p.add_argument("--campaign", default=None, help="campaign name (default: demo-<UTC time>)")
    p.add_argument("--inventory", type=Path, default=None, help="inventory (default: inventory/localhost.yaml)")
    p.add_argument("--profile", type=Path, default=None, help="profile (default: profiles/demo.yaml)")
    p.add_argument("--reports", type=Path, default=None, help="reports root (default: reports/)")
    p.add_argument("--until", choices=GATES, default=GATES[-1],
                   help="the last gate to run (default: %(default)s)")
    p.add_argument("--no-progress", action="store_true", help="no progress lines")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from harness.cli.outcome import demo_summary, print_outcome
    from harness.pipelines.gaterun.demo import run_demo

    campaign = args.campaign or "demo-" + _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
    res = run_demo(campaign, inventory=args.inventory, profile=args.profile, reports_root=args.reports,
                   progress=not args.no_progress, on_gate=print_outcome, until=args.until)
    print()
    for line in demo_summary(res.outcomes, GATES[:GATES.index(args.until) + 1], res.raw_disk):
        print(line)
    if res.campaign_dir is not None:
        print(f"campaign report: {res.campaign_dir / 'report.html'}")
    split = ", ".join(f"{g} {s:.0f} s" for g, s in res.gate_seconds.items())
    print(f"demo finished in {res.seconds:.0f} s ({split}), exit {int(res.exit_code)}")
    return int(res.exit_code)

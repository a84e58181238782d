"""``kvgate gate G1|G2|G3|G4 --inventory FILE --profile FILE --campaign NAME [--resume] [--wait]``."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.exitcodes import EXIT_CODE_HELP


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "gate",
        help="run a gate (G1 arrival, G2 baseline, G3 candidate vs baseline, G4 72-hour soak) of a campaign",
        description="Run one gate of a campaign: validate the files, run the gate's pipeline on the "
        "inventory's nodes, evaluate the checks of gates/<GATE>.yaml, and write result.json, report.html, "
        "report.md, junit.xml and MANIFEST.sha256 under reports/<campaign>/<GATE>/. G3 needs a passed G2 "
        "in the same campaign, or --baseline naming another campaign. G4 starts the soak on the nodes and "
        "returns (the soak does not need this machine); `kvgate soak status CAMPAIGN` looks in, and "
        "`kvgate gate G4 --resume` (or G4 --wait from the start) follows it to the end and decides the gate.",
        epilog="exit codes:\n" + EXIT_CODE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("gate", choices=["G1", "G2", "G3", "G4"], help="the gate to run")
    p.add_argument("--inventory", required=True, type=Path, help="inventory YAML")
    p.add_argument("--profile", required=True, type=Path, help="profile YAML")
    p.add_argument("--campaign", required=True, help="campaign name (a folder under the reports root)")
    p.add_argument("--resume", action="store_true", help="continue a gate that was interrupted; "
                   "completed steps are kept and not repeated")
    p.add_argument("--wait", action="store_true", help="G4: follow the soak to its end instead of returning "
                   "once it is started (--resume always follows)")
    p.add_argument("--baseline", metavar="CAMPAIGN", help="G3: take the G2 baseline from this campaign")
    p.add_argument("--allow-baseline-mismatch", nargs="+", action="extend", default=[], metavar="FIELD",
                   help="G3: accept these workload fingerprint fields differing from the G2 baseline's "
                   "(e.g. engine.version); every other difference is refused (exit 2), and the accepted ones "
                   "are printed in the report")
    p.add_argument("--allowed-signers", type=Path, metavar="FILE",
                   help="G3: OpenSSH allowed_signers file the G2 baseline's signatures are checked against "
                   "(default: the inventory's allowed_signers); the baseline must be signed by the vendor and the "
                   "customer with keys it binds to those roles")
    p.add_argument("--allow-unsigned-baseline", action="store_true",
                   help="G3, rehearsals only: use a G2 baseline that is not VERIFIED (unsigned, or signed by keys "
                   "not trusted); result.json, page one of every report, the campaign page and kvgate verify "
                   "then say 'unsigned baseline'")
    p.add_argument("--reports", type=Path, default=None, help="reports root (default: reports/)")
    p.add_argument("--gates", type=Path, default=None, help="directory of the gate files (default: gates/)")
    p.add_argument("--accept-new-host-keys", action="store_true",
                   help="trust and record unknown SSH host keys (a changed key is always refused)")
    p.add_argument("--operator", help="who runs the gate (default: the login name)")
    p.add_argument("--no-progress", action="store_true", help="no progress lines")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from harness.cli.outcome import print_outcome
    from harness.pipelines.g4.soak import SoakDetached
    from harness.pipelines.gaterun.runner import run_gate

    try:
        outcome = run_gate(args.gate, inventory_path=args.inventory, profile_path=args.profile,
                           campaign=args.campaign, reports_root=args.reports, gates_path=args.gates,
                           baseline_campaign=args.baseline, resume=args.resume,
                           accept_new_host_keys=args.accept_new_host_keys, operator=args.operator,
                           progress=not args.no_progress, allow_baseline_mismatch=args.allow_baseline_mismatch,
                           wait=args.wait or args.resume, allowed_signers=args.allowed_signers,
                           allow_unsigned_baseline=args.allow_unsigned_baseline)
    except SoakDetached as started:
        print(f"G4 soak started: {started}.\n  look in:  kvgate soak status {started.campaign}\n"
              f"  finish:   kvgate gate G4 --resume (same --inventory/--profile/--campaign) to follow it to the end "
              "and decide the gate")
        return 0
    print_outcome(outcome)
    return int(outcome.exit_code)

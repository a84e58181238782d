"""``kvgate nightly --inventory I --profile P [--history URL] [--baseline-window N]``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.cli.runoptions import add_campaign_run_options
from harness.errors import InputError
from harness.exitcodes import EXIT_CODE_HELP


def _effect(text: str) -> tuple[str, float]:
    name, sep, value = text.partition("=")
    try:
        pct = float(value.strip().rstrip("%"))
    except ValueError:
        pct = -1.0
    if not sep or not name or not 0 < pct < 1000:
        raise argparse.ArgumentTypeError(f"expected METRIC=PERCENT such as ttft_p50=5%, got {text!r}")
    return name.strip(), pct / 100.0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "nightly",
        help="nightly regression: a short measurement compared with the history of its series",
        description="Run the profile's short measurement (fio on the candidate arm's target, the candidate "
        "arm's sweep, optionally the baseline arm's), record it in the history database, compare each tracked "
        "metric with the recent runs of the same workload fingerprint (Mann-Whitney U rank test plus a "
        "minimum relative effect; change points over the series), and write result.json, junit.xml (one "
        "testcase per metric), report.html and trend.html under reports/nightly-<UTC time>/nightly/. Exit 0: no "
        "regression; 1: a regression; 3: not enough history to decide; 4: an infrastructure fault.",
        epilog="exit codes:\n" + EXIT_CODE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--inventory", required=True, type=Path, help="inventory YAML")
    p.add_argument("--profile", required=True, type=Path, help="profile YAML (e.g. profiles/nightly.yaml)")
    p.add_argument("--history", metavar="URL", default=None,
                   help="history database: sqlite:///FILE, a file path, or postgresql://USER@HOST/DB "
                   "(default: $KVGATE_HISTORY_URL, else reports/history.sqlite); give passwords via "
                   "PGPASSWORD or ~/.pgpass, not in the URL")
    p.add_argument("--baseline-window", type=int, default=10, metavar="N",
                   help="compare with the last N runs of the series (default 10)")
    p.add_argument("--min-history", type=int, default=1, metavar="N",
                   help="runs of the series needed before deciding; fewer exits 3 (default 1)")
    p.add_argument("--min-effect", action="append", type=_effect, default=[], metavar="METRIC=PCT",
                   help="minimum relative change that counts, for metrics whose name contains METRIC "
                   "(repeatable; defaults ttft_p50=5%%, throughput=5%%, read_bw=5%%, others 10%%)")
    p.add_argument("--fio-repetitions", type=int, default=5, metavar="N",
                   help="fio runs per night (default 5: enough samples for the rank test against one earlier night)")
    p.add_argument("--with-baseline", action="store_true", help="also sweep the profile's baseline arm")
    add_campaign_run_options(p, default_prefix="nightly")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from harness.pipelines.nightly.run import NightlyOptions, run_nightly

    if args.baseline_window < 1 or args.min_history < 1 or args.fio_repetitions < 1:
        raise InputError("--baseline-window, --min-history and --fio-repetitions must be at least 1")
    from harness.pipelines.nightly.wording import summary_line
    from harness.store.historydb import argv_password_warning

    warning = argv_password_warning(args.history)
    if warning:
        print(f"kvgate: {warning}", file=sys.stderr)
    if args.create_local_targets:
        from harness.pipelines.gaterun.demo import prepare_local_targets

        prepare_local_targets(args.inventory)
    opts = NightlyOptions(baseline_window=args.baseline_window, min_history=args.min_history,
                          min_effect=dict(args.min_effect), fio_repetitions=args.fio_repetitions,
                          with_baseline=args.with_baseline, campaign=args.campaign,
                          accept_new_host_keys=args.accept_new_host_keys, progress=not args.no_progress)
    out = run_nightly(inventory_path=args.inventory, profile_path=args.profile, history=args.history,
                      reports_root=args.reports, options=opts)
    print()
    print(f"nightly {out.result.campaign}: {out.verdict.value} (exit {int(out.exit_code)}), "
          f"series {out.series[:12]}, run {out.run_id}")
    for c in out.comparisons:
        print(f"  {summary_line(c)}")
    for r in out.regressions:
        good = r["last_good"]
        print(f"REGRESSION {r['metric']}: {r['effect']:+.1%} [{r['effect_low']:+.1%}, {r['effect_high']:+.1%}]; "
              f"last good {good['campaign'] if good else '-'}, first bad {r['first_bad']['campaign']}")
        for change in r["what_changed"]:
            print(f"    changed: {change}")
        if good and not r["what_changed"]:
            print("    changed: nothing kvgate records (commit, versions and nodes are the same)")
    for r in out.improvements:
        print(f"improvement {r['metric']}: {r['effect']:+.1%}")
    for fault in out.result.faults:
        print(f"fault: {fault}")
    print(f"report: {out.path / 'report.html'}")
    print(f"trend:  {out.path / 'trend.html'}")
    return int(out.exit_code)

"""``kvgate history import|list|show|compare|trend``: the results history database."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import InputError
from harness.exitcodes import EXIT_CODE_HELP
from harness.report.i18n import DEFAULT_LANG, LANGS, suffix

if TYPE_CHECKING:
    from harness.store.historydb import HistoryDB

_URL_HELP = ("history database: sqlite:///FILE, a file path, or postgresql://USER@HOST/DB (default: "
             "$KVGATE_HISTORY_URL, else reports/history.sqlite)")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "history", help="the results history: import campaigns, list, show and compare runs, trend pages",
        description="The results history database (one row per nightly or gate run, with every metric's "
        "samples summary). Runs are grouped in series by workload fingerprint; only runs of one series are "
        "compared.", epilog="exit codes:\n" + EXIT_CODE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    hs = p.add_subparsers(dest="history_command", metavar="ACTION")

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        q: argparse.ArgumentParser = hs.add_parser(name, help=help_text, description=help_text)
        q.add_argument("--history", metavar="URL", default=None, help=_URL_HELP)
        q.add_argument("--reports", type=Path, default=None, help="reports root (default: reports/)")
        return q

    q = add("import", "load the G2/G3/G4 and nightly results under a reports directory (idempotent)")
    q.add_argument("directory", type=Path, help="reports directory (a folder of campaigns)")
    q.set_defaults(func=_import)
    q = add("list", "list runs, newest last")
    q.add_argument("--series", help="only this series (fingerprint digest or its first characters)")
    q.add_argument("--kind", help="only this kind (nightly, G2, G3, G4)")
    q.add_argument("--limit", type=int, default=50, help="the last N runs (default 50)")
    q.set_defaults(func=_list)
    q = add("show", "one run with its metrics")
    q.add_argument("run", help="run id (from `history list`) or run key")
    q.set_defaults(func=_show)
    q = add("compare", "compare two runs of the same series metric by metric")
    q.add_argument("run_a", help="run id or key (the reference)")
    q.add_argument("run_b", help="run id or key")
    q.set_defaults(func=_compare)
    q = add("trend", "write the trend page of a series")
    q.add_argument("series", help="fingerprint digest (or its first characters)")
    q.add_argument("-o", "--output", type=Path, default=None,
                   help="HTML file (default: <reports>/trend-<series>.html, trend-<series>.zh.html for zh)")
    q.add_argument("--lang", choices=LANGS, default=DEFAULT_LANG, help="page language (the report catalogs)")
    q.set_defaults(func=_trend)
    p.set_defaults(func=lambda args: _usage(p))


def _usage(p: argparse.ArgumentParser) -> int:
    p.print_help()
    return 2


def _open(args: argparse.Namespace) -> HistoryDB:
    import sys

    from harness.paths import reports_dir
    from harness.store.historydb import argv_password_warning, open_history

    warning = argv_password_warning(args.history)
    if warning:
        print(f"kvgate: {warning}", file=sys.stderr)
    return open_history(args.history, args.reports or reports_dir())


def _series(db: HistoryDB, prefix: str) -> str:
    found = [s for s in db.series_ids() if s.startswith(prefix)]
    if len(found) != 1:
        what = "no series" if not found else f"{len(found)} series"
        raise InputError(f"{what} match {prefix!r} (see `kvgate history list`)")
    return str(found[0])


def _import(args: argparse.Namespace) -> int:
    from harness.pipelines.nightly.historyrecords import import_reports

    with _open(args) as db:
        rep = import_reports(db, args.directory)
    print(f"imported {len(rep.added)} run(s); {len(rep.already)} already in the history; "
          f"{len(rep.skipped)} skipped")
    for s in rep.skipped:
        print(f"  skipped {s}")
    return 0


def _list(args: argparse.Namespace) -> int:
    from harness.cli.table import render_table

    with _open(args) as db:
        series = _series(db, args.series) if args.series else None
        runs = db.runs(series=series, kind=args.kind, limit=args.limit)
    rows = [[str(r.id), r.started_at, r.kind, r.series[:12], r.campaign, (r.git_commit or "-")[:12], r.verdict]
            for r in runs]
    print(render_table(["run", "started", "kind", "series", "campaign", "commit", "verdict"], rows))
    return 0


def _show(args: argparse.Namespace) -> int:
    from harness.cli.table import render_table

    with _open(args) as db:
        r = db.run(args.run)
    print(f"run {r.id} ({r.kind}) {r.campaign}, started {r.started_at}, verdict {r.verdict}")
    print(f"series {r.series}; kvgate {r.kvgate_version} commit {r.git_commit or '-'}; nodes {', '.join(r.nodes)}")
    for node, sw in sorted(r.versions.items()):
        print(f"  {node}: " + ", ".join(f"{k} {v}" for k, v in sorted(sw.items())))
    rows = [[m.name, f"{m.median:.6g}" if m.median is not None else "-", m.unit, m.better, str(m.n),
             f"[{m.low:.6g}, {m.high:.6g}]" if m.low is not None and m.high is not None else "-"] for m in r.metrics]
    print(render_table(["metric", "median", "unit", "better", "n", "range/interval"], rows))
    return 0


def _compare(args: argparse.Namespace) -> int:
    from harness.cli.table import render_table
    from harness.gates.regression import compare_to_window, min_effect_for, what_changed

    with _open(args) as db:
        a, b = db.run(args.run_a), db.run(args.run_b)
    if a.series != b.series:
        raise InputError(f"runs {a.id} and {b.id} belong to different series ({a.series[:12]} vs {b.series[:12]}: "
                         "different workloads); unlike runs are not compared")
    am = {m.name: m for m in a.metrics}
    rows = []
    for m in b.metrics:
        ref = am.get(m.name)
        if ref is None or m.median is None or ref.median is None:
            rows.append([m.name, "-", f"{m.median}", "-", "only in one run"])
            continue
        c = compare_to_window(m.name, m.samples or [m.median], [ref.samples or [ref.median]], better=m.better,
                              min_effect=min_effect_for(m.name))
        change = f"{c.effect:+.1%}" if c.effect is not None else "-"
        rows.append([m.name, f"{ref.median:.6g}", f"{m.median:.6g}", change, c.status.value])
    print(f"run {a.id} ({a.campaign}) -> run {b.id} ({b.campaign})")
    print(render_table(["metric", f"run {a.id}", f"run {b.id}", "change", "rank test + minimum effect"], rows))
    changes = what_changed(vars(a), vars(b))
    print("changed between them: " + ("; ".join(changes) if changes else "nothing kvgate records"))
    return 0


def _trend(args: argparse.Namespace) -> int:
    from harness.paths import reports_dir
    from harness.report.trend import write_trend_page

    with _open(args) as db:
        series = _series(db, args.series)
        out = args.output or (args.reports or reports_dir()) / f"trend-{series[:12]}{suffix(args.lang)}.html"
        write_trend_page(db, series, out, lang=args.lang)
    print(out)
    return 0

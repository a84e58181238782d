"""``kvgate export CAMPAIGN_OR_HISTORY --format csv|parquet|xlsx [-o DIR]``."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.exitcodes import EXIT_CODE_HELP


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "export", help="tidy tables of a campaign or of the history for analysts (csv, parquet, xlsx)",
        description="Write tidy tables: from a campaign folder one row per request, per repetition, per "
        "sweep point, per check observation, per nightly metric, per soak window and per recorded fault; "
        "from a history database (a .sqlite file "
        "or a sqlite:// / postgresql:// URL) one row per run and per run x metric. csv always works; parquet "
        "and xlsx need the export extra (pip install 'kvgate[export]'). Files get the permissions your umask "
        "gives a new file.",
        epilog="exit codes:\n" + EXIT_CODE_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("source", help="campaign folder (reports/<campaign>), history file, or history URL")
    p.add_argument("--format", choices=["csv", "parquet", "xlsx"], default="csv", help="output format (default csv)")
    p.add_argument("-o", "--output", type=Path, default=None,
                   help="output folder (default: <campaign>/export or reports/export-history)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from harness.store.export import campaign_tables, history_tables, write_tables

    src = args.source
    path = Path(src)
    if "://" in src or path.suffix in (".sqlite", ".db", ".sqlite3"):
        from harness.paths import reports_dir
        from harness.store.historydb import HistoryDB, history_url

        with HistoryDB(history_url(src, reports_dir())) as db:
            tables = history_tables(db)
        out = args.output or reports_dir() / "export-history"
    else:
        tables = campaign_tables(path)
        out = args.output or path / "export"
    files = write_tables(tables, out, args.format)
    for name, rows in tables.items():
        print(f"{name}: {len(rows)} row(s)")
    for f in files:
        print(f)
    return 0

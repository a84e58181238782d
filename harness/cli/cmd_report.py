"""``kvgate report``: re-render the reports of a campaign from its result files. Not built yet: it says so and exits non-zero, never pretends."""

from __future__ import annotations

import argparse

from harness.errors import NotAvailableError


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("report", help=f"re-render the reports of a campaign from its result files (not available yet)", description="re-render the reports of a campaign from its result files")
    p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    raise NotAvailableError("'kvgate report' is not available yet in this version of kvgate")

"""``kvgate probe``: storage probes: fio, checkpoint write, model load. Not built yet: it says so and exits non-zero, never pretends."""

from __future__ import annotations

import argparse

from harness.errors import NotAvailableError


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("probe", help=f"storage probes: fio, checkpoint write, model load (not available yet)", description="storage probes: fio, checkpoint write, model load")
    p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    raise NotAvailableError("'kvgate probe' is not available yet in this version of kvgate")

"""``kvgate ping``: check every node of an inventory: reachability, latency, OS, python, fio, clock. Not built yet: it says so and exits non-zero, never pretends."""

from __future__ import annotations

import argparse

from harness.errors import NotAvailableError


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("ping", help=f"check every node of an inventory: reachability, latency, OS, python, fio, clock (not available yet)", description="check every node of an inventory: reachability, latency, OS, python, fio, clock")
    p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    raise NotAvailableError("'kvgate ping' is not available yet in this version of kvgate")

"""``kvgate demo``: G1 -> G2 -> G3 on localhost with the KV emulator and real fio. Not built yet: it says so and exits non-zero, never pretends."""

from __future__ import annotations

import argparse

from harness.errors import NotAvailableError


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("demo", help=f"G1 -> G2 -> G3 on localhost with the KV emulator and real fio (not available yet)", description="G1 -> G2 -> G3 on localhost with the KV emulator and real fio")
    p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    raise NotAvailableError("'kvgate demo' is not available yet in this version of kvgate")

"""``kvgate gate``: run a gate (G1..G4) of a campaign. Not built yet: it says so and exits non-zero, never pretends."""

from __future__ import annotations

import argparse

from harness.errors import NotAvailableError


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("gate", help=f"run a gate (G1..G4) of a campaign (not available yet)", description="run a gate (G1..G4) of a campaign")
    p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    raise NotAvailableError("'kvgate gate' is not available yet in this version of kvgate")

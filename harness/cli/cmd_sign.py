"""``kvgate sign``: sign a gate report (ed25519): each party adds its signature. Not built yet: it says so and exits non-zero, never pretends."""

from __future__ import annotations

import argparse

from harness.errors import NotAvailableError


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("sign", help=f"sign a gate report (ed25519): each party adds its signature (not available yet)", description="sign a gate report (ed25519): each party adds its signature")
    p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    raise NotAvailableError("'kvgate sign' is not available yet in this version of kvgate")

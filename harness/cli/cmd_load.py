"""``kvgate load``: run the load generator against an OpenAI-compatible endpoint. Not built yet: it says so and exits non-zero, never pretends."""

from __future__ import annotations

import argparse

from harness.errors import NotAvailableError


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("load", help=f"run the load generator against an OpenAI-compatible endpoint (not available yet)", description="run the load generator against an OpenAI-compatible endpoint")
    p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    raise NotAvailableError("'kvgate load' is not available yet in this version of kvgate")

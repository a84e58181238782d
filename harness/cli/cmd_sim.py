"""``kvgate sim``: the KV emulator (an OpenAI-compatible server with a real storage tier). Not built yet: it says so and exits non-zero, never pretends."""

from __future__ import annotations

import argparse

from harness.errors import NotAvailableError


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("sim", help=f"the KV emulator (an OpenAI-compatible server with a real storage tier) (not available yet)", description="the KV emulator (an OpenAI-compatible server with a real storage tier)")
    p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    raise NotAvailableError("'kvgate sim' is not available yet in this version of kvgate")

"""``kvgate facts``: collect node facts (accelerators, NVMe, RAID, NIC, versions). Not built yet: it says so and exits non-zero, never pretends."""

from __future__ import annotations

import argparse

from harness.errors import NotAvailableError


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("facts", help=f"collect node facts (accelerators, NVMe, RAID, NIC, versions) (not available yet)", description="collect node facts (accelerators, NVMe, RAID, NIC, versions)")
    p.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    raise NotAvailableError("'kvgate facts' is not available yet in this version of kvgate")

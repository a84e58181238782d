"""Options shared by the commands that run a measurement campaign of their own (nightly, cliff)."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_campaign_run_options(p: argparse.ArgumentParser, *, default_prefix: str) -> None:
    """--campaign, --reports, --create-local-targets, --accept-new-host-keys, --no-progress."""
    p.add_argument("--campaign", default=None,
                   help=f"folder name under the reports root (default {default_prefix}-<UTC time>)")
    p.add_argument("--reports", type=Path, default=None, help="reports root (default: reports/)")
    p.add_argument("--create-local-targets", action="store_true",
                   help="create the storage directories of the inventory's local nodes first (the localhost demo)")
    p.add_argument("--accept-new-host-keys", action="store_true",
                   help="trust and record unknown SSH host keys (a changed key is always refused)")
    p.add_argument("--no-progress", action="store_true", help="no progress lines")

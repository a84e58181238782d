"""``kvgate verify GATE_DIR [--json]``: check a gate directory's files against its manifest and
every signature. Exit 0 when everything verifies, 1 when a file changed, a signature is bad or
missing, 2 on usage errors."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from harness.exitcodes import ExitCode
from harness.report.sign import read_trusted_keys, verify


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "verify",
        help="verify a gate report's manifest and signatures",
        description="Recompute the sha256 of every file of GATE_DIR, compare with MANIFEST.sha256 "
        "(naming changed, missing and extra files) and check every signature in GATE_DIR/signatures. "
        "Exit 0: every file as signed and every signature valid; 1: something changed, a signature "
        "is bad, or there is none; 2: usage error.",
    )
    p.add_argument("gate_dir", metavar="GATE_DIR", type=Path, help="e.g. reports/<campaign>/G3")
    p.add_argument("--json", action="store_true", help="print the findings as JSON")
    p.add_argument("--trusted-keys", type=Path, metavar="FILE",
                   help="authorized_keys-style file of ssh-ed25519 keys; a signature by another key fails")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    trusted = read_trusted_keys(args.trusted_keys) if args.trusted_keys else None
    report = verify(args.gate_dir, trusted_keys=trusted, progress=not args.json)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print("\n".join(report.lines()))
    return int(ExitCode.OK if report.ok else ExitCode.GATE_FAILED)

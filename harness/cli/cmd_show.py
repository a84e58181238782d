"""``kvgate show inventory|profile|gate FILE``: the normalised view of a file, secrets masked."""

from __future__ import annotations

import argparse
import json

import yaml

from harness.config.loader import load_any


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "show",
        help="print a file as kvgate understands it (defaults filled in, units normalised)",
        description="Print the normalised view of an inventory, profile or gate file: every default "
        "filled in, quantities in base units (bytes, bytes/s, seconds, fractions), secrets masked.",
    )
    p.add_argument("kind", choices=["inventory", "profile", "gate"], help="kind of file")
    p.add_argument("file", metavar="FILE")
    p.add_argument("--json", action="store_true", help="JSON instead of YAML")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    _, _, model = load_any(args.file, args.kind)
    # mode="json" turns SecretStr into '**********', so secrets never print.
    data = model.model_dump(mode="json")
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        print(yaml.safe_dump(data, sort_keys=False, allow_unicode=True), end="")
    return 0

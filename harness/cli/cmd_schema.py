"""``kvgate schema inventory|profile|gate``: the JSON Schema of a file kind (for editors with the YAML
language server); ``--write DIR`` writes the field reference and schemas of docs/reference/."""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.config.loader import KINDS
from harness.config.schema import schema_text, write_reference
from harness.errors import InputError
from harness.exitcodes import ExitCode


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "schema",
        help="print the JSON Schema of an inventory, profile or gate file",
        description="Print the JSON Schema of a file kind, generated from kvgate's own models (point "
        "your editor's YAML language server at it with a first line "
        "'# yaml-language-server: $schema=PATH'). With --write DIR, write DIR/<kind>.md (the field "
        "reference) and DIR/schema/<kind>.schema.json for every kind.",
    )
    p.add_argument("kind", nargs="?", choices=list(KINDS), help="file kind")
    p.add_argument("--write", metavar="DIR", type=Path, help="write the reference docs and schemas into DIR")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.write is not None:
        for path in write_reference(args.write):
            print(path)
        return int(ExitCode.OK)
    if args.kind is None:
        raise InputError("kvgate schema: name a kind (inventory, profile, gate) or pass --write DIR")
    print(schema_text(args.kind), end="")
    return int(ExitCode.OK)

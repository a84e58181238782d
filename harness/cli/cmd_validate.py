"""``kvgate validate FILE...``: check inventory, profile and gate files before any node is touched."""

from __future__ import annotations

import argparse
import sys

from harness.config.crosscheck import placeholder_problems
from harness.config.inventory import Inventory
from harness.config.profile import Profile
from harness.config.validation import ValidationReport, validate_files
from harness.engines.preflight import inventory_for, plan_problems
from harness.errors import ConfigError
from harness.estimate.fit import fit_errors
from harness.exitcodes import ExitCode


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "validate",
        help="validate inventory, profile and gate files",
        description="Validate YAML files (kind detected from content). With several files, also check "
        "them against each other: arms vs inventory targets, overrides vs gate checks, and run every "
        "check `kvgate plan` runs (cold restore, engine plan on the inventory's first server node, and the "
        "estimator's fit of the model on its accelerators, when one inventory is given). Placeholders "
        "`kvgate init` leaves (HOST1, /models/YOUR-MODEL) are refused until edited. Exit 2 on any problem, "
        "with file:line:column and the field path.",
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="inventory, profile or gate YAML files")
    p.add_argument("--kind", choices=["inventory", "profile", "gate"], help="treat every FILE as this kind")
    p.add_argument("-q", "--quiet", action="store_true", help="print only problems")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    report = validate_files(args.files, kind=args.kind)
    _unedited(report)
    notes = _plan_checks(report)
    for path, kind in report.ok:
        if not args.quiet:
            print(f"ok       {kind:<9} {path}")
    for note in notes:
        print(f"note     {note}")
    for err in report.errors:
        print(f"error    {err.message}", file=sys.stderr)
    if report.errors:
        print(f"kvgate: {len(report.errors)} problem(s) in {len(args.files)} file(s)", file=sys.stderr)
        return int(ExitCode.USAGE_ERROR)
    return int(ExitCode.OK)


def _refuse(report: ValidationReport, path: str, problems: list[ConfigError]) -> None:
    if problems:
        report.errors.extend(problems)
        report.ok = [(p, k) for p, k in report.ok if p != path]


def _unedited(report: ValidationReport) -> None:
    """Placeholders `kvgate init` wrote (HOST1, /models/YOUR-MODEL) are refused until edited."""
    for path, kind, doc, _model in report.loaded:
        if kind in ("inventory", "profile"):
            _refuse(report, path, placeholder_problems(doc, path))


def _plan_checks(report: ValidationReport) -> list[str]:
    """Add what ``kvgate plan`` would refuse in each valid profile (same messages as plan), and the
    estimator's fit of its model on the inventory's accelerators; returns the notes to print."""
    inventory = inventory_for([m for _, _, _, m in report.loaded if isinstance(m, Inventory)])
    valid = {p for p, _ in report.ok}
    notes: list[str] = []
    for path, _kind, doc, model in report.loaded:
        if not isinstance(model, Profile) or path not in valid:
            continue
        if inventory is not None and not inventory.nodes_with_role("server"):  # as `kvgate plan` refuses
            _refuse(report, path, [ConfigError(f"inventory {inventory.cluster!r} has no node with role 'server': "
                                               "nothing to run this profile's engines on", path=path)])
            continue
        unfit, said = fit_errors(model, doc, path, inventory)
        notes += said
        _refuse(report, path, unfit + plan_problems(model, doc, path, inventory, with_file_checks=False))
    return notes

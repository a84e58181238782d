"""``kvgate report CAMPAIGN_DIR_OR_NAME [--gate G3]``: re-render the reports of a campaign (every
gate's HTML, Markdown and JUnit, and the campaign summary) from the result files alone."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from harness.errors import InputError
from harness.exitcodes import ExitCode
from harness.paths import reports_dir
from harness.report.i18n import DEFAULT_LANG, LANGS
from harness.report.loader import RESULT_FILE, ResultFileError
from harness.report.manifest import MANIFEST, compute, parse_manifest, scan
from harness.report.pdf import PdfError, write_pdf
from harness.report.render import gate_dirs, render_campaign_report, render_gate_reports
from harness.report.sign import SIGNOFF, write_manifest


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "report",
        help="re-render the reports of a campaign from its result files",
        description="Re-render report.html, report.md and junit.xml of every gate of a campaign, and "
        "the campaign summary at its root, from each gate's result.json alone; print the paths. "
        "CAMPAIGN is a directory, or a campaign name under reports/. A gate directory also works.",
    )
    p.add_argument("campaign", metavar="CAMPAIGN_DIR_OR_NAME", help="campaign directory or name")
    p.add_argument("--gate", metavar="GATE",
                   help="re-render this gate only (e.g. G3), then the campaign summary")
    p.add_argument("--lang", choices=LANGS, default=DEFAULT_LANG,
                   help="report language: en writes report.html/.md/.pdf, zh writes report.zh.html/.md/.pdf "
                   "(default: %(default)s)")
    p.add_argument("--pdf", action="store_true",
                   help="also print each report.html to report.pdf (A4 sign-off document; a signed PDF "
                   "is left as it is)")
    p.set_defaults(func=run)


def _resolve(target: str) -> Path:
    path = Path(target)
    if path.is_dir():
        return path
    named = reports_dir() / target
    if "/" not in target and named.is_dir():
        return named
    raise InputError(f"{target}: no such campaign directory (nor {named})")


def run(args: argparse.Namespace) -> int:
    path = _resolve(args.campaign)
    if (path / RESULT_FILE).is_file() and not args.gate:  # a gate directory was named
        for p in render_gate_reports(path, args.lang):
            print(p)
        if args.pdf:
            print(_pdf(path, args.lang))
        _cover(path)
        return int(ExitCode.OK)
    gates = gate_dirs(path)
    if args.gate:
        gates = [g for g in gates if g.name == args.gate]
        if not gates:
            known = ", ".join(g.name for g in gate_dirs(path)) or "none"
            raise InputError(f"{path}: no gate {args.gate} with a {RESULT_FILE} (gates present: {known})")
    failed = 0
    for gate in gates:
        try:
            for p in render_gate_reports(gate, args.lang):
                print(p)
            if args.pdf:
                print(_pdf(gate, args.lang))
            _cover(gate)
        except ResultFileError as exc:  # one unreadable gate must not stop the others
            print(f"kvgate: error: {exc}", file=sys.stderr)
            failed += 1
    for p in render_campaign_report(path, args.lang):
        print(p)
    if args.pdf:
        print(_pdf(path, args.lang))
    return int(ExitCode.USAGE_ERROR if failed else ExitCode.OK)


_RENDERED = re.compile(r"^(report(\.[a-z]{2})?\.(html|md|pdf)|junit\.xml)$")


def _cover(gate: Path) -> None:
    """The files just rendered (a PDF, another language) are the gate's own: an unsigned gate's
    manifest is rewritten to cover them, so verify does not call them EXTRA (issue 53), but only
    when nothing else differs from it (report never launders a changed evidence file). A signed
    gate's manifest is what the parties signed: it is kept, and the new files are named (verify
    accepts a report PDF printed from the signed HTML: ``sign._derived_pdfs``)."""
    if not (gate / MANIFEST).is_file():
        return
    tree = scan(gate)
    listed, _ = parse_manifest((gate / MANIFEST).read_text(encoding="utf-8", errors="replace"))
    new = [f for f in tree.files if f not in listed]
    if [f for f in tree.signature_files if f.endswith(".sig")]:
        if new:
            print(f"note: {gate} is signed; {', '.join(new)} not in its {MANIFEST}: kvgate verify accepts a "
                  "PDF that is byte for byte what the signed HTML prints to (DERIVED) and names anything "
                  "else EXTRA", file=sys.stderr)
        return
    current = compute(gate, tree.files)
    others = [f for f in set(listed) | set(current) if not _RENDERED.match(f) and f != SIGNOFF
              and listed.get(f) != current.get(f)]
    if new and not others:
        write_manifest(gate)


def _pdf(directory: Path, lang: str) -> str:
    try:
        return str(write_pdf(directory, lang))
    except PdfError as exc:  # signed already: kept, and said so
        return f"kept      {exc}"

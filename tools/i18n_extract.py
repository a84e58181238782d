"""Extract the report wording (templates: ``_()``; Python: ``N_()``/``_t()``) into
``harness/report/locale/kvgate.pot`` and merge it into each language's ``.po`` (new messages
get an empty translation, which the catalog test then names). Run: ``make i18n``."""

from __future__ import annotations

import sys
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import read_po, write_po

ROOT = Path(__file__).resolve().parents[1] / "harness" / "report"
METHODS = [("templates/**.j2", "jinja2"), ("**.py", "python")]
OPTIONS = {"templates/**.j2": {"extensions": "jinja2.ext.i18n", "newstyle_gettext": "true",
                               "trim_blocks": "true", "lstrip_blocks": "true"}}
KEYWORDS = {"_": None, "N_": None, "_t": None}
# the sentences the gate engine composes (recorded as message ids in result.json)
GATES = ROOT.parent / "gates"
GATE_METHODS = [("messages.py", "python")]


def extract() -> Catalog:
    cat = Catalog(domain="kvgate", project="kvgate", charset="utf-8")
    for filename, lineno, message, _comments, _context in extract_from_dir(
            str(ROOT), METHODS, options_map=OPTIONS, keywords=KEYWORDS):
        if message:
            cat.add(message, locations=[(filename, lineno)])
    for filename, lineno, message, _comments, _context in extract_from_dir(
            str(GATES), GATE_METHODS, keywords=KEYWORDS):
        if message:
            cat.add(message, locations=[(f"../gates/{filename}", lineno)])
    for gate_file in sorted((ROOT.parents[1] / "gates").glob("*.yaml")):
        _add_gate_words(cat, gate_file)
    return cat


def _add_gate_words(cat: Catalog, gate_file: Path) -> None:
    """The shipped gate files' titles and check descriptions: a report shows them as recorded in
    result.json, translated when the catalog knows them (a customised gate file's words stay)."""
    import yaml

    spec = yaml.safe_load(gate_file.read_text(encoding="utf-8"))
    where = [(f"../../gates/{gate_file.name}", 0)]
    if spec.get("title"):
        cat.add(spec["title"], locations=where)
    for check in spec.get("checks") or []:
        if check.get("description"):
            cat.add(check["description"], locations=where)


def main() -> int:
    pot = extract()
    with open(ROOT / "locale" / "kvgate.pot", "wb") as fh:
        write_po(fh, pot, omit_header=True, sort_output=True, no_location=True, width=100)
    for po_path in sorted((ROOT / "locale").glob("*/LC_MESSAGES/kvgate.po")):
        with open(po_path, "rb") as fh:
            cat = read_po(fh)
        cat.update(pot, no_fuzzy_matching=True)
        cat.fuzzy = False  # the header: a fuzzy header would be dropped with its charset
        cat.project, cat.version = "kvgate", "1"
        with open(po_path, "wb") as fh:
            write_po(fh, cat, sort_output=True, no_location=True, width=100, ignore_obsolete=True)
    print(f"{len(pot)} messages")
    return 0


if __name__ == "__main__":
    sys.exit(main())

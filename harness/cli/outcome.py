"""What a finished gate prints on the terminal: its checks and where the reports are."""

from __future__ import annotations

from collections.abc import Sequence

from harness.cli.table import render_table
from harness.pipelines.gaterun.runner import GateOutcome
from harness.records.outcome import CheckResult, Verdict
from harness.report.view import check_row

# The terminal table stays readable; the report has every observation in full.
MEASURED_WIDTH = 90
WHY_WIDTH = 240
_UNDECIDED = (Verdict.FAIL, Verdict.INCONCLUSIVE, Verdict.NOT_RUN, Verdict.ERROR)


def why_lines(checks: Sequence[CheckResult]) -> list[str]:
    """One line per blocker that kept the gate from passing, with its reason (an INCONCLUSIVE
    interval says what would likely decide it), so the terminal says why and not only what."""
    out = []
    for c in checks:
        if c.severity == "blocker" and c.verdict in _UNDECIDED and c.reason:
            why = c.reason if len(c.reason) <= WHY_WIDTH else c.reason[:WHY_WIDTH - 3] + "..."
            out.append(f"why {c.id} is {c.verdict.value}: {why}")
    return out


def print_outcome(outcome: GateOutcome) -> None:
    rows = []
    for check in outcome.result.checks:
        row = check_row(check)
        measured = row.measured if len(row.measured) <= MEASURED_WIDTH else row.measured[:MEASURED_WIDTH - 3] + "..."
        rows.append([check.id, check.severity, row.expected, measured, check.verdict.value])
    print()
    print(f"{outcome.gate} {outcome.result.title}: {outcome.verdict.value} (exit {int(outcome.exit_code)})")
    print(render_table(["check", "severity", "expected", "measured", "verdict"], rows))
    for line in why_lines(outcome.result.checks):
        print(line)
    for fault in outcome.result.faults:
        print(f"fault: {fault}")
    for note in outcome.result.notes:  # what a signer must see beside the verdict (issue 27)
        if note.startswith(("UNSIGNED BASELINE", "NON-STOCK GATE FILE", "THRESHOLD OVERRIDE")):
            print(note)
    html = outcome.gate_dir / "report.html"
    print(f"report: {html}")
    # shared as it happens, the head pins every run so far (harness/store/journal.py)
    print(f"journal head: {outcome.journal_head} (sha256 of the last record of "
          f"{outcome.gate_dir.parent / 'journal.jsonl'}; send it to the other party now)")

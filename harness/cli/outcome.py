"""What a finished gate prints on the terminal: its checks and where the reports are."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from harness.cli.table import render_table, terminal_safe
from harness.exitcodes import ExitCode
from harness.pipelines.gaterun.runner import GateOutcome
from harness.records.outcome import CheckResult, Verdict
from harness.records.result import GateResult
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


def provisioned_lines(result: GateResult) -> list[str]:
    """"local-disk: reads provisioned at 150 MB/s by blk-throttle", one per target that declares a rate."""
    rows = result.measurements.get("provisioned") if result.measurements else None
    return [str(r["label"]) for r in rows or [] if isinstance(r, dict) and r.get("label")]


def demo_summary(outcomes: Sequence[GateOutcome], gates: Sequence[str], raw_disk: Optional[str] = None) -> list[str]:
    """The demo's last lines: a verdict for every gate asked for, and for a gate not run, why."""
    out = []
    done = {o.gate: o for o in outcomes}
    stopped = next((o for o in outcomes if o.exit_code != ExitCode.OK), None)
    for gate in gates:
        o = done.get(gate)
        if o is not None:
            out.append(f"{gate}: {o.verdict.value}")
        elif stopped is not None:
            out.append(f"{gate}: not run ({stopped.gate} ended {stopped.verdict.value}, exit {int(stopped.exit_code)}, "
                       "and each gate needs the one before it to pass)")
        else:
            out.append(f"{gate}: not run")
    g4 = done.get("G4")
    if raw_disk and g4 is not None and g4.verdict is Verdict.INCONCLUSIVE:
        out.append("G4 is INCONCLUSIVE on the raw disk, not an error: a soak of minutes on a disk whose rate wanders "
                   "cannot decide a 10% drift (docs/demo-disk.md)")
    return out


def print_outcome(outcome: GateOutcome) -> None:
    rows = []
    for check in outcome.result.checks:
        row = check_row(check)
        measured = row.measured if len(row.measured) <= MEASURED_WIDTH else row.measured[:MEASURED_WIDTH - 3] + "..."
        rows.append([check.id, check.severity, row.expected, measured, check.verdict.value])
    print()
    print(f"{outcome.gate} {outcome.result.title}: {outcome.verdict.value} (exit {int(outcome.exit_code)})")
    for line in provisioned_lines(outcome.result):
        print(terminal_safe(line))
    print(render_table(["check", "severity", "expected", "measured", "verdict"], rows))
    for line in why_lines(outcome.result.checks):
        print(terminal_safe(line))
    for fault in outcome.result.faults:  # a node's output tail: line by line, indented under its fault
        first, *rest = fault.split("\n")
        print("\n".join([f"fault: {terminal_safe(first)}", *(f"  {terminal_safe(line)}" for line in rest)]))
    for note in outcome.result.notes:  # what a signer must see beside the verdict (issue 27)
        if note.startswith(("UNSIGNED BASELINE", "NON-STOCK GATE FILE", "THRESHOLD OVERRIDE")):
            print(terminal_safe(note))
    html = outcome.gate_dir / "report.html"
    print(f"report: {html}")
    # shared as it happens, the head pins every run so far (harness/store/journal.py)
    print(f"journal head: {outcome.journal_head} (sha256 of the last record of "
          f"{outcome.gate_dir.parent / 'journal.jsonl'}; send it to the other party now)")

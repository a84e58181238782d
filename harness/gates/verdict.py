"""The one place that decides a gate's verdict and exit code (every other caller asks here).

Rules (``docs/ARCHITECTURE.md`` repeats them; the JUnit writer, the reports, the pipelines and
the CLI exit code all follow from :func:`decide`):

1. Only **blocker** checks decide; advisory checks are reported and never change the verdict.
2. A blocker that is NOT_APPLICABLE (nothing to check, for a reason read from the inputs) is left
   out. A gate needs **at least one applicable blocker**: with none, nothing was decided and the
   gate is NOT_RUN (exit 1).
3. A gate **passes only when every applicable blocker is PASS** (and rule 5 does not apply).
   NOT_RUN, ERROR and INCONCLUSIVE never pass.
4. Among applicable blockers, in this order: any FAIL -> FAIL (exit 1: failed on measured
   evidence); any ERROR -> ERROR (exit 1: a check could not be evaluated); any NOT_RUN ->
   NOT_RUN (exit 1: not measured is not passed); any INCONCLUSIVE -> INCONCLUSIVE (exit 3).
5. **Faults.** A recorded infrastructure fault (node unreachable, engine crashed, disk full)
   gives exit 4 (INFRA_FAULT), whatever the blockers say, unless a blocker FAILED on measured
   evidence: then the gate is FAIL, exit 1, and the faults are still listed. A FAIL is on measured
   evidence unless every failing observation of it is marked ``caused_by_fault`` (it only records
   the fault, e.g. "node2 did not answer"): such a gate is FAIL with exit 4. A run that recorded a
   fault never passes: when every blocker passed anyway, the gate is ERROR (exit 4), because part
   of what was asked for did not run as planned.
6. JUnit is red exactly when the exit code is not 0 (``harness.report.junit`` adds a gate-level
   testcase that fails with :attr:`GateDecision.reason` whenever :attr:`GateDecision.passed` is
   false).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from harness.exitcodes import ExitCode
from harness.gates.outcome import CheckResult, Verdict

__all__ = ["GateDecision", "decide"]

# Rule 4: the first verdict present among the applicable blockers decides, in this order.
_ORDER = (Verdict.FAIL, Verdict.ERROR, Verdict.NOT_RUN, Verdict.INCONCLUSIVE)
_CODE = {
    Verdict.FAIL: ExitCode.GATE_FAILED,
    Verdict.ERROR: ExitCode.GATE_FAILED,
    Verdict.NOT_RUN: ExitCode.GATE_FAILED,
    Verdict.INCONCLUSIVE: ExitCode.INCONCLUSIVE,
}


@dataclass(frozen=True)
class GateDecision:
    """A gate's verdict, exit code and the sentence that says why."""

    verdict: Verdict
    exit_code: ExitCode
    reason: str

    @property
    def passed(self) -> bool:
        return self.exit_code is ExitCode.OK


def _names(checks: Sequence[CheckResult], verdict: Verdict) -> str:
    return ", ".join(c.id for c in checks if c.verdict is verdict)


def _failed_on_evidence(check: CheckResult) -> bool:
    """A FAIL that is not only the trace of a recorded fault (rule 5)."""
    if check.verdict is not Verdict.FAIL:
        return False
    failing = [o for o in check.observations if o.verdict is Verdict.FAIL]
    return not failing or any(not o.caused_by_fault for o in failing)


def decide(checks: Sequence[CheckResult], faults: Sequence[str] = ()) -> GateDecision:
    """The gate's decision from its evaluated checks and recorded faults (rules in the module doc)."""
    applicable = [c for c in checks if c.severity == "blocker" and c.verdict is not Verdict.NOT_APPLICABLE]
    fault_text = f"; {len(faults)} infrastructure fault(s): {faults[0]}" if faults else ""
    code_if_fault = ExitCode.INFRA_FAULT if faults else None
    if any(c.verdict is Verdict.FAIL for c in applicable):
        on_evidence = any(_failed_on_evidence(c) for c in applicable) or not faults
        return GateDecision(Verdict.FAIL, ExitCode.GATE_FAILED if on_evidence else ExitCode.INFRA_FAULT,
                            f"blocker(s) failed: {_names(applicable, Verdict.FAIL)}{fault_text}")
    if not applicable:
        return GateDecision(Verdict.NOT_RUN, code_if_fault or ExitCode.GATE_FAILED,
                            f"no applicable blocker check: the gate decided nothing{fault_text}")
    for verdict in _ORDER[1:]:
        if any(c.verdict is verdict for c in applicable):
            word = {Verdict.ERROR: "could not be evaluated", Verdict.NOT_RUN: "not run",
                    Verdict.INCONCLUSIVE: "inconclusive"}[verdict]
            return GateDecision(verdict, code_if_fault or _CODE[verdict],
                                f"blocker(s) {word}: {_names(applicable, verdict)}{fault_text}")
    if faults:
        return GateDecision(Verdict.ERROR, ExitCode.INFRA_FAULT,
                            f"every applicable blocker passed, but the run recorded {fault_text[2:]}")
    return GateDecision(Verdict.PASS, ExitCode.OK, f"all {len(applicable)} applicable blocker(s) passed")

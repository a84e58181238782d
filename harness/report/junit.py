"""JUnit XML for CI systems: one ``<testsuite>`` per gate, one ``<testcase>`` per check
observation (or per check when it has none).

Mapping (a CI job must go red exactly when the gate's exit code is not 0):

* one gate-level testcase ``gate_verdict`` first: a ``<failure type="gate">`` carrying the
  verdict's reason whenever the gate did not pass (:func:`harness.gates.verdict.decide`, or a
  ``result.json`` whose recorded exit code is not 0). This is what makes "no applicable blocker",
  "a fault was recorded" and every other non-zero exit red even when no single check failed;
* blocker PASS -> plain testcase;
* blocker FAIL / ERROR / NOT_RUN / INCONCLUSIVE -> ``<failure type="fail|error|not_run|inconclusive"
  message="measured X, expected >= Y">``: a blocker that was not run is not a pass;
* advisory NOT_RUN -> ``<skipped>``; advisory FAIL / ERROR / INCONCLUSIVE -> passes, with the
  verdict and reason in ``<system-out>`` (advisories never fail a gate).

Only elements and attributes of the common JUnit schema (Jenkins/Ant ``junit-10.xsd``) are used.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from datetime import datetime

from harness.gates.verdict import decide
from harness.report.view import CheckRow, ObsRow, check_row, xml_safe
from harness.store.schema import GateResult, Verdict

_FAILURE_TYPE = {
    Verdict.FAIL: "fail",
    Verdict.ERROR: "error",
    Verdict.NOT_RUN: "not_run",
    Verdict.INCONCLUSIVE: "inconclusive",
}


def _duration(start: str, end: str) -> float:
    try:
        d = (datetime.fromisoformat(end.replace("Z", "+00:00"))
             - datetime.fromisoformat(start.replace("Z", "+00:00"))).total_seconds()
    except (ValueError, TypeError):
        return 0.0
    return max(0.0, d)


def _timestamp(start: str) -> str:
    """ISO 8601 without a zone, as the schema's xs:dateTime pattern wants (kvgate times are UTC)."""
    try:
        return datetime.fromisoformat(start.replace("Z", "+00:00")).replace(tzinfo=None).isoformat(
            timespec="seconds")
    except (ValueError, TypeError):
        return "1970-01-01T00:00:00"


def _message(verdict: Verdict, measured: str, expected: str, reason: str) -> str:
    if verdict is Verdict.NOT_RUN:
        head = f"not run, expected {expected}"
    elif verdict is Verdict.ERROR:
        head = f"error evaluating the check, expected {expected}"
    elif verdict is Verdict.INCONCLUSIVE:
        head = f"inconclusive: measured {measured}, expected {expected}"
    else:
        head = f"measured {measured}, expected {expected}"
    return f"{head}: {reason}" if reason else head


def _case(suite: ET.Element, gate: str, check: CheckRow, obs: ObsRow | None) -> str:
    """Add one testcase; return 'failure', 'skipped' or 'pass'."""
    name = f"{check.id}[{obs.path}]" if obs else check.id
    case = ET.SubElement(suite, "testcase", classname=f"kvgate.{gate}", name=name, time="0")
    verdict = obs.verdict if obs else check.verdict
    measured = obs.measured if obs else check.measured
    expected = obs.expected if obs else check.expected
    reason = obs.reason if obs else check.reason
    if obs and not reason and verdict is not Verdict.PASS:
        reason = check.reason
    interval = obs.interval if obs else check.interval
    detail = (f"check {check.id} ({check.severity}): {check.description}\n"
              f"verdict {verdict.value}; measured {measured}; expected {expected}; interval {interval}"
              + (f"\nreason: {reason}" if reason else "")
              + (f"\nthreshold overridden: {check.override_reason}" if check.override_reason else "")
              + (f"\nevidence: {', '.join(t for t, _ in obs.evidence)}" if obs and obs.evidence else ""))
    outcome = "pass"
    if verdict is Verdict.NOT_APPLICABLE:
        ET.SubElement(case, "skipped", message=f"not applicable: {reason}" if reason else "not applicable")
        outcome = "skipped"
    elif verdict is not Verdict.PASS:
        if check.severity == "blocker":
            failure = ET.SubElement(case, "failure", message=_message(verdict, measured, expected, reason),
                                    type=_FAILURE_TYPE[verdict])
            failure.text = detail
            outcome = "failure"
        elif verdict is Verdict.NOT_RUN:
            ET.SubElement(case, "skipped", message=_message(verdict, measured, expected, reason))
            outcome = "skipped"
    out = ET.SubElement(case, "system-out")
    shown_in_failure = outcome == "failure"
    out.text = f"see failure ({verdict.value})" if shown_in_failure else detail
    return outcome


def _gate_case(suite: ET.Element, result: GateResult) -> str:
    """The gate-level testcase: red exactly when the gate's exit code is not 0."""
    decision = decide(result.checks, result.faults)
    case = ET.SubElement(suite, "testcase", classname=f"kvgate.{result.gate}", name="gate_verdict", time="0")
    text = (f"gate {result.gate}: {result.verdict.value}, exit {result.exit_code}: "
            f"{result.verdict_reason or decision.reason}")
    if result.exit_code != 0 or not decision.passed:
        message = text
        if result.exit_code != int(decision.exit_code):
            message += (f" (result.json says exit {result.exit_code}, its checks and faults give exit "
                        f"{int(decision.exit_code)}: {decision.reason})")
        failure = ET.SubElement(case, "failure", message=message, type="gate")
        failure.text = "\n".join([message, *result.faults])
        ET.SubElement(case, "system-out").text = "see failure"
        return "failure"
    ET.SubElement(case, "system-out").text = text
    return "pass"


def gate_testsuite(result: GateResult) -> ET.Element:
    suite = ET.Element("testsuite", name=f"kvgate.{result.gate}")
    props = ET.SubElement(suite, "properties")
    for k, val in (("gate", result.gate), ("title", result.title), ("campaign", result.campaign),
                   ("verdict", result.verdict.value), ("exit_code", str(result.exit_code)),
                   ("emulated", "true" if result.emulated else "false"),
                   ("kvgate_version", result.kvgate_version), ("git_commit", result.git_commit or ""),
                   ("operator", result.operator or "")):
        ET.SubElement(props, "property", name=k, value=val)
    counts = {"failure": 0, "skipped": 0, "pass": 0}
    counts[_gate_case(suite, result)] += 1
    for check in result.checks:
        row = check_row(check)
        cases: list[ObsRow | None] = list(row.observations) or [None]
        for obs in cases:
            counts[_case(suite, result.gate, row, obs)] += 1
    if result.faults:
        err = ET.SubElement(suite, "system-err")
        err.text = "\n".join(result.faults)
    total = sum(counts.values())
    suite.set("tests", str(total))
    suite.set("failures", str(counts["failure"]))
    suite.set("errors", "0")
    suite.set("skipped", str(counts["skipped"]))
    suite.set("time", f"{_duration(result.started_at, result.finished_at):.3f}")
    suite.set("timestamp", _timestamp(result.started_at))
    suite.set("hostname", "kvgate")
    return suite


def junit_xml(results: Sequence[GateResult]) -> bytes:
    """A ``<testsuites>`` document with one suite per gate result."""
    root = ET.Element("testsuites", name="kvgate")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    time_total = 0.0
    for result in results:
        suite = gate_testsuite(result)
        root.append(suite)
        for k in totals:
            totals[k] += int(suite.get(k, "0"))
        time_total += float(suite.get("time", "0"))
    for k, n in totals.items():
        root.set(k, str(n))
    root.set("time", f"{time_total:.3f}")
    for el in root.iter():
        el.text = xml_safe(el.text) if el.text else el.text
        for k, v in el.attrib.items():
            el.set(k, xml_safe(v))
    ET.indent(root)
    data: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return data + b"\n"

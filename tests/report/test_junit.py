from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from harness.report import render_campaign_report, render_gate_reports
from harness.store.schema import Verdict

from .conftest import make_result, write_gate
from .helpers import svgs

# The shape of the common JUnit schema (Jenkins/Ant junit-10.xsd): allowed children and attributes.
SUITE_ATTRS = {"name", "tests", "failures", "errors", "skipped", "time", "timestamp", "hostname", "id",
               "package", "disabled", "file", "log", "url", "version", "group", "system-out", "system-err"}
CASE_ATTRS = {"name", "classname", "time", "assertions", "status", "file", "line", "group"}
CASE_CHILDREN = {"skipped", "error", "failure", "system-out", "system-err"}


def _check_schema_shape(root: ET.Element) -> list[ET.Element]:
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert suites
    for suite in suites:
        assert set(suite.attrib) <= SUITE_ATTRS
        assert {"name", "tests", "failures", "errors", "time"} <= set(suite.attrib)
        order = [child.tag for child in suite]
        assert set(order) <= {"properties", "testcase", "system-out", "system-err"}
        # properties first, testcases, then system-out/err
        ranks = [{"properties": 0, "testcase": 1, "system-out": 2, "system-err": 3}[t] for t in order]
        assert ranks == sorted(ranks)
        cases = suite.findall("testcase")
        for case in cases:
            assert set(case.attrib) <= CASE_ATTRS and {"name", "classname"} <= set(case.attrib)
            assert {c.tag for c in case} <= CASE_CHILDREN
            for f in case.findall("failure") + case.findall("skipped"):
                assert f.get("message")
        failures = sum(1 for c in cases if c.find("failure") is not None)
        errors = sum(1 for c in cases if c.find("error") is not None)
        skipped = sum(1 for c in cases if c.find("skipped") is not None)
        assert int(suite.get("tests", "-1")) == len(cases)
        assert int(suite.get("failures", "-1")) == failures
        assert int(suite.get("errors", "-1")) == errors
        assert int(suite.get("skipped", "-1")) == skipped
        assert float(suite.get("time", "-1")) >= sum(float(c.get("time", "0")) for c in cases)
    for attr in ("tests", "failures", "errors", "skipped"):
        assert int(root.get(attr, "-1")) == sum(int(s.get(attr, "0")) for s in suites)
    return suites


def test_gate_junit(gate_dir: Path) -> None:
    render_gate_reports(gate_dir)
    root = ET.parse(gate_dir / "junit.xml").getroot()
    (suite,) = _check_schema_shape(root)
    assert suite.get("name") == "kvgate.G3" and suite.get("time") == "2490.000"
    assert suite.get("timestamp") == "2026-11-29T20:00:00"
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert all(c.get("classname") == "kvgate.G3" for c in cases.values())
    assert set(cases) == {
        "ttft_p50_reduction[compare.ttft_p50_reduction.c1]",
        "ttft_p50_reduction[compare.ttft_p50_reduction.c8]",
        "ttft_p50_reduction[compare.ttft_p50_reduction.c16]", "throughput_gain[compare.throughput_gain_best]",
        "read_bandwidth[candidate.fio.seq_read_bw]", "candidate_failed_requests", "checkpoint_bw",
        "recompute_speedup", "throughput_gain_plausible[compare.throughput_gain_best]", "gate_verdict"}

    def failure(name: str) -> ET.Element | None:
        return cases[name].find("failure")

    gate = failure("gate_verdict")  # the gate exits 1: CI is red whatever the single checks say
    assert gate is not None and gate.get("type") == "gate" and "exit 1" in gate.get("message", "")

    fail = failure("read_bandwidth[candidate.fio.seq_read_bw]")
    assert fail is not None and fail.get("type") == "fail"
    assert fail.get("message", "").startswith("measured 2.90 GB/s, expected >= 5 GB/s")
    inc = failure("ttft_p50_reduction[compare.ttft_p50_reduction.c8]")
    assert inc is not None and inc.get("type") == "inconclusive"
    not_run = failure("candidate_failed_requests")  # a blocker not run is a CI failure
    assert not_run is not None and not_run.get("type") == "not_run"
    assert "was not measured" in not_run.get("message", "")
    err = failure("checkpoint_bw")
    assert err is not None and err.get("type") == "error" and "ZeroDivisionError" in err.get("message", "")
    assert failure("ttft_p50_reduction[compare.ttft_p50_reduction.c1]") is None
    assert failure("throughput_gain[compare.throughput_gain_best]") is None
    # advisories never fail CI: not run -> skipped, failed -> noted in system-out
    assert cases["recompute_speedup"].find("skipped") is not None
    adv = cases["throughput_gain_plausible[compare.throughput_gain_best]"]
    assert adv.find("failure") is None and adv.find("skipped") is None
    assert "verdict FAIL" in (adv.findtext("system-out") or "")
    assert "2 GB/s" in (cases["checkpoint_bw"].find("failure").text or "")  # type: ignore[union-attr]
    assert suite.findtext("system-err") == "node-b: ssh: connection refused (exit 255)"


def test_passing_gate_has_no_failures(tmp_path: Path) -> None:
    result = make_result(verdict=Verdict.PASS, exit_code=0)
    result.checks = [c for c in result.checks if c.verdict is Verdict.PASS]
    result.faults = []  # a run that recorded a fault never passes
    d = write_gate(tmp_path / "G2", result)
    render_gate_reports(d)
    root = ET.parse(d / "junit.xml").getroot()
    _check_schema_shape(root)
    assert root.get("failures") == "0" and root.get("tests") == "2"  # the gate case and the one check
    gate = root.find("testsuite/testcase[@name='gate_verdict']")
    assert gate is not None and gate.find("failure") is None and "PASS, exit 0" in (gate.findtext("system-out") or "")


def test_a_faulted_run_whose_checks_all_passed_is_red(tmp_path: Path) -> None:
    result = make_result(verdict=Verdict.PASS, exit_code=0)
    result.checks = [c for c in result.checks if c.verdict is Verdict.PASS]
    d = write_gate(tmp_path / "G2", result)  # faults recorded, exit 0 claimed: inconsistent
    render_gate_reports(d)
    root = ET.parse(d / "junit.xml").getroot()
    gate = root.find("testsuite/testcase[@name='gate_verdict']")
    assert gate is not None and gate.find("failure") is not None
    assert "connection refused" in (gate.find("failure").get("message") or "")  # type: ignore[union-attr]


def test_campaign_junit_one_suite_per_gate(tmp_path: Path) -> None:
    camp = tmp_path / "c"
    for gate in ("G1", "G2", "G3"):
        r = make_result()
        r.gate = gate
        write_gate(camp / gate, r)
    render_campaign_report(camp)
    suites = _check_schema_shape(ET.parse(camp / "junit.xml").getroot())
    assert [s.get("name") for s in suites] == ["kvgate.G1", "kvgate.G2", "kvgate.G3"]


def test_control_characters_from_command_output_keep_files_parseable(tmp_path: Path) -> None:
    result = make_result()
    result.checks[2].observations[0].reason = "fio: \x1b[31merror\x1b[0m: I/O error\x00 on /dev/nvme0n1\x07"
    result.faults = ["node-b: ssh exited 255: \x1b[1mPermission denied\x1b[0m\x08"]
    result.measurements["sweep"] = {"arm\x1b[0m\x01": {"c1": {"ttft_p50_ms": 5.0}}}
    d = write_gate(tmp_path / "G3", result)
    render_gate_reports(d)
    root = ET.parse(d / "junit.xml").getroot()  # raises if not well-formed XML
    failure = root.find(".//testcase[@name='read_bandwidth[candidate.fio.seq_read_bw]']/failure")
    assert failure is not None
    assert "fio: error: I/O error\ufffd on /dev/nvme0n1\ufffd" in failure.get("message", "")
    assert root.findtext(".//system-err") == "node-b: ssh exited 255: Permission denied\ufffd"
    html = (d / "report.html").read_text()
    assert "\x1b" not in html and "\x00" not in html
    svgs(html)
    assert "\x1b" not in (d / "report.md").read_text()

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from harness.report import render_campaign_report, render_gate_reports
from harness.report.loader import ResultFileError, load_gate_result
from harness.store.schema import Verdict

from .conftest import make_result, write_gate
from .helpers import external_references, svgs

FIRST_PAGE_END = '<section class="details">'


def _first_page(html: str) -> str:
    assert FIRST_PAGE_END in html
    return html.split(FIRST_PAGE_END, 1)[0]


def test_gate_reports_written_from_result_json(gate_dir: Path) -> None:
    paths = render_gate_reports(gate_dir)
    assert [p.name for p in paths] == ["result.json", "report.html", "report.md", "junit.xml"]
    assert all(p.is_file() and p.stat().st_size > 0 for p in paths)


def test_html_first_page_content(gate_dir: Path) -> None:
    render_gate_reports(gate_dir)
    html = (gate_dir / "report.html").read_text()
    first = _first_page(html)
    # verdict, big and coloured, with the meaning of the exit code
    assert re.search(r'class="verdict v-FAIL".*?<div class="big">FAIL</div>', first, re.S)
    assert "Exit code 1: a blocker check failed or was not run." in first
    # every check in the checks table (after page one), with verdicts that are not passes shown as such
    table = html.split('<table id="checks">', 1)[1].split("</table>", 1)[0]
    for cid, verdict in [("ttft_p50_reduction", "INCONCLUSIVE"), ("throughput_gain", "PASS"),
                         ("read_bandwidth", "FAIL"), ("candidate_failed_requests", "NOT_RUN"),
                         ("checkpoint_bw", "ERROR"), ("recompute_speedup", "NOT_RUN")]:
        row = re.search(rf'<tr id="check-{cid}"[^>]*>(.*?)</tr>', table, re.S)
        assert row, cid
        assert f'class="badge v-{verdict}">{verdict}<' in row.group(1)
        blocker = cid != "recompute_speedup"
        assert ("notpassed" in row.group(0)) == (verdict != "PASS" and blocker)
    # a blocker's figure is on page one's headline, and the table refers to it (each figure once)
    assert "&gt;= 5 GB/s" in table and table.count("on page one (headline)") == 5
    assert not re.search(r'class="num c-meas">[^<]*2\.90 GB/s', table)
    assert "c8: [21.00%, 36.00%]; c16: [27.00%, 35.00%] (95%)" in first
    assert "candidate.failed_ratio was not measured" in table
    # user text is escaped, never interpreted
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in table
    # page one: the verdict's why, the headline of blocker checks, the system under test, the workload
    assert "ttft_p50_reduction is INCONCLUSIVE: c8: interval straddles the threshold." in first
    assert "3 more blocker check(s) not passed." in first
    headline = first.split('<table id="headline-table">', 1)[1].split("</table>", 1)[0]
    for cid in ("ttft_p50_reduction", "throughput_gain", "read_bandwidth", "candidate_failed_requests",
                "checkpoint_bw"):
        assert f"<code>{cid}</code>" in headline, cid
    assert "recompute_speedup" not in headline and "throughput_gain_plausible" not in headline  # advisory
    assert "2.90 GB/s" in headline and "&gt;= 5 GB/s" in headline
    items = dict(re.findall(r"<tr><th>([^<]+)</th><td>(.*?)</td></tr>", first))
    assert items["Nodes"] == "1: node-a"
    assert items["Accelerators"] == 'MI308X x 8 <span class="src">(declared)</span>'
    assert items["Engine"] == 'vllm <span class="src">(recorded)</span>'
    assert items["vllm version"] == '0.11.0 <span class="src">(measured)</span>'
    assert items["lmcache version"] == '0.3.9 <span class="src">(measured)</span>'
    assert items["Model"] == "Qwen/Qwen3-8B" and items["Tensor parallel size"] == "4"
    assert items["Arm baseline"] == "local NVMe (storage local-nvme, offload)"
    assert "not recorded" not in first
    # who ran it and when: the first thing after page one (the PDF keeps page one for the checks)
    details = html.split(FIRST_PAGE_END, 1)[1]
    assert details.index("When and by whom") < details.index("Charts")
    for text in ("alice@vendor", "2026-11-29T20:00:00+00:00", "0.1.0", "cede15b"):
        assert text in details and text not in first, text
    # override with its reason, faults, emulation notice
    assert "Customer contract 2026-11 accepts 20% on this cluster (ticket OPS-1234)" in first
    assert "node-b: ssh: connection refused (exit 255)" in first
    assert 'id="emulation-notice"' in first
    assert "Compute was emulated by kvgate&#39;s KV emulator" in first
    assert "not a hardware result" in first


def test_notice_only_when_emulated(tmp_path: Path) -> None:
    d = write_gate(tmp_path / "G3", make_result(emulated=False))
    render_gate_reports(d)
    html = (d / "report.html").read_text()
    md = (d / "report.md").read_text()
    assert "emulat" not in html.lower()
    assert "emulat" not in md.lower()


def test_html_details_observations_and_evidence(gate_dir: Path) -> None:
    render_gate_reports(gate_dir)
    details = (gate_dir / "report.html").read_text().split(FIRST_PAGE_END, 1)[1]
    assert "compare.ttft_p50_reduction.c8" in details
    assert "40 (about 160 needed to decide)" in details
    assert '<a href="evidence/candidate/c1.jsonl">evidence/candidate/c1.jsonl</a>' in details
    assert '<a href="evidence/fio/node-a-read.json">' in details
    # the per-point, fio and probe tables; no measurement shown as a dotted JSON path
    assert '<table id="points" class="points">' in details and '<table id="fio">' in details
    assert "Measurements: checkpoint" not in details and "node-a.write_bw" not in details
    probes = details[details.index('<table id="probes">'):]
    assert ("<td>checkpoint write</td><td>node-a</td><td class=\"num\">8.00 GB</td><td class=\"num\">3.80 s</td>"
            "<td class=\"num\">2.10 GB/s</td>") in probes


def test_html_is_self_contained_and_svg_well_formed(gate_dir: Path) -> None:
    result = make_result()
    result.checks[0].observations[0].evidence = [
        "https://evil.example/x", "//cdn.example/y", "/etc/passwd", "../../other/result.json", "ok/file.json"]
    write_gate(gate_dir, result)
    render_gate_reports(gate_dir)
    html = (gate_dir / "report.html").read_text()
    assert external_references(html) == []
    assert '<a href="ok/file.json">' in html
    assert "<code>https://evil.example/x</code>" in html  # shown as text, not linked
    charts = svgs(html)
    # TTFT, throughput, and one forest plot for the whole gate (not one per check); no fio bar chart:
    # its figures are the fio table's
    assert len(charts) == 3
    assert all(c.tag == "svg" for c in charts)


def test_markdown_content(gate_dir: Path) -> None:
    render_gate_reports(gate_dir)
    md = (gate_dir / "report.md").read_text()
    assert "**Verdict: FAIL**" in md and "Exit code 1" in md
    for cid in ("ttft_p50_reduction", "throughput_gain", "read_bandwidth", "candidate_failed_requests",
                "checkpoint_bw", "recompute_speedup", "throughput_gain_plausible"):
        assert re.search(rf"^\| `{cid}` \|", md, re.M), cid
    assert "> **Notice:** Compute was emulated" in md
    assert "ticket OPS-1234" in md
    # a table row keeps its column count even when a cell holds a pipe; tags are not live
    row = next(line for line in md.splitlines() if line.startswith("| `checkpoint_bw`"))
    assert len(re.findall(r"(?<!\\)\|", row)) == 9
    assert "\\<script>" in row


def test_no_data_renders_with_sentences(tmp_path: Path) -> None:
    result = make_result(with_data=False, verdict=Verdict.PASS, exit_code=0)
    for c in result.checks:
        c.observations = []
    d = write_gate(tmp_path / "G3", result)
    render_gate_reports(d)
    html = (d / "report.html").read_text()
    assert svgs(html) == []
    assert "No TTFT measurements in this gate" in html
    assert "No fio bandwidth in this gate" not in html  # no fio chart, so no note that it is missing
    assert "No observation recorded" in html
    assert '<div class="big">PASS</div>' in html and "Exit code 0: every blocker check passed" in html


def test_deterministic_output(gate_dir: Path) -> None:
    render_gate_reports(gate_dir)
    first = [(gate_dir / n).read_bytes() for n in ("report.html", "report.md", "junit.xml")]
    render_gate_reports(gate_dir)
    assert first == [(gate_dir / n).read_bytes() for n in ("report.html", "report.md", "junit.xml")]


def test_unknown_schema_version_refused(tmp_path: Path) -> None:
    d = write_gate(tmp_path / "G3", make_result())
    raw = json.loads((d / "result.json").read_text())
    raw["schema_version"] = 2
    (d / "result.json").write_text(json.dumps(raw))
    with pytest.raises(ResultFileError, match=r"schema_version\] is 2; this kvgate reads schema_version 1"):
        render_gate_reports(d)
    assert not (d / "report.html").exists()


@pytest.mark.parametrize("content, message", [
    (None, "no result file"),
    ("{not json", r"result.json:1:2: not valid JSON"),
    ('{"schema_version": 1, "gate": "G3"}', r"not a valid gate result: \[title\] Field required"),
])
def test_bad_result_files(tmp_path: Path, content: str | None, message: str) -> None:
    d = tmp_path / "G3"
    d.mkdir()
    if content is not None:
        (d / "result.json").write_text(content)
    with pytest.raises(ResultFileError, match=message):
        load_gate_result(d)


def test_campaign_report(tmp_path: Path) -> None:
    camp = tmp_path / "camp-1"
    g1 = make_result(emulated=False, verdict=Verdict.PASS, exit_code=0)
    g1.gate, g1.title, g1.checks = "G1", "Arrival acceptance", g1.checks[1:2]
    write_gate(camp / "G1", g1)
    write_gate(camp / "G3", make_result())
    bad = camp / "G2"
    bad.mkdir()
    (bad / "result.json").write_text('{"schema_version": 9}')
    (camp / "evidence-notes").mkdir()  # not a gate: no result.json
    paths = render_campaign_report(camp)
    assert [p.name for p in paths] == ["report.html", "report.md", "junit.xml"]
    html = (camp / "report.html").read_text()
    assert external_references(html) == []
    assert '<div class="big">ERROR</div>' in html  # an unreadable gate makes the campaign not passed
    assert "Not every gate passed: G2 (unreadable), G3 (FAIL)." in html
    assert html.index(">G1<") < html.index(">G2<") < html.index(">G3<")
    assert "schema_version] is 9" in html
    assert '<a href="G3/report.html">' in html
    assert "Gates: G3." in html  # the emulation notice names the emulated gates only
    md = (camp / "report.md").read_text()
    assert "| G1 | Arrival acceptance | **PASS** |" in md and "| G3 |" in md


def test_campaign_times_span_all_gates(tmp_path: Path) -> None:
    """The defect seen: the campaign page showed G3's start time as the campaign's start."""
    camp = tmp_path / "camp-1"
    g1 = make_result(verdict=Verdict.PASS, exit_code=0)
    g1.gate, g1.started_at, g1.finished_at = "G1", "2026-11-20T08:00:00+00:00", "2026-11-20T08:30:00+00:00"
    write_gate(camp / "G1", g1)
    write_gate(camp / "G3", make_result())
    render_campaign_report(camp)
    html = (camp / "report.html").read_text()
    assert "<th>Started (first gate)</th><td>2026-11-20T08:00:00+00:00</td>" in html
    assert "<th>Finished (last gate)</th><td>2026-11-29T20:41:30+00:00</td>" in html


def test_evidence_column_links_files_the_layout_implies(gate_dir: Path) -> None:
    """The defect seen: Evidence was "-" everywhere although evidence files existed."""
    for rel in ("sweep/baseline/c8/rep0/records.jsonl", "sweep/candidate/c8/rep0/records.jsonl",
                "fio/node-a/nvmeof-raid0/read.json", "measured.json"):
        (gate_dir / "evidence" / rel).parent.mkdir(parents=True, exist_ok=True)
        (gate_dir / "evidence" / rel).write_text("{}")
    result = load_gate_result(gate_dir)
    result.checks[2].observations[0].evidence = []  # candidate.fio.seq_read_bw, nothing recorded
    write_gate(gate_dir, result)
    render_gate_reports(gate_dir)
    html = (gate_dir / "report.html").read_text()
    c8 = html[html.index('title="compare.ttft_p50_reduction.c8"'):]
    c8 = c8[:c8.index("</tr>")]
    assert '<a href="evidence/sweep/baseline/c8/">' in c8 and '<a href="evidence/sweep/candidate/c8/">' in c8
    assert '<a href="evidence/fio/node-a/nvmeof-raid0/">' in html
    gain = html[html.index('title="compare.throughput_gain_best"'):]
    assert '<a href="evidence/measured.json">' in gain[:gain.index("</tr>")]
    recorded = {e for c in result.checks for o in c.observations for e in o.evidence}
    for href in set(re.findall(r'href="(evidence/[^"]*)"', html)) - recorded:
        assert (gate_dir / href).exists(), href


def test_campaign_without_gates_is_an_input_error(tmp_path: Path) -> None:
    from harness.errors import InputError

    with pytest.raises(InputError, match="no gate directory"):
        render_campaign_report(tmp_path)


@pytest.mark.parametrize("measurements, inventory, profile", [
    ({"sweep": {"a": {"c8": {"ttft_p50_ms": "fast", "ttft_p99_ms": -5.0, "output_throughput": 1e12}}}},
     {"nodes": {"n1": {"host": "10.0.0.1"}}}, {"arms": ["baseline", "candidate"]}),
    ({"sweep": {"a": {"warmup": {"ttft_p50_ms": 1.0}, "c2": [1, 2]}}, "fio": {"n": "down"}},
     {"nodes": "n1,n2", "platforms": "cuda"}, {"model": {"name": "m", "tp": 4}}),
    ({"sweep": [], "fio": {"n": {"t": {"seq_read_bw": True}}}, "extra": [[1, [2]], {"k": None}]},
     {}, {}),
    ({"sweep": {"a": {"c1": {"ttft_p50_ms": 5.0}}, "b": {"c1000000": {"ttft_p50_ms": 5.0}}}},
     {"cluster": "x" * 300}, {"engine": "<b>vllm</b>"}),
])
def test_odd_layouts_render_without_crashing(tmp_path: Path, measurements: dict[str, object],
                                             inventory: dict[str, object],
                                             profile: dict[str, object]) -> None:
    result = make_result()
    result.measurements, result.inventory, result.profile = measurements, inventory, profile
    d = write_gate(tmp_path / "G3", result)
    render_gate_reports(d)
    html = (d / "report.html").read_text()
    assert external_references(html) == []
    svgs(html)  # every chart drawn is well-formed
    assert "<b>vllm</b>" not in html
    assert "not recorded" not in _first_page(html)  # a page-one item says what is known, or that it was not collected
    (d / "report.md").read_text()


def test_declared_engine_environment_is_on_page_one(tmp_path: Path) -> None:
    """Issue 33 item 4: the variables a profile declares are all that reach the engine besides
    kvgate's own; the report names them (secrets as stored: masked), or says none were declared."""
    result = make_result()
    result.profile = {**result.profile, "engine_env": {"VLLM_X": "1", "HF_TOKEN": "***"}}
    gate = write_gate(tmp_path / "c" / "G3", result)
    render_gate_reports(gate)
    first = _first_page((gate / "report.html").read_text())
    tested = dict(re.findall(r"<tr><th>([^<]+)</th><td>(.*?)</td></tr>", first))
    assert tested["Engine environment"] == 'HF_TOKEN=***, VLLM_X=1 <span class="src">(declared)</span>'
    result.profile = {**result.profile, "engine_env": {}}
    gate = write_gate(tmp_path / "d" / "G3", result)
    render_gate_reports(gate)
    assert ('<th>Engine environment</th><td>none declared <span class="src">(declared)</span></td>'
            in (gate / "report.html").read_text())

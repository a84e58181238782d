"""Render a gate's reports (HTML, Markdown, JUnit XML) and the campaign summary from the gate
result files alone, so ``kvgate report`` can redo them at any time with the same bytes.

Output is deterministic (no render time is written): re-rendering a signed gate does not change
its manifest.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

import jinja2
import markupsafe

from harness.errors import InputError
from harness.report.bandwidthchart import bandwidth_charts
from harness.report.bandwidthtable import bandwidth_section
from harness.report.campaignmanifest import (
    CAMPAIGN_MANIFEST,
    KEYWORD,
    campaign_manifest_sha256,
    write_campaign_manifest,
)
from harness.report.charts import gate_charts, soak_charts
from harness.report.cliffchart import cliff_charts
from harness.report.evidence import finder as evidence_finder
from harness.report.forest import gate_forest
from harness.report.i18n import DEFAULT_LANG, N_, _t, check_lang, language, suffix, translations
from harness.report.junit import junit_xml
from harness.report.labels import NOTICE_KINDS, labels_in
from harness.report.loader import RESULT_FILE, ResultFileError, load_gate_result
from harness.report.manifest import MANIFEST, SIGNATURES
from harness.report.pageone import headline, system_under_test, verdict_why, workload
from harness.report.phrases import say
from harness.report.soak import drift_rows, soak_periods
from harness.report.tables import evidence_files, point_rows, printed_evidence, probe_rows, tier_point_rows
from harness.report.view import (
    EMULATION_NOTICE,
    GateView,
    baseline_rows,
    campaign_provenance,
    campaign_verdict,
    fio_rows,
    gate_view,
    sweep_rows,
    xml_safe,
)
from harness.store.durable import write_atomic
from harness.store.journal import gate_runs, read_journal, runs_line
from harness.store.schema import GateResult, Verdict

REPORT_HTML = "report.html"
REPORT_MD = "report.md"
JUNIT_XML = "junit.xml"
# the rows of the sign-off block (ink or electronic): the role code names the PDF signature field
SIGNOFF_ROLES = (("vendor", N_("Vendor")), ("customer", N_("Customer")))


def _md_cell(value: object) -> str:
    """Text safe inside a Markdown table cell: pipes escaped, line breaks kept as <br>."""
    text = "" if value is None else str(value)
    text = text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", "")
    # Text that looks like an HTML tag is shown, never interpreted, by Markdown renderers.
    text = re.sub(r"<(?=[A-Za-z/!?])", r"\\<", text)
    return text.replace("\n", "<br>")


def _md_code(value: object) -> str:
    """Text safe inside a Markdown code span in a table cell: no backtick, pipe or line break can
    end the span, the cell or the row (names from an inventory are user text)."""
    text = "" if value is None else str(value)
    text = re.sub(r"[\r\n\t]+", " ", text).replace("`", "'")
    return text.replace("|", "\\|")


def _finalize(value: object) -> object:
    """Every value a template prints loses ANSI escapes and control characters."""
    if isinstance(value, markupsafe.Markup):
        return markupsafe.Markup(xml_safe(str(value)))
    if isinstance(value, str):
        return xml_safe(value)
    return value


def _environment(*, html: bool, lang: str = DEFAULT_LANG) -> jinja2.Environment:
    env = jinja2.Environment(
        extensions=["jinja2.ext.i18n"],
        finalize=_finalize,
        loader=jinja2.PackageLoader("harness.report", "templates"),
        autoescape=html,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["md"] = _md_cell
    env.filters["mdcode"] = _md_code
    trans = translations(lang)
    env.install_gettext_translations(trans, newstyle=True)  # type: ignore[attr-defined]
    # ``_("literal")`` is for the templates' own words (their markup is trusted); ``tr(value)``
    # translates a word handed over by code or data, escaped like any other value.
    # Recorded words go through phrases.say: a catalog message as they are, or a known sentence
    # with its numbers (a report in English prints them exactly as recorded).
    env.globals["tr"] = (lambda m: markupsafe.escape(say(str(m), trans.gettext))) if html else (
        lambda m: say(str(m), trans.gettext))
    env.globals["lang"] = lang
    env.globals["labels_of"] = labels_in(lang)  # page one's labels block (issue 51), in the report's language
    env.globals["notice_kinds"] = NOTICE_KINDS
    return env


def _write(path: Path, data: bytes) -> Path:
    """Write atomically (a crash never leaves half a report)."""
    write_atomic(path, data)
    return path


def render_gate_html(result: GateResult, gate_dir: Path | None = None, lang: str = DEFAULT_LANG) -> str:
    with language(lang):
        view = gate_view(result, evidence_finder(gate_dir, result))
        charts = (gate_charts(result.measurements, result.checks) + cliff_charts(result.measurements)
                  + bandwidth_charts(result.measurements))
        bandwidth = bandwidth_section(result.measurements)
        forest = gate_forest(result.checks)
        soak = soak_charts(result.measurements)
        page_one = {"why": verdict_why(view.checks, bool(view.power)), "headline": headline(view.checks),
                    "sut": system_under_test(result), "workload": workload(result)}
    files, problems = evidence_files(gate_dir)
    return _environment(html=True, lang=lang).get_template("gate.html.j2").render(
        r=result, v=view, charts=charts, forest=forest, points=point_rows(result.measurements, gate_dir),
        probes=probe_rows(result.measurements), tier_points=tier_point_rows(result.measurements),
        evidence_files=files, evidence_printed=printed_evidence(files), evidence_problems=problems,
        sweep_rows=sweep_rows(result.measurements), fio_rows=fio_rows(result.measurements),
        signoff_roles=SIGNOFF_ROLES, baseline_rows=baseline_rows(result), soak_charts=soak,
        drift_rows=drift_rows(result.checks),
        periods=soak_periods(result.measurements), bandwidth=bandwidth, **page_one)


def render_gate_markdown(result: GateResult, gate_dir: Path | None = None, lang: str = DEFAULT_LANG) -> str:
    with language(lang):
        view = gate_view(result, evidence_finder(gate_dir, result))
        bandwidth = bandwidth_section(result.measurements)
        sut, load = system_under_test(result), workload(result)
    return _environment(html=False, lang=lang).get_template("gate.md.j2").render(
        r=result, v=view, baseline_rows=baseline_rows(result), bandwidth=bandwidth, sut=sut, workload=load)


def report_names(lang: str = DEFAULT_LANG) -> tuple[str, str]:
    """``report.html``/``report.md`` in English, ``report.zh.html``/``report.zh.md`` in Chinese:
    both languages can sit (and be signed) side by side."""
    infix = suffix(lang)
    return f"report{infix}.html", f"report{infix}.md"


def render_gate_reports(gate_dir: Path, lang: str = DEFAULT_LANG) -> list[Path]:
    """Read ``gate_dir/result.json`` and write the HTML and Markdown reports in ``lang`` and
    ``junit.xml`` next to it. Returns the paths of the four report files (``result.json`` is the
    JSON report)."""
    gate_dir = Path(gate_dir)
    lang = check_lang(lang)
    result = load_gate_result(gate_dir)
    html_name, md_name = report_names(lang)
    return [
        gate_dir / RESULT_FILE,
        _write(gate_dir / html_name, render_gate_html(result, gate_dir, lang).encode("utf-8")),
        _write(gate_dir / md_name, render_gate_markdown(result, gate_dir, lang).encode("utf-8")),
        _write(gate_dir / JUNIT_XML, junit_xml([result])),
    ]


def _gate_sort_key(path: Path) -> tuple[str, int, str]:
    m = re.fullmatch(r"([A-Za-z]*)(\d+)", path.name)
    return (m.group(1), int(m.group(2)), path.name) if m else (path.name, 0, path.name)


def gate_dirs(campaign_dir: Path) -> list[Path]:
    """The gate directories of a campaign: its subdirectories holding a ``result.json``."""
    return sorted((p for p in Path(campaign_dir).iterdir() if p.is_dir() and (p / RESULT_FILE).is_file()),
                  key=_gate_sort_key)


def _manifest_sha(gate_dir: Path) -> str:
    path = gate_dir / MANIFEST
    if not path.is_file() or path.is_symlink():
        return ""
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass(frozen=True)
class GateSignature:
    """One OpenSSH signature of a gate's manifest, as its unsigned metadata file names it."""

    signer: str
    role_label: str
    date: str
    fingerprint: str


_SIG_META_MAX = 64 << 10


def gate_signatures(gate_dir: Path) -> list[GateSignature]:
    """The OpenSSH signatures present on a gate (``signatures/<role>-<id>.json``: name, role, date,
    key fingerprint), for the campaign page; ``kvgate verify`` is what checks them."""
    sig_dir = gate_dir / SIGNATURES
    if not sig_dir.is_dir() or sig_dir.is_symlink():
        return []
    labels = dict(SIGNOFF_ROLES)
    out = []
    for meta in sorted(sig_dir.glob("*.json")):
        if meta.name.endswith(".sig.json") or not meta.is_file() or meta.is_symlink() \
                or meta.stat().st_size > _SIG_META_MAX or not meta.with_suffix(".sig").is_file():
            continue
        try:
            data = json.loads(meta.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            role = str(data.get("role", "?"))
            out.append(GateSignature(signer=str(data.get("signer", "?"))[:120], role_label=labels.get(role, role),
                                     date=str(data.get("signed_at", "?"))[:10],
                                     fingerprint=str(data.get("fingerprint", "?"))[:80]))
    return out


def campaign_documents(campaign_dir: Path, lang: str = DEFAULT_LANG) -> tuple[str, str, bytes]:
    with language(lang):
        return _campaign_documents(Path(campaign_dir), lang)


def _campaign_documents(campaign_dir: Path, lang: str) -> tuple[str, str, bytes]:
    """The campaign's HTML, Markdown and JUnit, from each gate's ``result.json`` and the sha256 of
    its ``MANIFEST.sha256`` (so the signed campaign document names the exact gate contents).
    A gate whose result file cannot be read is an error row (and the campaign not passed)."""
    campaign_dir = Path(campaign_dir)
    if not campaign_dir.is_dir():
        raise InputError(f"{campaign_dir}: not a campaign directory")
    views: list[GateView] = []
    results: list[GateResult] = []
    unreadable: list[tuple[str, str]] = []
    rows: list[tuple[str, GateView | None, str]] = []  # in gate order: (name, view, or the error)
    for d in gate_dirs(campaign_dir):
        try:
            result = load_gate_result(d)
        except ResultFileError as exc:
            unreadable.append((d.name, str(exc)))
            rows.append((d.name, None, str(exc)))
            continue
        view = gate_view(result)
        view.dirname = d.name
        view.manifest_sha256 = _manifest_sha(d)
        views.append(view)
        results.append(result)
        rows.append((d.name, view, ""))
    if not views and not unreadable:
        raise InputError(f"{campaign_dir}: no gate directory with a {RESULT_FILE} (nothing to report)")
    verdicts = [v.verdict for v in views] + [Verdict.ERROR for _ in unreadable]
    # the system under test and the workload as the latest gate that names its nodes recorded them
    subject = next((r for r in reversed(results) if r.inventory.get("nodes")), None)
    context = dict(
        name=campaign_dir.name, gates=views, rows=rows, unreadable=unreadable,
        verdict=campaign_verdict(verdicts),
        error_verdict=Verdict.ERROR, notice=EMULATION_NOTICE,
        not_passed=[f"{name} ({view.verdict.value if view else 'unreadable'})" for name, view, _ in rows
                    if view is None or view.verdict is not Verdict.PASS],
        emulated=[v.result.gate for v in views if v.emulated],
        overrides=[(v.result.gate, c) for v in views for c in v.overrides],
        baselines=[(v.result.gate, b) for v in views for b in baseline_rows(v.result)],
        provenance=campaign_provenance(campaign_dir.name, results), signoff_roles=SIGNOFF_ROLES,
        signatures={d.name: gate_signatures(d) for d in gate_dirs(campaign_dir)},
        subject=subject.gate if subject else None, sut=system_under_test(subject) if subject else [],
        workload=workload(subject) if subject else [],
        campaign_manifest=CAMPAIGN_MANIFEST, campaign_manifest_sha256=campaign_manifest_sha256(campaign_dir),
        manifest_keyword=KEYWORD, runs=_journal_runs(campaign_dir))
    html = _environment(html=True, lang=lang).get_template("campaign.html.j2").render(**context)
    md = _environment(html=False, lang=lang).get_template("campaign.md.j2").render(**context)
    return html, md, junit_xml(results)


def _journal_runs(campaign_dir: Path) -> list[str]:
    """Every run of every gate as the campaign's journal lists them ("G2: 2 runs: FAIL 10:02, PASS 10:19")."""
    read = read_journal(campaign_dir)
    return [runs_line(g, entries, _t) for g, entries in sorted(gate_runs(read.records).items())]


def render_campaign_report(campaign_dir: Path, lang: str = DEFAULT_LANG) -> list[Path]:
    """Write the campaign's HTML and Markdown pages in ``lang`` and ``junit.xml`` at its root."""
    lang = check_lang(lang)
    write_campaign_manifest(campaign_dir)  # the set of gates the page shows (issue 27)
    html, md, junit = campaign_documents(campaign_dir, lang)
    html_name, md_name = report_names(lang)
    return [
        _write(Path(campaign_dir) / html_name, html.encode("utf-8")),
        _write(Path(campaign_dir) / md_name, md.encode("utf-8")),
        _write(Path(campaign_dir) / JUNIT_XML, junit),
    ]

"""Report languages: the catalog covers every word the templates and code hand over, the zh
reports carry Chinese wording with numbers, dates and codes unchanged, and the English reports
are unchanged by the catalog machinery."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import read_po

from harness.errors import InputError
from harness.report import render_campaign_report, render_gate_reports
from harness.report.i18n import catalog_path, check_lang

from .conftest import make_result, write_gate

REPORT = Path(__file__).resolve().parents[2] / "harness" / "report"
_PLACEHOLDER = re.compile(r"%\((\w+)\)s|%%")


def _extracted() -> set[str]:
    methods = [("templates/**.j2", "jinja2"), ("**.py", "python")]
    options = {"templates/**.j2": {"extensions": "jinja2.ext.i18n", "newstyle_gettext": "true",
                                   "trim_blocks": "true", "lstrip_blocks": "true"}}
    keywords = {"_": None, "N_": None, "_t": None}
    ids = {m[2] for m in extract_from_dir(str(REPORT), methods, options_map=options, keywords=keywords) if m[2]}
    gates = extract_from_dir(str(REPORT.parent / "gates"), [("messages.py", "python")], keywords=keywords)
    return ids | {m[2] for m in gates if m[2]}


def test_zh_catalog_translates_every_message_with_the_same_placeholders() -> None:
    with open(REPORT / catalog_path("zh"), "rb") as fh:
        catalog = {m.id: m.string for m in read_po(fh) if m.id}
    ids = _extracted()
    assert len(ids) > 100
    missing = sorted(i for i in ids if not catalog.get(i))
    assert missing == []
    for msgid in ids:
        assert sorted(_PLACEHOLDER.findall(msgid)) == sorted(_PLACEHOLDER.findall(catalog[msgid])), msgid


def test_unknown_language_is_a_usage_error() -> None:
    with pytest.raises(InputError, match="expected one of en, zh"):
        check_lang("fr")


def test_zh_gate_and_campaign_reports(tmp_path: Path) -> None:
    camp = tmp_path / "camp-1"
    gate = write_gate(camp / "G3", make_result())
    paths = render_gate_reports(gate, "zh")
    assert [p.name for p in paths] == ["result.json", "report.zh.html", "report.zh.md", "junit.xml"]
    html = (gate / "report.zh.html").read_text(encoding="utf-8")
    assert '<html lang="zh">' in html
    for word in ("检查结果", "被测系统", "负载", "时间与人员", "签字确认", "厂商方", "客户方",
                 "退出码 1：有阻断性检查未通过或未运行", "计算由 kvgate 的 KV 模拟器模拟",
                 "TTFT 随并发数变化", "阻断项", "点估计", "（约需 160 个才能判定）"):
        assert word in html, word
    for english in ("What was tested", "When and by whom", "Sign-off", "Threshold overrides", "concurrency (requests"):
        assert english not in html, english
    # numbers, units, dates, check ids and verdict codes are not translated
    for kept in ("2026-11-29T20:41:30+00:00", "2.90 GB/s", "ttft_p50_reduction", ">INCONCLUSIVE<", ">FAIL<"):
        assert kept in html, kept
    md = (gate / "report.zh.md").read_text(encoding="utf-8")
    assert "## 检查结果" in md and "**结论: FAIL**" in md
    assert not (gate / "report.html").exists()  # English is its own file: both can be signed side by side
    render_campaign_report(camp, "zh")
    page = (camp / "report.zh.html").read_text(encoding="utf-8")
    assert "kvgate 测试项目 camp-1" in page and "阈值修改" in page and "签字确认" in page


def test_translated_words_from_data_are_escaped(tmp_path: Path) -> None:
    result = make_result()
    result.measurements["odd"] = {"<b>key</b>": 1}
    gate = write_gate(tmp_path / "camp-1" / "G3", result)
    render_gate_reports(gate, "zh")
    html = (gate / "report.zh.html").read_text(encoding="utf-8")
    assert "<b>key</b>" not in html and "&lt;b&gt;key&lt;/b&gt;" in html

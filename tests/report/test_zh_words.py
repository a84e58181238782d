"""Chinese all the way: the measured and reason texts the gate engine composes (point estimates,
intervals, an interval straddling its threshold, too few repetitions, a value not measured, "all N
passed") reach the zh report as catalog messages with formatted numbers, so its checks and
observations carry no Latin word outside the allowed terms: check ids, metric labels, units,
verdict codes and tool names. The checks are evaluated by the real gate engine
(``evaluate_check``); descriptions and pipeline details are data and given in Chinese here."""

from __future__ import annotations

import random
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from harness.config.gatespec import Check
from harness.gates.evaluate import evaluate_check
from harness.report import render_gate_reports

from .budget import demo_early_result, demo_g4_result, demo_result, write_gate_dir, write_soak_dir
from .conftest import make_result, write_gate

# terms a zh report keeps as they are: verdict codes, units, statistics and tool names; the check
# ids and metric paths of the checks (identifiers) are allowed too
ALLOWED = {"PASS", "FAIL", "INCONCLUSIVE", "NOT_RUN", "ERROR", "NOT_APPLICABLE", "TTFT", "p50", "p90", "p99",
           "ms", "s", "x", "n", "CI", "GB", "MB", "kB", "KV", "tok", "bootstrap", "percentile", "hierarchical",
           "welch", "t", "log", "ratio"}


def _samples(center: float, spread: float, n: int, seed: int) -> list[list[float]]:
    r = random.Random(seed)
    return [[center * (1 + r.gauss(0, spread)) for _ in range(16)] for _ in range(n)]


def _measured() -> dict[str, Any]:
    def ratio(a_center: float, n: int, spread: float, seed: int) -> dict[str, Any]:
        return {"value": None, "samples": {"kind": "ratio", "a_groups": _samples(a_center, spread, n, seed),
                                           "b_groups": _samples(100.0, spread, n, seed + 1), "stat": "p50",
                                           "transform": "reduction"}}
    return {"compare": {"ttft_p50_reduction": {"c2": ratio(60.0, 5, 0.02, 1), "c8": ratio(75.0, 5, 0.4, 3),
                                               "c16": ratio(70.0, 1, 0.02, 5)}},
            "candidate": {"failed_ratio": {"value": 0.0, "text": "80 个中 0 个", "detail": "候选组全部请求"},
                          "cold_restore": {"offload_hit_vs_expected": {"c2": 0.99, "c8": 1.0}}}}


def _checks() -> list[Any]:
    specs = [
        {"id": "ttft_p50_reduction", "description": "TTFT p50 降低", "metric": "compare.ttft_p50_reduction.*",
         "comparator": ">=", "threshold": "25%", "statistic": {"kind": "interval", "confidence": 0.95,
                                                              "resamples": 300}},
        {"id": "candidate_failed_requests", "description": "失败请求不超过 1%", "metric": "candidate.failed_ratio",
         "comparator": "<=", "threshold": "1%", "statistic": {"kind": "point"}},
        {"id": "hit_share", "description": "卸载层命中占比",
         "metric": "candidate.cold_restore.offload_hit_vs_expected.*", "comparator": ">=", "threshold": "0.9x",
         "statistic": {"kind": "point"}},
        {"id": "recompute_speedup", "description": "相对重算的加速", "metric": "compare.recompute_speedup.*",
         "comparator": ">=", "threshold": "1x", "statistic": {"kind": "point"}},
    ]
    return [evaluate_check(Check.model_validate(s), _measured()) for s in specs]


class _Cells(HTMLParser):
    """The text of the checks table and the observations table (titles and code ids aside)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.depth, self.code, self.words = 0, 0, []  # type: tuple[int, int, list[str]]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table" and dict(attrs).get("id") in ("checks", "observations-table"):
            self.depth = 1
        elif tag == "table" and self.depth:
            self.depth += 1
        self.code += tag in ("code", "span") and dict(attrs).get("class", "") in ("", None) and tag == "code"

    def handle_endtag(self, tag: str) -> None:
        if tag == "table" and self.depth:
            self.depth -= 1
        if tag == "code" and self.code:
            self.code -= 1

    def handle_data(self, data: str) -> None:
        if self.depth and not self.code:
            self.words += re.findall(r"[A-Za-z][A-Za-z0-9_]*", data)


def test_zh_checks_and_observations_have_no_english_words(tmp_path: Path) -> None:
    result = make_result()
    result.checks = _checks()
    result.faults, result.notes = [], []
    verdicts = {c.id: c.verdict.value for c in result.checks}
    assert verdicts == {"ttft_p50_reduction": "INCONCLUSIVE", "candidate_failed_requests": "PASS",
                        "hit_share": "PASS", "recompute_speedup": "NOT_RUN"}, verdicts
    gate = write_gate(tmp_path / "G3", result)
    render_gate_reports(gate, "zh")
    html = (gate / "report.zh.html").read_text(encoding="utf-8")
    cells = _Cells()
    cells.feed(html)
    # identifiers: check ids, metric paths (a NOT_RUN names the metric it found no value at), points
    ids = {c.id for c in result.checks} | {"c2", "c8", "c16"}
    ids |= {w for c in result.checks for w in re.findall(r"[A-Za-z][A-Za-z0-9_]*", c.metric)}
    stray = sorted({w for w in cells.words if w not in ALLOWED and w not in ids})
    assert stray == [], stray
    # the same result in English reads as the gate engine wrote it
    render_gate_reports(gate, "en")
    en = (gate / "report.html").read_text(encoding="utf-8")
    assert "point estimate" in en and "interval straddles the threshold 25%" in en
    assert "点估计" in html and "区间跨越阈值 25%" in html


# --- the whole zh report of the demo's G3 and G4 (as they recorded themselves) ---------------

_SKIP_TAGS = ("style", "script", "code", "title", "a")  # styles, identifiers, tooltips, evidence paths
_IDENT = re.compile(r"[\w.:/=*%+-]*[\d_/.=*%][\w.:/=*%+-]*")  # paths, ids, numbers with units


class _Text(HTMLParser):
    """Every text a reader sees in the HTML (identifiers in <code>, links and tooltips aside)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.skip, self.texts = 0, []  # type: tuple[int, list[str]]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.skip += tag in _SKIP_TAGS

    def handle_endtag(self, tag: str) -> None:
        self.skip -= tag in _SKIP_TAGS and self.skip > 0

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.texts.append(data)


def _user_words(result: Any) -> list[str]:
    """Words the customer's own files wrote (profile and inventory text, threshold override
    reasons, the campaign name): data, shown as written."""
    out: list[str] = [result.campaign]

    def walk(v: Any) -> None:
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
    walk(result.profile)
    walk(result.inventory)
    out += [c.override_reason for c in result.checks if c.override_reason]
    return sorted(out, key=len, reverse=True)


def english_runs(html: str, user: list[str]) -> list[str]:
    """Runs of 4 or more consecutive English words: a token is a word when it is letters only
    (an apostrophe or hyphen inside); identifiers, numbers, units and paths break a run."""
    parser = _Text()
    parser.feed(html)
    runs = []
    for text in parser.texts:
        for u in user:
            text = text.replace(u, " | ")
        words: list[str] = []
        for tok in re.split(r"[\s,;:()\[\]\"“”]+", text) + [""]:
            if re.fullmatch(r"[A-Za-z]+(?:['’-][A-Za-z]+)*", tok) and not _IDENT.fullmatch(tok):
                words.append(tok)
                continue
            if len(words) >= 4:
                runs.append(" ".join(words))
            words = []
    return sorted(set(runs))


def _demo_gate(root: Path, gate: str) -> tuple[Path, Any]:
    """The demo's recorded gate ``gate`` written as a gate directory (G1-G4)."""
    if gate == "G4":
        result = demo_g4_result()
        return write_soak_dir(root / gate, result), result
    result = demo_result() if gate == "G3" else demo_early_result(gate)
    return (write_gate_dir(root / gate, result) if gate == "G3" else write_gate(root / gate, result)), result


@pytest.mark.parametrize("gate", ["G1", "G2", "G3", "G4"])
def test_zh_report_of_the_demo_has_no_english_sentence(tmp_path: Path, gate: str) -> None:
    """The demo's G1-G4 in Chinese: every heading, table, section (soak, cliff, estimate),
    gate-file description and pipeline-recorded text is Chinese; what stays Latin is identifiers
    (check ids, metric paths, evidence files), units, tool names and the customer's own words."""
    d, result = _demo_gate(tmp_path, gate)
    render_gate_reports(d, "zh")
    runs = english_runs((d / "report.zh.html").read_text(encoding="utf-8"), _user_words(result))
    assert runs == [], runs
    # the heuristic sees English: the same report in English is full of it
    render_gate_reports(d, "en")
    assert len(english_runs((d / "report.html").read_text(encoding="utf-8"), _user_words(result))) > 30


def test_zh_campaign_page_of_the_demo_has_no_english_sentence(tmp_path: Path) -> None:
    """The campaign page of the demo's G1-G4 in Chinese: gate titles, baselines, custody notices
    and the sign-off block are Chinese; the profile's override reasons are the customer's words."""
    from harness.report import render_campaign_report

    camp = tmp_path / "demo-camp"
    results = [_demo_gate(camp, g)[1] for g in ("G1", "G2", "G3", "G4")]
    render_campaign_report(camp, "zh")
    user = sorted({w for r in results for w in _user_words(r)}, key=len, reverse=True)
    html = (camp / "report.zh.html").read_text(encoding="utf-8")
    assert english_runs(html, user) == []
    assert "72 小时稳定性" in html and "72-hour stability" not in html  # gate titles in Chinese on every page
    render_campaign_report(camp, "en")
    assert len(english_runs((camp / "report.html").read_text(encoding="utf-8"), user)) > 10

"""history import (idempotent, series by fingerprint), the history CLI, export round trips, the
trend page."""

from __future__ import annotations

import csv
import json
import random
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from harness.cli.main import run as cli
from harness.pipelines.nightly.historyrecords import import_reports, series_key
from harness.report.trend import render_trend_html
from harness.store.campaign import GateDir
from harness.store.export import MissingExtra, campaign_tables, history_tables, write_tables
from harness.store.historydb import HistoryDB, MetricRecord, RunRecord
from harness.store.schema import CheckResult, GateResult, Interval, Observation, Verdict

PROFILE = {"name": "p", "model": "m", "engine": "sim", "arms": [{"name": "candidate"}], "load": {"concurrency": [2]}}


def _gate_result(campaign: str, gate: str, started: str, value: float, profile: dict[str, Any] | None = None,
                 **extra: Any) -> GateResult:
    obs = Observation(path="compare.ttft_p50_reduction.c2", measured=value, verdict=Verdict.PASS, n_samples=40,
                      interval=Interval(low=value - 0.05, high=value + 0.05, confidence=0.95))
    check = CheckResult(id="ttft_reduction", description="d", metric="compare.ttft_p50_reduction.*", comparator=">=",
                        severity="blocker", statistic="interval", verdict=Verdict.PASS, observations=[obs])
    return GateResult(gate=gate, title="t", campaign=campaign, verdict=Verdict.PASS, exit_code=0, started_at=started,
                      finished_at=started, kvgate_version="0.1.0", git_commit="abc",
                      inventory={"cluster": "c", "nodes": [{"name": "n1", "versions": {"fio": "3.33"}}]},
                      profile=dict(profile or PROFILE), checks=[check],
                      measurements={"sweep": {"candidate": {"2": {"ttft_p50_ms": 50.0, "output_throughput": 100.0}}}},
                      **extra)


def _write(root: Path, campaign: str, gate: str, result: GateResult) -> Path:
    d = root / campaign / gate
    GateDir(d, gate).write_result(result)
    (root / campaign / "campaign.json").write_text("{}")
    return d


def _nightly_result(campaign: str, started: str, ttft: list[float]) -> GateResult:
    r = _gate_result(campaign, "nightly", started, 0.3)
    r.checks = []
    r.measurements["nightly"] = {"series": "f" * 64, "fingerprint": {"load": 1}, "metrics": {
        "candidate.c2.ttft_p50_ms": {"unit": "ms", "better": "lower", "n": len(ttft),
                                     "median": sorted(ttft)[len(ttft) // 2], "low": min(ttft), "high": max(ttft),
                                     "samples": ttft}}}
    return r


def test_import_is_idempotent_and_keys_series_by_fingerprint(tmp_path: Path, history_url: str) -> None:
    """On both backends (history_url: SQLite and the test PostgreSQL server)."""
    root = tmp_path / "reports"
    _write(root, "c1", "G2", _gate_result("c1", "G2", "2026-01-01T00:00:00Z", 0.2))
    _write(root, "c1", "G3", _gate_result("c1", "G3", "2026-01-01T01:00:00Z", 0.3))
    _write(root, "c1", "G1", _gate_result("c1", "G1", "2026-01-01T00:00:00Z", 1.0))  # not a performance series
    other = dict(PROFILE, load={"concurrency": [4]})
    _write(root, "c2", "G3", _gate_result("c2", "G3", "2026-01-02T01:00:00Z", 0.3, profile=other))
    n = root / "nightly-1"
    GateDir(n, "nightly").write_result(_nightly_result("nightly-1", "2026-01-03T00:00:00Z", [1.0, 2.0, 3.0]))
    bad = root / "c3" / "G3"
    bad.mkdir(parents=True)
    (bad / "result.json").write_text("{not json")
    with HistoryDB(history_url) as db:
        rep = import_reports(db, root)
        assert len(rep.added) == 4 and not rep.already
        assert len(rep.skipped) == 1 and "c3" in rep.skipped[0]
        again = import_reports(db, root)
        assert not again.added and len(again.already) == 4
        assert db.count()[0] == 4
        series = {r.campaign + "/" + r.kind: r.series for r in db.runs()}
        assert series["c1/G2"] == series["c1/G3"] != series["c2/G3"]  # another workload: another series
        assert series["nightly-1/nightly"] == "f" * 64
        run = db.runs(kind="nightly", with_metrics=True)[0]
        assert run.metrics[0].samples == [1.0, 2.0, 3.0] and run.metrics[0].better == "lower"
        g3 = db.runs(kind="G3", series=series["c1/G3"], with_metrics=True)[0]
        assert g3.metrics[0].name == "compare.ttft_p50_reduction.c2" and g3.metrics[0].low == pytest.approx(0.25)
        assert g3.versions == {"n1": {"fio": "3.33"}}


def test_series_key_prefers_the_recorded_fingerprint() -> None:
    assert series_key({"fingerprint": {"digest": "d" * 64, "fields": {"a": 1}}, "profile": PROFILE}) == \
        ("d" * 64, {"a": 1})
    digest, fields = series_key({"profile": PROFILE})
    assert len(digest) == 64 and fields["load"] == {"concurrency": [2]}
    assert series_key({"profile": dict(PROFILE, description="words")})[0] == digest  # not a workload field
    assert series_key({"profile": dict(PROFILE, model="other")})[0] != digest


def test_history_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KVGATE_HISTORY_URL", raising=False)
    root = tmp_path / "reports"
    for i, vals in enumerate(([10.0, 10.5, 11.0, 11.5, 12.0], [10.2, 10.6, 11.0, 11.4, 11.8],
                              [30.0, 30.5, 31.0, 31.5, 32.0])):
        GateDir(root / f"n{i}", "nightly").write_result(_nightly_result(f"n{i}", f"2026-01-0{i + 1}T00:00:00Z", vals))
    _write(root, "c2", "G3", _gate_result("c2", "G3", "2026-01-02T01:00:00Z", 0.3))
    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    assert cli(["history", "import", str(root), "--history", url]) == 0
    assert "imported 4 run(s); 0 already" in capsys.readouterr().out
    assert cli(["history", "list", "--history", url, "--kind", "nightly"]) == 0
    out = capsys.readouterr().out
    assert out.count("nightly") >= 3 and "n2" in out
    # ids follow the import order: c2 (1), n0 (2), n1 (3), n2 (4)
    assert cli(["history", "show", "2", "--history", url]) == 0
    assert "candidate.c2.ttft_p50_ms" in capsys.readouterr().out
    assert cli(["history", "compare", "2", "3", "--history", url]) == 0
    assert "no change" in capsys.readouterr().out
    assert cli(["history", "compare", "2", "4", "--history", url]) == 0
    out = capsys.readouterr().out
    assert "+181.8%" in out and "regression" in out  # 31 vs 11 ms
    assert cli(["history", "compare", "2", "1", "--history", url]) == 2  # another series: refused
    assert "different series" in capsys.readouterr().err
    assert cli(["history", "show", "99", "--history", url]) == 2
    assert cli(["history", "trend", "fff", "--history", url, "-o", str(tmp_path / "t.html")]) == 0
    assert "candidate.c2.ttft_p50_ms" in (tmp_path / "t.html").read_text()


def _history_with_step(tmp_path: Path) -> tuple[HistoryDB, str]:
    db = HistoryDB(f"sqlite:///{tmp_path / 'trend.sqlite'}")
    rng = random.Random(2)
    for i in range(40):
        centre = 100.0 if i < 25 else 120.0
        samples = [rng.gauss(centre, 1.0) for _ in range(5)]
        db.add_run(RunRecord(run_key=f"r{i}", series="s" * 64, kind="nightly", started_at=f"2026-02-01T00:{i:02d}:00Z",
                             campaign=f"night-{i}", git_commit=f"commit{i:02d}", nodes=["n1"], metrics=[
                                 MetricRecord(name="candidate.c2.ttft_p50_ms", unit="ms", better="lower", n=5,
                                              median=sorted(samples)[2], low=min(samples), high=max(samples),
                                              samples=samples)]))
    return db, "s" * 64


def test_trend_page_marks_change_points_and_the_latest_run(tmp_path: Path) -> None:
    db, series = _history_with_step(tmp_path)
    with db:
        html = render_trend_html(db, series)
    assert html.count('class="change-point"') == 1
    assert "regression +20" in html or re.search(r"change point: regression \+(19|20|21)", html)
    assert html.count('class="latest"') == 2  # the point and the table row
    assert "run 40 2026-02-01T00:39:00Z night-39 commit commit39" in html
    for svg in re.findall(r"<svg.*?</svg>", html, re.S):
        ET.fromstring(svg)  # well-formed
    assert "<script" not in html and "http://" not in html.replace("http://www.w3.org", "")


def test_trend_page_in_chinese(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The trend page's words come from the gate reports' catalogs: zh has every one of them, and
    numbers, run ids, dates and metric names stay as recorded."""
    db, series = _history_with_step(tmp_path)
    with db:
        html = render_trend_html(db, series, lang="zh")
        english = render_trend_html(db, series)
    assert '<html lang="zh">' in html and "kvgate 趋势：序列 ssssssssssss" in html
    assert "同一工作负载指纹的 40 次运行" in html and "越低越好" in html and "<th>结论</th>" in html
    assert re.search(r"变化点：退化 \+(19|20|21)\.\d%", html)  # the change point's title
    assert "运行 40 2026-02-01T00:39:00Z night-39 提交 commit39" in html  # hover label, values as recorded
    for sentence in ("Each chart shows", "oldest to newest", "is better", "change point", "workload fingerprint"):
        assert sentence in english and sentence not in html, sentence
    assert html.count('class="change-point"') == english.count('class="change-point"') == 1
    url = f"sqlite:///{tmp_path / 'trend.sqlite'}"
    assert cli(["history", "trend", "sss", "--history", url, "--lang", "zh", "--reports", str(tmp_path)]) == 0
    out = Path(capsys.readouterr().out.strip())
    assert out.name == "trend-ssssssssssss.zh.html" and "越低越好" in out.read_text()


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_export_round_trips(tmp_path: Path) -> None:
    import pandas as pd

    root = tmp_path / "reports"
    d = _write(root, "c1", "G3", _gate_result("c1", "G3", "2026-01-01T01:00:00Z", 0.3))
    GateDir(d, "G3").mark_step_done("sweep/candidate/c2/rep1", {"summary": {"completed": 4, "output_throughput": 9.5}})
    rec = d / "evidence" / "sweep" / "candidate" / "c2" / "rep1" / "measure" / "records.jsonl"
    rec.parent.mkdir(parents=True)
    rec.write_text(json.dumps({"request_id": "a", "ttft_ms": 12.5, "ok": True}) + "\n")
    tables = campaign_tables(root / "c1")
    assert tables["requests"][0]["ttft_ms"] == 12.5 and tables["repetitions"][0]["output_throughput"] == 9.5
    assert tables["points"][0]["concurrency"] == 2 and tables["checks"][0]["measured"] == 0.3

    files = write_tables(tables, tmp_path / "csv", "csv")
    assert {f.name for f in files} == {"requests.csv", "repetitions.csv", "points.csv", "checks.csv"}
    assert _read(tmp_path / "csv" / "checks.csv")[0]["metric"] == "compare.ttft_p50_reduction.c2"

    (pq,) = [f for f in write_tables(tables, tmp_path / "pq", "parquet") if f.name == "points.parquet"]
    back = pd.read_parquet(pq)
    assert back.loc[0, "ttft_p50_ms"] == 50.0 and back.loc[0, "arm"] == "candidate"

    (xl,) = write_tables(tables, tmp_path / "xl", "xlsx")
    sheets = pd.read_excel(xl, sheet_name=None)
    assert set(sheets) == {"requests", "repetitions", "points", "checks"}
    assert sheets["requests"].loc[0, "ttft_ms"] == 12.5

    db, _series = _history_with_step(tmp_path)
    with db:
        h = history_tables(db)
    assert len(h["runs"]) == 40 and len(h["metrics"]) == 40
    write_tables(h, tmp_path / "h", "parquet")
    m = pd.read_parquet(tmp_path / "h" / "metrics.parquet")
    assert list(m["run"])[:3] == [1, 2, 3]
    assert json.loads(m.loc[0, "samples"]) == pytest.approx(json.loads(h["metrics"][0]["samples"]))


def test_export_without_the_extra_says_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow -> ImportError
    with pytest.raises(MissingExtra, match=r"pip install 'kvgate\[export\]'"):
        write_tables({"t": [{"a": 1}]}, tmp_path, "parquet")
    assert write_tables({"t": [{"a": 1}]}, tmp_path, "csv")[0].read_text() == "a\n1\n"


def test_export_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "reports"
    _write(root, "c1", "G3", _gate_result("c1", "G3", "2026-01-01T01:00:00Z", 0.3))
    assert cli(["export", str(root / "c1"), "--format", "csv", "-o", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "checks.csv").exists()
    assert cli(["export", str(tmp_path / "nope")]) == 2

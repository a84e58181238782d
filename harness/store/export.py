"""Tidy tables for analysts, from a campaign folder or from the history database, written as CSV
(always available), Parquet (pyarrow) or xlsx (openpyxl), the last two through pandas, installed
with the ``export`` extra (``pip install 'kvgate[export]'``).

Tables (one row per ...):

* ``requests``: measured request (the load generator's records.jsonl of every sweep point);
* ``repetitions``: sweep repetition (its summary in ``vllm bench serve`` key names);
* ``points``: arm x concurrency (the report's sweep table);
* ``checks``: check observation (expected, measured, interval, verdict);
* ``nightly_metrics``: metric of a nightly run (median, interval, samples);
* from a history database: ``runs`` and ``metrics`` (run x metric).

Every row of a campaign table carries ``campaign`` and ``gate``. Column order is fixed per table
(the union of keys in first-seen order), so files are stable across runs.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from harness.errors import InputError
from harness.store.campaign import ResultFileError, load_result
from harness.store.durable import iter_jsonl, read_jsonl

__all__ = ["FORMATS", "campaign_tables", "history_tables", "write_tables", "MissingExtra"]

FORMATS = ("csv", "parquet", "xlsx")
Table = list[dict[str, Any]]


class MissingExtra(InputError):
    """The chosen format needs a package that is not installed."""


def _scalar(v: Any) -> Any:
    if isinstance(v, (dict, list, tuple)):
        return json.dumps(v, sort_keys=True, default=str)
    return v


def _gate_dirs(campaign: Path) -> Iterable[tuple[str, Path]]:
    if (campaign / "result.json").is_file():
        yield "nightly", campaign
    for d in sorted(p for p in campaign.iterdir() if p.is_dir()):
        if (d / "result.json").is_file() or (d / "state.jsonl").is_file():
            yield d.name, d


def campaign_tables(campaign: Path) -> dict[str, Table]:
    """The tables of one campaign folder (``reports/<campaign>``)."""
    if not campaign.is_dir():
        raise InputError(f"{campaign} is not a campaign folder")
    name = campaign.name
    t: dict[str, Table] = {k: [] for k in ("requests", "repetitions", "points", "checks", "nightly_metrics")}
    for gate, d in _gate_dirs(campaign):
        base = {"campaign": name, "gate": gate}
        for step in read_jsonl(d / "state.jsonl") if (d / "state.jsonl").is_file() else []:
            key = str(step.get("step", ""))
            data = step.get("data")
            parts = key.split("/")
            if len(parts) == 4 and parts[0] == "sweep" and isinstance(data, Mapping):
                row = {**base, "arm": parts[1], "concurrency": int(parts[2].lstrip("c")),
                       "repetition": int(parts[3].lstrip("rep"))}
                row.update({k: _scalar(v) for k, v in (data.get("summary") or {}).items()})
                t["repetitions"].append(row)
        for rec_path in sorted((d / "evidence" / "sweep").glob("*/c*/rep*/measure/**/records.jsonl")):
            rel = rec_path.relative_to(d / "evidence" / "sweep").parts
            for rec in iter_jsonl(rec_path):
                t["requests"].append({**base, "arm": rel[0], "concurrency": int(rel[1].lstrip("c")),
                                      "repetition": int(rel[2].lstrip("rep")),
                                      **{k: _scalar(v) for k, v in rec.items()}})
        if not (d / "result.json").is_file():
            continue
        try:
            result = load_result(d / "result.json")
        except ResultFileError as exc:
            raise InputError(f"{d / 'result.json'}: {exc}") from None
        for arm, points in (result.measurements.get("sweep") or {}).items():
            for conc, row in sorted(points.items(), key=lambda kv: int(str(kv[0]).lstrip("c"))):
                t["points"].append({**base, "arm": arm, "concurrency": int(str(conc).lstrip("c")),
                                    **{k: _scalar(v) for k, v in row.items()}})
        for check in result.checks:
            for obs in check.observations or []:
                t["checks"].append({**base, "check": check.id, "severity": check.severity, "metric": obs.path,
                                    "expected": obs.expected_text, "measured": obs.measured,
                                    "measured_text": obs.measured_text,
                                    "low": obs.interval.low if obs.interval else None,
                                    "high": obs.interval.high if obs.interval else None,
                                    "n_samples": obs.n_samples, "verdict": obs.verdict.value, "reason": obs.reason})
            if not check.observations:
                t["checks"].append({**base, "check": check.id, "severity": check.severity, "metric": check.metric,
                                    "verdict": check.verdict.value, "reason": check.reason})
        nightly = result.measurements.get("nightly")
        if isinstance(nightly, Mapping):
            for metric, m in sorted((nightly.get("metrics") or {}).items()):
                t["nightly_metrics"].append({**base, "series": nightly.get("series"), "metric": metric,
                                             **{k: _scalar(v) for k, v in m.items()}})
    return t


def history_tables(db: Any) -> dict[str, Table]:
    """``runs`` and ``metrics`` of a history database (``HistoryDB``)."""
    runs = db.runs(with_metrics=True)
    out: dict[str, Table] = {"runs": [], "metrics": []}
    for r in runs:
        out["runs"].append({"run": r.id, "run_key": r.run_key, "series": r.series, "kind": r.kind,
                            "campaign": r.campaign, "started_at": r.started_at, "finished_at": r.finished_at,
                            "profile": r.profile, "kvgate_version": r.kvgate_version, "git_commit": r.git_commit,
                            "verdict": r.verdict, "exit_code": r.exit_code, "emulated": r.emulated,
                            "nodes": _scalar(r.nodes), "versions": _scalar(r.versions)})
        for m in r.metrics:
            out["metrics"].append({"run": r.id, "series": r.series, "started_at": r.started_at, "metric": m.name,
                                   "unit": m.unit, "better": m.better, "n": m.n, "median": m.median, "low": m.low,
                                   "high": m.high, "samples": _scalar(m.samples)})
    return out


def _columns(rows: Table) -> list[str]:
    cols: dict[str, None] = {}
    for r in rows:
        for k in r:
            cols.setdefault(k, None)
    return list(cols)


def _pandas(fmt: str) -> Any:
    need = {"parquet": "pyarrow", "xlsx": "openpyxl"}[fmt]
    try:
        import pandas as pd

        __import__(need)
    except ImportError as exc:
        raise MissingExtra(f"--format {fmt} needs pandas and {need}, which are not installed ({exc.name} is "
                           "missing); install them with: pip install 'kvgate[export]' (csv needs nothing)") from None
    return pd


def write_tables(tables: Mapping[str, Table], out_dir: Path, fmt: str) -> list[Path]:
    """Write each non-empty table; returns the files written."""
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    pd: Any = _pandas(fmt) if fmt != "csv" else None
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    if fmt == "xlsx":
        path = out_dir / "export.xlsx"
        with pd.ExcelWriter(path, engine="openpyxl") as xw:
            for name, rows in tables.items():
                if rows:
                    pd.DataFrame(rows, columns=_columns(rows)).to_excel(xw, sheet_name=name[:31], index=False)
        return [path]
    for name, rows in tables.items():
        if not rows:
            continue
        cols = _columns(rows)
        path = out_dir / f"{name}.{fmt}"
        if fmt == "csv":
            with path.open("w", newline="", encoding="utf-8") as fh:
                w = csv.DictWriter(fh, fieldnames=cols)
                w.writeheader()
                for r in rows:
                    w.writerow(r)
        else:
            pd.DataFrame(rows, columns=cols).to_parquet(path, index=False)
        written.append(path)
    return written

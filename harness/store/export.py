"""Tidy tables for analysts, from a campaign folder or from the history database, written as CSV
(always available), Parquet (pyarrow) or xlsx (openpyxl), the last two through pandas, installed
with the ``export`` extra (``pip install 'kvgate[export]'``).

Tables (one row per ...):

* ``requests``: measured request (the load generator's records.jsonl of every sweep point);
* ``repetitions``: sweep repetition (its summary in ``vllm bench serve`` key names);
* ``points``: arm x concurrency (the report's sweep table);
* ``checks``: check observation (expected, measured, interval, verdict);
* ``nightly_metrics``: metric of a nightly run (median, interval, samples);
* ``soak_windows``: window of a G4 soak (its time, length, requests, failures, TTFT, throughput);
* ``faults``: fault a gate recorded (``source`` gate: its infrastructure faults; soak: a fault
  on the soak's time axis, with its time, kind and evidence);
* from a history database: ``runs`` and ``metrics`` (run x metric).

Every row of a campaign table carries ``campaign`` and ``gate``. Column order is fixed per table
(the union of keys in first-seen order), so files are stable across runs.

A campaign may have been received from someone else, so the export is safe for spreadsheets and
file systems: a text cell (or column name) starting with ``= + - @``, a tab or a carriage return
is written with a leading ``'`` in CSV and xlsx, so no spreadsheet runs it as a formula; each output
is written to a temporary file in the output folder and renamed over its name (a symbolic link
planted there is replaced, never written through), with the permissions the user's umask gives a
new file (not the temporary file's 0600); input files are read only when they are
regular files (not links, FIFOs or devices) within a size limit.
"""

from __future__ import annotations

import csv
import json
import os
import stat
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from harness.deletion import remove_file
from harness.errors import InputError
from harness.store.campaign import ResultFileError, load_result
from harness.store.durable import iter_jsonl, read_jsonl

__all__ = ["FORMATS", "campaign_tables", "history_tables", "write_tables", "MissingExtra"]

FORMATS = ("csv", "parquet", "xlsx")
Table = list[dict[str, Any]]


class MissingExtra(InputError):
    """The chosen format needs a package that is not installed."""


# Input size limits: records of one repetition can be large; a state or result file cannot.
MAX_RECORDS_BYTES = 1 << 30
MAX_SMALL_BYTES = 64 << 20
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def neutralise(v: Any) -> Any:
    """A cell a spreadsheet shows as text: strings starting with a formula character get a ``'``."""
    if isinstance(v, str) and v.startswith(_FORMULA_START):
        return "'" + v
    return v


def _checked(path: Path, limit: int) -> Path:
    """``path`` when it is a regular file (not a link, FIFO or device) of at most ``limit`` bytes."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return path  # the readers treat a missing file as empty or report it
    if not stat.S_ISREG(st.st_mode):
        raise InputError(f"{path}: not a regular file (a link, FIFO or device is not read)")
    if st.st_size > limit:
        raise InputError(f"{path}: {st.st_size} bytes, over the {limit} byte limit for an exported file")
    return path


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
    t: dict[str, Table] = {k: [] for k in ("requests", "repetitions", "points", "checks", "nightly_metrics",
                                           "soak_windows", "faults")}
    for gate, d in _gate_dirs(campaign):
        base = {"campaign": name, "gate": gate}
        state = d / "state.jsonl"
        for step in read_jsonl(_checked(state, MAX_SMALL_BYTES)) if state.is_file() else []:
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
            for rec in iter_jsonl(_checked(rec_path, MAX_RECORDS_BYTES)):
                t["requests"].append({**base, "arm": rel[0], "concurrency": int(rel[1].lstrip("c")),
                                      "repetition": int(rel[2].lstrip("rep")),
                                      **{k: _scalar(v) for k, v in rec.items()}})
        if not (d / "result.json").is_file():
            continue
        try:
            result = load_result(_checked(d / "result.json", MAX_SMALL_BYTES))
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
        _soak_and_faults(t, base, result)
        nightly = result.measurements.get("nightly")
        if isinstance(nightly, Mapping):
            for metric, m in sorted((nightly.get("metrics") or {}).items()):
                t["nightly_metrics"].append({**base, "series": nightly.get("series"), "metric": metric,
                                             **{k: _scalar(v) for k, v in m.items()}})
    return t


def _soak_and_faults(t: dict[str, Table], base: dict[str, Any], result: Any) -> None:
    """A gate's soak windows and every fault it recorded (the gate's and the soak's)."""
    t["faults"] += [{**base, "source": "gate", "t_s": None, "kind": None, "what": f, "evidence": None}
                    for f in result.faults]
    soak = result.measurements.get("soak")
    if not isinstance(soak, Mapping):
        return
    for w in soak.get("windows") or []:
        if isinstance(w, Mapping):
            t["soak_windows"].append({**base, **{k: _scalar(v) for k, v in w.items()}})
    for f in soak.get("faults") or []:
        if isinstance(f, Mapping):
            t["faults"].append({**base, "source": "soak", "t_s": f.get("t_s"), "kind": f.get("kind"),
                                "what": _scalar(f.get("what")), "evidence": _scalar(f.get("evidence"))})


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
    """Write each non-empty table; returns the files written (see the module docstring)."""
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    pd: Any = _pandas(fmt) if fmt != "csv" else None
    _output_dir(out_dir)
    if fmt == "xlsx":
        def xlsx(tmp: Path) -> None:
            with pd.ExcelWriter(tmp, engine="openpyxl") as xw:
                for name, rows in tables.items():
                    if rows:
                        cols = _columns(rows)
                        frame = pd.DataFrame([[neutralise(r.get(c)) for c in cols] for r in rows],
                                             columns=[neutralise(c) for c in cols])
                        frame.to_excel(xw, sheet_name=name[:31], index=False)
        return [_replace(out_dir / "export.xlsx", xlsx)]
    written: list[Path] = []
    for name, rows in tables.items():
        if not rows:
            continue
        cols = _columns(rows)
        if fmt == "csv":
            written.append(_replace(out_dir / f"{name}.csv", lambda tmp, rows=rows, cols=cols: _csv(tmp, rows, cols)))
        else:
            written.append(_replace(out_dir / f"{name}.{fmt}", lambda tmp, rows=rows, cols=cols:
                                    pd.DataFrame(rows, columns=cols).to_parquet(tmp, index=False)))
    return written


def _output_dir(out_dir: Path) -> None:
    """``-o``: an existing directory (not a symlink) or a new one; anything else is refused."""
    try:
        mode = os.lstat(out_dir).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise InputError(f"-o {out_dir}: {exc.strerror}") from None
    if mode is not None and not stat.S_ISDIR(mode):
        kind = "a symbolic link" if stat.S_ISLNK(mode) else "a FIFO" if stat.S_ISFIFO(mode) else \
            "a file" if stat.S_ISREG(mode) else "not a directory"
        raise InputError(f"-o {out_dir}: exists and is {kind}; give a directory (new or existing)")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"-o {out_dir}: cannot create the directory: {exc.strerror}") from None


def _csv(tmp: Path, rows: Table, cols: list[str]) -> None:
    with tmp.open("w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow([neutralise(c) for c in cols])
        for r in rows:
            w.writerow([neutralise(r.get(c)) for c in cols])


def _umask() -> int:
    """The process's umask (read by setting it and setting it back)."""
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def _replace(path: Path, write: Any) -> Path:
    """Write ``path`` through a new temporary file in its folder, then rename it over ``path``."""
    fd, name = tempfile.mkstemp(prefix=".kvgate-export-", suffix=path.suffix, dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~_umask())  # what the user's umask gives a new file, as cp or a shell would
        os.replace(tmp, path)
    except BaseException:
        remove_file(tmp, within=path.parent, marker=".kvgate-export-")
        raise
    return path

"""From result files to history runs: the series key (workload fingerprint), the metrics a run
contributes, and ``kvgate history import`` over a reports directory.

* Series key: :func:`series_key` is the ONE place that decides it: the result's
  ``fingerprint.digest`` (``harness.gates.fingerprint``, written by G2/G3 and the nightly). Result
  files written before the fingerprint existed have only the profile summary: their key is a digest
  of its workload fields (:data:`WORKLOAD_FIELDS`), so they form series of their own and are never
  mixed with fingerprinted runs.
* Metrics of a gate run: one per observation of every check that measured a number (path, median =
  the measured value, interval when the check had one). Metrics of a nightly run: the
  ``measurements.nightly.metrics`` table it wrote, with the samples.
* Run key: ``<campaign>/<gate>/<started_at>``, so importing the same reports again, or a nightly
  that already recorded itself, adds nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from harness.errors import InputError
from harness.store.campaign import ResultFileError, load_result
from harness.store.historydb import HistoryDB, MetricRecord, RunRecord
from harness.store.schema import GateResult

__all__ = ["ImportReport", "WORKLOAD_FIELDS", "import_reports", "record_from_result", "series_key",
           "workload_digest"]

# The profile summary fields (``GateResult.profile``) that define "the same workload".
WORKLOAD_FIELDS = ("name", "model", "tensor_parallel_size", "instances_per_node", "kv_bytes_per_token", "engine",
                   "arms", "baseline", "candidate", "recompute", "load")
NIGHTLY_GATE = "nightly"


def workload_digest(profile_summary: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """sha256 of the canonical JSON of the workload fields, and those fields."""
    fields = {k: profile_summary.get(k) for k in WORKLOAD_FIELDS}
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest(), fields


def series_key(result: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The series a result belongs to: (digest, fingerprint fields). See the module docstring."""
    fp = result.get("fingerprint")
    if isinstance(fp, Mapping) and isinstance(fp.get("digest"), str) and fp["digest"]:
        return str(fp["digest"]), dict(fp.get("fields") or {})
    measurements = result.get("measurements") or {}
    nightly = measurements.get("nightly") if isinstance(measurements, Mapping) else None
    if isinstance(nightly, Mapping) and isinstance(nightly.get("series"), str):
        return str(nightly["series"]), dict(nightly.get("fingerprint") or {})
    return workload_digest(result.get("profile") or {})


def _nodes_and_versions(result: GateResult) -> tuple[list[str], dict[str, dict[str, str]]]:
    nodes: list[str] = []
    versions: dict[str, dict[str, str]] = {}
    for node in (result.inventory.get("nodes") or []):
        name = str(node.get("name", ""))
        nodes.append(name)
        if node.get("versions"):
            versions[name] = {str(k): str(v) for k, v in node["versions"].items()}
    engine = result.profile.get("engine_version")
    if engine:
        for name in nodes:
            versions.setdefault(name, {})["engine"] = str(engine)
    return nodes, versions


def _check_metrics(result: GateResult) -> list[MetricRecord]:
    out: dict[str, MetricRecord] = {}
    for check in result.checks:
        better = "lower" if check.comparator in ("<=", "<", "lt", "le") else "higher"
        for obs in check.observations:
            if obs.measured is None or obs.path in out:
                continue
            out[obs.path] = MetricRecord(
                name=obs.path, median=float(obs.measured), unit=check.unit_kind, better=better,
                n=int(obs.n_samples or 1), low=obs.interval.low if obs.interval else None,
                high=obs.interval.high if obs.interval else None)
    return list(out.values())


def _nightly_metrics(nightly: Mapping[str, Any]) -> list[MetricRecord]:
    out = []
    for name, m in sorted((nightly.get("metrics") or {}).items()):
        out.append(MetricRecord(name=name, median=m.get("median"), unit=str(m.get("unit", "")),
                                better=str(m.get("better", "higher")), n=int(m.get("n") or 0), low=m.get("low"),
                                high=m.get("high"), samples=[float(x) for x in m.get("samples") or []]))
    return out


def record_from_result(result: GateResult, *, source: str = "") -> RunRecord:
    """The history run of one gate or nightly result."""
    data = result.model_dump(mode="json")
    digest, fields = series_key(data)
    nightly = result.measurements.get("nightly")
    nodes, versions = _nodes_and_versions(result)
    metrics = _nightly_metrics(nightly) if isinstance(nightly, Mapping) else _check_metrics(result)
    kind = NIGHTLY_GATE if isinstance(nightly, Mapping) else result.gate
    return RunRecord(
        run_key=f"{result.campaign}/{kind}/{result.started_at}", series=digest, kind=kind, started_at=result.started_at,
        campaign=result.campaign, finished_at=result.finished_at, profile=str(result.profile.get("name", "")),
        kvgate_version=result.kvgate_version, git_commit=result.git_commit, verdict=result.verdict.value,
        exit_code=result.exit_code, emulated=result.emulated, nodes=nodes, versions=versions, fingerprint=fields,
        source=source, metrics=metrics)


@dataclass
class ImportReport:
    added: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "path: why"


def _result_files(root: Path) -> Iterator[Path]:
    for campaign in sorted(p for p in root.iterdir() if p.is_dir()):
        direct = campaign / "result.json"  # a nightly folder holds its result directly
        if direct.is_file():
            yield direct
        for gate in sorted(p for p in campaign.iterdir() if p.is_dir()):
            if (gate / "result.json").is_file():
                yield gate / "result.json"


def import_reports(db: HistoryDB, root: Path, *, gates: tuple[str, ...] = ("G2", "G3", "G4", NIGHTLY_GATE),
                   ) -> ImportReport:
    """Load every G2/G3/G4 and nightly result under ``root`` (idempotent; see the module docstring).
    G1 (facts and fio arrival checks) is not a performance series and is left out."""
    if not root.is_dir():
        raise InputError(f"{root} is not a directory of campaigns")
    rep = ImportReport()
    for path in _result_files(root):
        try:
            result = load_result(path)
        except (ResultFileError, InputError) as exc:
            rep.skipped.append(f"{path}: {exc}")
            continue
        rec = record_from_result(result, source=str(path))
        if rec.kind not in gates:
            continue
        if not rec.metrics:
            rep.skipped.append(f"{path}: no measured metric")
            continue
        _id, created = db.add_run(rec)
        (rep.added if created else rep.already).append(rec.run_key)
    return rep


def load_optional(path: Path) -> Optional[GateResult]:
    try:
        return load_result(path)
    except (ResultFileError, InputError):
        return None

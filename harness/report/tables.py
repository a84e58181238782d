"""Measurements as tables a reader reads, not JSON paths: one row per arm and concurrency (TTFT,
throughput, offload hit share, restored KV, failures, with units), the storage probes, and the
evidence appendix (every file under ``evidence/`` with its size and sha256, the manifest in a form
a person reads, so the document names what it rests on).

Everything is read from ``result.json`` (``measurements.sweep``, ``tier_hits``, ``expected``,
``checkpoint``, ``modelload``) and, for links and the appendix, from the gate directory by lstat
and regular-file reads only (``harness.report.manifest``), never following a link.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional
from urllib.parse import quote

from harness.report.evidence import EVIDENCE
from harness.report.i18n import N_
from harness.report.manifest import ManifestError, scan, sha256_file
from harness.report.textutil import concurrency_of
from harness.units import UnitKind, format_quantity


@dataclass
class Link:
    text: str
    href: str


@dataclass
class PointRow:
    """One arm at one concurrency."""

    arm: str
    concurrency: str
    ttft_p50: str
    ttft_p90: str
    ttft_p99: str
    throughput: str
    requests: str
    offload_share: str
    restored: str
    completed: str
    failed: str
    repetitions: str
    evidence: list[Link] = field(default_factory=list)
    failed_any: bool = False


def _num(v: Any) -> Optional[float]:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _ms(v: Any) -> str:
    x = _num(v)
    return "-" if x is None else (f"{x:,.0f}" if x >= 100 else f"{x:.1f}")


def _rate(v: Any) -> str:
    x = _num(v)
    return "-" if x is None else (f"{x:,.0f}" if x >= 100 else f"{x:.3g}")


def _int(v: Any) -> str:
    x = _num(v)
    return "-" if x is None else f"{int(x):,}"


def _tier_points(measurements: Mapping[str, Any], arm: str) -> dict[int, list[Mapping[str, Any]]]:
    """``tier_hits[arm]`` rows (``point: "c8 rep2"``) by concurrency."""
    rows = (measurements.get("tier_hits") or {}).get(arm) if isinstance(measurements.get("tier_hits"),
                                                                        Mapping) else None
    out: dict[int, list[Mapping[str, Any]]] = {}
    for row in rows or []:
        if isinstance(row, Mapping):
            c = concurrency_of(str(row.get("point", "")).split(" ")[0])
            if c is not None:
                out.setdefault(c, []).append(row)
    return out


def _offload(rows: Sequence[Mapping[str, Any]], kv_per_token: Optional[float]) -> tuple[str, str]:
    """Mean offload hit share over the repetitions, and the KV bytes restored from the offload
    tiers per repetition (hit tokens x the model's KV bytes per token)."""
    shares, tokens = [], []
    for row in rows:
        rates = row.get("rates") if isinstance(row.get("rates"), Mapping) else {}
        share, queried = _num((rates or {}).get("offload")), _num(row.get("queried"))
        if share is not None:
            shares.append(share)
            if queried is not None:
                tokens.append(share * queried)
    share_text = f"{statistics.fmean(shares) * 100:.1f}%" if shares else "-"
    restored = "-"
    if tokens and kv_per_token:
        restored = format_quantity(statistics.fmean(tokens) * kv_per_token, UnitKind.BYTES)
    return share_text, restored


def _evidence(gate_dir: Optional[Path], arm: str, conc: int) -> list[Link]:
    """Links to each repetition's measured summary of this point, when the files are there."""
    if gate_dir is None:
        return []
    base = Path(gate_dir) / EVIDENCE / "sweep" / arm / f"c{conc}"
    try:
        reps = sorted((p.name for p in base.iterdir() if p.name.startswith("rep") and not p.is_symlink()),
                      key=lambda n: (len(n), n))
    except OSError:
        return []
    out = []
    for rep in reps:
        rel = f"{EVIDENCE}/sweep/{arm}/c{conc}/{rep}/measure/summary.json"
        f = Path(gate_dir) / rel
        if f.is_file() and not f.is_symlink():
            out.append(Link(rep, rel))
    return out


def point_rows(measurements: Mapping[str, Any], gate_dir: Optional[Path] = None) -> list[PointRow]:
    """Per arm x concurrency rows from ``measurements.sweep`` (and ``tier_hits`` / ``expected``)."""
    sweep = measurements.get("sweep")
    if not isinstance(sweep, Mapping):
        return []
    expected = measurements.get("expected") if isinstance(measurements.get("expected"), Mapping) else {}
    kv_per_token = _num((expected or {}).get("kv_per_token"))
    rows: list[PointRow] = []
    for arm, points in sweep.items():
        if not isinstance(points, Mapping):
            continue
        tiers = _tier_points(measurements, str(arm))
        for key, v in sorted(points.items(), key=lambda kv: (concurrency_of(kv[0]) or 0, str(kv[0]))):
            if not isinstance(v, Mapping):
                continue
            conc = concurrency_of(key)
            share, restored = _offload(tiers.get(conc, []) if conc is not None else [], kv_per_token)
            failed = _num(v.get("failed"))
            rows.append(PointRow(
                arm=str(arm), concurrency=str(conc if conc is not None else key),
                ttft_p50=_ms(v.get("ttft_p50_ms")), ttft_p90=_ms(v.get("ttft_p90_ms")),
                ttft_p99=_ms(v.get("ttft_p99_ms")), throughput=_rate(v.get("output_throughput")),
                requests=_rate(v.get("request_throughput")), offload_share=share, restored=restored,
                completed=_int(v.get("completed")), failed=_int(v.get("failed")),
                repetitions=_int(v.get("repetitions")),
                evidence=_evidence(gate_dir, str(arm), conc) if conc is not None else [],
                failed_any=bool(failed)))
    return rows


@dataclass
class ProbeRow:
    probe: str
    where: str
    size: str
    seconds: str
    bandwidth: str


_PROBES = (("checkpoint", N_("checkpoint write"), "write_bw"), ("modelload", N_("model load"), "read_bw"))


def probe_rows(measurements: Mapping[str, Any]) -> list[ProbeRow]:
    """The checkpoint-write and model-load probes, one row per arm or node."""
    rows: list[ProbeRow] = []
    for key, label, bw in _PROBES:
        section = measurements.get(key)
        if not isinstance(section, Mapping):
            continue
        for where, v in section.items():
            if not isinstance(v, Mapping):
                continue
            b, s, r = _num(v.get("bytes")), _num(v.get("seconds")), _num(v.get(bw))
            rows.append(ProbeRow(label, str(where), "-" if b is None else format_quantity(b, UnitKind.BYTES),
                                 "-" if s is None else f"{s:.2f} s",
                                 "-" if r is None else format_quantity(r, UnitKind.BANDWIDTH)))
    return rows


PROBE_KEYS = tuple(k for k, _, _ in _PROBES)


@dataclass
class EvidenceFile:
    path: str
    size: str
    sha256: str
    href: str
    nbytes: int = 0
    count: int = 1  # a printed row for a folder of many files (``printed_evidence``) counts them


def evidence_files(gate_dir: Optional[Path]) -> tuple[list[EvidenceFile], list[str]]:
    """Every regular file under ``gate_dir/evidence`` with its size and sha256, sorted by path, and
    the entries that could not be listed or read (named, never followed)."""
    if gate_dir is None:
        return [], []
    base = Path(gate_dir) / EVIDENCE
    if not base.is_dir() or base.is_symlink():
        return [], []
    try:
        tree = scan(base)
    except ManifestError as exc:
        return [], [str(exc)]
    files, problems = [], list(tree.refused)
    for rel in tree.files:
        path = base / rel
        try:
            digest, size = sha256_file(path), path.lstat().st_size
        except (OSError, ManifestError) as exc:
            problems.append(f"{EVIDENCE}/{rel}: {exc}")
            continue
        files.append(EvidenceFile(f"{EVIDENCE}/{rel}", format_quantity(float(size), UnitKind.BYTES), digest,
                                  quote(f"{EVIDENCE}/{rel}", safe="/._-~"), size))
    return files, problems


FOLDER_ROWS = 24  # a folder with more files than this prints as one row (a soak's per-window records)


def printed_evidence(files: Sequence[EvidenceFile], most: int = FOLDER_ROWS) -> list[EvidenceFile]:
    """The appendix as printed: every file, except that a folder holding more than ``most`` files
    directly is one row (its path with a trailing ``/``, the number of files and their total
    size; each file's sha256 is in ``MANIFEST.sha256`` and in the HTML's full list), so a 72-hour
    soak's 864 window files do not print 15 pages of digests."""
    by_dir: dict[str, list[EvidenceFile]] = {}
    for f in files:
        by_dir.setdefault(f.path.rsplit("/", 1)[0] + "/", []).append(f)
    out: list[EvidenceFile] = []
    done: set[str] = set()
    for f in files:
        folder = f.path.rsplit("/", 1)[0] + "/"
        group = by_dir[folder]
        if len(group) <= most:
            out.append(f)
        elif folder not in done:
            done.add(folder)
            total = sum(g.nbytes for g in group)
            out.append(EvidenceFile(folder, format_quantity(float(total), UnitKind.BYTES), "",
                                    quote(folder, safe="/._-~"), total, len(group)))
    return out


@dataclass
class TierPoint:
    """The per-tier hit shares of one arm at one concurrency, means over its repetitions."""

    arm: str
    concurrency: str
    repetitions: int
    queried: str
    rates: dict[str, str]


TIER_KEYS = ("hbm", "local_cpu", "local_disk", "remote", "offload", "total")


def tier_point_rows(measurements: Mapping[str, Any]) -> list[TierPoint]:
    """``measurements.tier_hits`` (a row per repetition) as a row per arm x concurrency: the
    printed table (the HTML keeps every repetition)."""
    tiers = measurements.get("tier_hits")
    out: list[TierPoint] = []
    if not isinstance(tiers, Mapping):
        return out
    for arm in tiers:
        for conc, rows in sorted(_tier_points(measurements, str(arm)).items()):
            queried = [q for q in (_num(r.get("queried")) for r in rows) if q is not None]
            rates: dict[str, str] = {}
            for key in TIER_KEYS:
                vals = [v for v in (_num((r.get("rates") or {}).get(key)) for r in rows) if v is not None]
                rates[key] = f"{statistics.fmean(vals) * 100:.1f}%" if vals else "-"
            out.append(TierPoint(str(arm), str(conc), len(rows),
                                 f"{statistics.fmean(queried):,.0f}" if queried else "-", rates))
    return out

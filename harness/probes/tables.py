"""The on-screen tables of ``kvgate probe`` (one row per node, target and job set) and the reading of
saved fio output (``kvgate probe fio --parse``)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Optional

from harness.probes.checkpoint import CheckpointResult
from harness.probes.fio_parse import (
    DIRECTIONS,
    FioOutput,
    GroupSummary,
    parse_fio_file,
    summarise_cluster,
    summarise_per_node,
)
from harness.probes.fio_run import FioProbeResult
from harness.probes.modelload import ModelLoadResult
from harness.probes.steady import SteadyState

FIO_HEADERS = (
    "node",
    "target",
    "job set",
    "read GB/s",
    "write GB/s",
    "read IOPS",
    "write IOPS",
    "p99 clat ms",
    "steady",
    "errors",
)
PARSE_HEADERS = (
    "file",
    "host",
    "group",
    "read GB/s",
    "write GB/s",
    "read IOPS",
    "write IOPS",
    "p99 clat ms",
    "errors",
)


def _gb(v: Optional[float]) -> str:
    return "-" if v is None else f"{v / 1e9:.3f}"


def _iops(v: Optional[float]) -> str:
    return "-" if v is None else f"{v:,.0f}"


def _ms(v: Optional[float]) -> str:
    return "-" if v is None else f"{v / 1e6:.3f}"


def fio_rows(results: Sequence[FioProbeResult]) -> list[list[object]]:
    rows: list[list[object]] = []
    for r in results:
        for name, js in r.job_sets.items():
            p99 = None
            for d in (js.read, js.write):
                if d is not None and d.percentiles_ns.get(99.0) is not None:
                    p99 = max(p99 or 0.0, d.percentiles_ns[99.0])
            steady = "-" if js.steady_state is None else ("yes" if js.steady_state.steady else "no")
            rows.append(
                [
                    r.node,
                    r.target,
                    name,
                    _gb(js.read_bw_bytes),
                    _gb(js.write_bw_bytes),
                    _iops(js.read_iops),
                    _iops(js.write_iops),
                    _ms(p99),
                    steady,
                    js.errors,
                ]
            )
    return rows


def fio_cluster_rows(results: Sequence[FioProbeResult]) -> list[list[object]]:
    """Each host's figures, then the sum over hosts (the cluster's aggregate) per job set."""
    rows: list[list[object]] = []
    for r in results:
        for host, sets in r.per_host.items():
            per = FioProbeResult(
                node=host,
                target="",
                engine=r.engine,
                fio_version=r.fio_version,
                job_sets=sets,
                raw_output=r.raw_output,
                jobfile=r.jobfile,
                command=r.command,
            )
            rows.extend(fio_rows([per]))
        total = FioProbeResult(
            node=f"sum of {len(r.per_host)} hosts",
            target=r.target,
            engine=r.engine,
            fio_version=r.fio_version,
            job_sets=r.job_sets,
            raw_output=r.raw_output,
            jobfile=r.jobfile,
            command=r.command,
        )
        rows.extend(fio_rows([total]))
    return rows


def checkpoint_rows(results: Sequence[CheckpointResult]) -> tuple[tuple[str, ...], list[list[object]]]:
    headers = (
        "node",
        "target",
        "size GB",
        "files",
        "writers",
        "time s",
        "write GB/s",
        "read-back GB/s",
        "read-back",
        "rounds",
    )
    rows: list[list[object]] = [
        [
            r.node,
            r.target,
            f"{r.total_bytes / 1e9:.3f}",
            r.files,
            r.writers,
            f"{r.total_s:.3f}",
            _gb(r.write_bw_bytes),
            _gb(r.read_back_bw_bytes),
            r.read_back.how if r.read_back else "-",
            _rounds(r.rounds, r.steady),
        ]
        for r in results
    ]
    return headers, rows


def modelload_rows(results: Sequence[ModelLoadResult]) -> tuple[tuple[str, ...], list[list[object]]]:
    headers = ("node", "source", "files", "readers", "size GB", "time s", "read GB/s", "cold read", "rounds")
    rows: list[list[object]] = [
        [
            r.node,
            r.source,
            r.files,
            r.readers,
            f"{r.total_bytes / 1e9:.3f}",
            f"{r.total_s:.3f}",
            _gb(r.read_bw_bytes),
            ("MAY INCLUDE CACHED READS: " if r.may_include_cached else "") + r.how,
            _rounds(r.rounds, r.steady),
        ]
        for r in results
    ]
    return headers, rows


def _rounds(rounds: Sequence[float], steady: Optional[SteadyState]) -> str:
    """How many rounds, and whether the last 5 were steady: the figure is their median."""
    if steady is None:
        return str(len(rounds))
    return f"{len(rounds)}, {'steady' if steady.steady else 'NOT steady'}"


def parse_saved(paths: Sequence[str]) -> list[FioOutput]:
    """Parse saved fio output files; the first bad file stops with its FioParseError."""
    return [parse_fio_file(p) for p in paths]


def _p99(g: GroupSummary) -> Optional[float]:
    p99 = None
    for ddir in DIRECTIONS:
        d = g.direction(ddir)
        if d is not None and d.percentiles_ns.get(99.0) is not None:
            p99 = max(p99 or 0.0, d.percentiles_ns[99.0])
    return p99


def _group_row(file: str, host: str, g: GroupSummary) -> list[object]:
    return [
        file,
        host,
        g.name,
        _gb(g.read.bw_bytes if g.read else None),
        _gb(g.write.bw_bytes if g.write else None),
        _iops(g.read.iops if g.read else None),
        _iops(g.write.iops if g.write else None),
        _ms(_p99(g)),
        g.errors,
    ]


def parsed_rows(outputs: Sequence[FioOutput]) -> list[list[object]]:
    rows: list[list[object]] = []
    for out in outputs:
        name = Path(out.source).name
        per_node = summarise_per_node(out.final)
        for host, groups in per_node.items():
            rows.extend(_group_row(name, host, g) for g in groups)
        if len(per_node) > 1:  # client/server: the sum over hosts is the cluster's aggregate bandwidth
            rows.extend(
                _group_row(name, f"sum of {len(per_node)} hosts", g) for g in summarise_cluster([out.final])
            )
    return rows


def parsed_json(outputs: Sequence[FioOutput]) -> list[dict[str, object]]:
    data: list[dict[str, object]] = []
    for out in outputs:
        doc = out.final
        data.append(
            {
                "file": out.source,
                "fio_version": doc.fio_version,
                "documents": len(out.documents),
                "client_server": doc.client_server,
                "per_node": {h: [g.to_json() for g in gs] for h, gs in summarise_per_node(doc).items()},
                "cluster": [g.to_json() for g in summarise_cluster([doc])],
            }
        )
    return data

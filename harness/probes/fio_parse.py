"""The one parser for fio's JSON and json+ output, fio 2.x to 3.4x.

Differences between versions it absorbs (checked against fio's ``stat.c``/``client.c`` history):

* ``io_bytes`` was KiB until fio 2.21 (commit c12d597a added ``io_kbytes`` and made ``io_bytes``
  bytes): without ``io_kbytes``, ``io_bytes`` is KiB.
* ``bw_bytes`` exists from fio 3.2 (aedd021d); before, only ``bw`` in KiB/s.
* Latencies are ``slat``/``clat``/``lat`` in microseconds before fio 3.0, ``*_ns`` in nanoseconds
  since; percentiles sit under ``clat``/``clat_ns`` (or ``lat_ns`` with ``lat_percentiles``). Old
  versions pad the percentile list with ``"0.00": 0`` entries, which are skipped.
* json+ adds ``bins``: since 3.0 keyed by the bin's latency in ns; 2.x keyed by bin index (with
  ``FIO_IO_U_PLAT_*`` constants), which is not converted (only used for merging, never needed).
* Client/server mode writes ``client_stats`` (each entry has ``hostname`` and ``port``, plus one
  ``"All clients"`` aggregate per group when several clients report) instead of ``jobs``.
  ``global options`` is an object, or since fio 3.39 with several servers a list of objects that
  carry ``hostname``/``port``.
* Non-JSON text may precede the document (``<host>`` lines of client mode, warnings, hostnames);
  ``--status-interval`` writes several documents one after the other (the last is the result).
* ``steadystate`` (fio >= 2.16: criterion, attained, and the window's bw/iops samples in bytes/s);
  ``disk_util`` (per device, per host in client mode).

Every figure is normalised: bandwidth in bytes/s, latency in ns, runtime in ms. A direction that
moved no data is ``None`` (not measured), never a zero bandwidth; a direction that moved data but
reports a zero bandwidth is an error.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

from harness.probes.errors import FioParseError
from harness.probes.steady import SteadyState, check_steady_state

DIRECTIONS: tuple[str, ...] = ("read", "write", "trim")
REPORTED_PERCENTILES: tuple[float, ...] = (50.0, 90.0, 99.0, 99.9, 99.99)
ALL_CLIENTS = "All clients"

_DOC_START = re.compile(r"^[ \t]*\{", re.MULTILINE)
_BARE_NONFINITE = re.compile(r"-?(?:nan|inf)\b")
_NONFINITE_VALUE = re.compile(r"(?<=: )-?(?:nan|inf)\b")
_VERSION = re.compile(r"fio-(\d+)\.(\d+)(?:\.(\d+))?")


# --------------------------------------------------------------------------------------------
# Result model


@dataclass(frozen=True)
class LatencyStats:
    """One latency distribution (``clat``, ``lat`` or ``slat``), in nanoseconds."""

    kind: str
    min_ns: float
    max_ns: float
    mean_ns: float
    stddev_ns: float
    samples: Optional[int]
    percentiles: Mapping[float, float] = field(default_factory=dict)  # percentile -> ns

    def percentile(self, q: float) -> Optional[float]:
        for key, value in self.percentiles.items():
            if abs(key - q) < 1e-9:
                return value
        return None

    @property
    def p50(self) -> Optional[float]:
        return self.percentile(50.0)

    @property
    def p90(self) -> Optional[float]:
        return self.percentile(90.0)

    @property
    def p99(self) -> Optional[float]:
        return self.percentile(99.0)

    @property
    def p99_9(self) -> Optional[float]:
        return self.percentile(99.9)

    @property
    def p99_99(self) -> Optional[float]:
        return self.percentile(99.99)

    def to_json(self) -> dict[str, object]:
        return {
            "kind": self.kind, "min_ns": self.min_ns, "max_ns": self.max_ns, "mean_ns": self.mean_ns,
            "stddev_ns": self.stddev_ns, "samples": self.samples,
            "percentiles_ns": {_pct_label(q): self.percentile(q) for q in REPORTED_PERCENTILES},
        }


@dataclass(frozen=True)
class DirectionStats:
    """What one job did in one direction (read, write or trim)."""

    direction: str
    io_bytes: int
    bw_bytes: float  # bytes per second
    bw_source: str  # "bw_bytes" or "bw (KiB/s)"
    iops: float
    runtime_ms: int
    total_ios: int
    clat: Optional[LatencyStats]
    lat: Optional[LatencyStats]
    slat: Optional[LatencyStats]
    bins_raw: Optional[Mapping[str, Any]] = None  # json+ clat bins as fio wrote them

    @property
    def gb_s(self) -> float:
        """Bandwidth in GB/s, decimal (10**9 bytes per second), as vendors quote it."""
        return self.bw_bytes / 1e9

    @property
    def latency(self) -> Optional[LatencyStats]:
        """The distribution that carries percentiles: completion latency, else total latency."""
        for stats in (self.clat, self.lat):
            if stats is not None and stats.percentiles:
                return stats
        return self.clat or self.lat

    def bins_ns(self) -> Optional[dict[int, int]]:
        """json+ completion-latency histogram as {bin latency in ns: count}; None when absent or in
        fio 2.x's index-keyed form."""
        if not self.bins_raw or "FIO_IO_U_PLAT_BITS" in self.bins_raw:
            return None
        return {int(k): int(v) for k, v in self.bins_raw.items()}


@dataclass(frozen=True)
class SteadyStateInfo:
    """fio's own steady-state section (``ss=`` options), and the SNIA check on its samples."""

    criterion: str
    attained: bool
    duration_s: Optional[float]
    bw_samples: tuple[float, ...]  # bytes/s, one per second of the window
    iops_samples: tuple[float, ...]
    snia: SteadyState


@dataclass(frozen=True)
class JobResult:
    """One entry of ``jobs`` or ``client_stats``."""

    name: str
    groupid: int
    host: str  # "hostname:port" in client/server mode, else the node label given to the parser
    error: int  # errno of the first error, 0 when none
    total_err: Optional[int]
    read: Optional[DirectionStats]
    write: Optional[DirectionStats]
    trim: Optional[DirectionStats]
    options: Mapping[str, str]
    steadystate: Optional[SteadyStateInfo]
    path: str  # JSON path in the document, for messages

    @property
    def error_count(self) -> int:
        if self.total_err is not None:
            return self.total_err
        return 1 if self.error else 0

    def direction(self, name: str) -> Optional[DirectionStats]:
        stats: Optional[DirectionStats] = getattr(self, name)
        return stats


@dataclass(frozen=True)
class DiskUtil:
    name: str
    util_percent: float
    read_ios: int
    write_ios: int
    host: Optional[str]


@dataclass(frozen=True)
class FioDocument:
    """One JSON document of fio output."""

    index: int
    fio_version: Optional[str]
    version: Optional[tuple[int, ...]]
    timestamp: Optional[int]
    client_server: bool
    jobs: tuple[JobResult, ...]  # client mode: the per-host entries
    all_clients: tuple[JobResult, ...]  # fio's own "All clients" aggregates (client mode)
    global_options: Mapping[str, Mapping[str, str]]  # host ("" when one) -> options
    disk_util: tuple[DiskUtil, ...]


@dataclass(frozen=True)
class FioOutput:
    """A parsed fio output file: every document, the last being the final result."""

    source: str
    documents: tuple[FioDocument, ...]
    other_lines: tuple[str, ...]  # non-JSON lines around the documents (warnings, <host> lines)

    @property
    def final(self) -> FioDocument:
        return self.documents[-1]


# --------------------------------------------------------------------------------------------
# Locating and decoding the documents


def parse_fio_file(path: Union[str, Path], *, node: Optional[str] = None) -> FioOutput:
    """Parse a saved fio output file (json or json+, any version)."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise FioParseError(f"cannot read the file: {exc.strerror or exc}", source=str(p)) from None
    return parse_fio_output(data, source=str(p), node=node)


def parse_fio_output(data: Union[bytes, str], *, source: str = "<fio output>",
                     node: Optional[str] = None) -> FioOutput:
    """Parse fio output text. ``node`` labels jobs that carry no hostname (non client mode)."""
    if isinstance(data, bytes):
        text = data.decode("utf-8", errors="surrogateescape")
    else:
        text = data
    if not text.strip():
        raise FioParseError("empty output: no fio JSON document", source=source, offset=0)
    decoder = json.JSONDecoder()
    docs: list[FioDocument] = []
    other: list[str] = []
    pos = 0
    repaired = False
    while True:
        m = _DOC_START.search(text, pos)
        if m is None:
            other.extend(_lines(text[pos:]))
            break
        start = m.end() - 1
        try:
            obj, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError as exc:
            if not repaired and _BARE_NONFINITE.match(text, exc.pos):
                # fio's json.c prints floats with "%f", so a NaN or infinite value comes out as a bare
                # nan/-nan/inf, which is not JSON; spell them the way Python's decoder accepts, once.
                text = _NONFINITE_VALUE.sub(_spell_nonfinite, text)
                repaired = True
                continue
            what = "truncated JSON (the document ends early)" if exc.pos >= len(text.rstrip()) else \
                f"invalid JSON: {exc.msg}"
            raise FioParseError(what, source=source, line=exc.lineno, column=exc.colno,
                                offset=_byte_offset(text, exc.pos)) from None
        other.extend(_lines(text[pos:m.start()]))
        line = text.count("\n", 0, start) + 1
        if not isinstance(obj, dict) or not ({"jobs", "client_stats", "fio version"} & obj.keys()):
            raise FioParseError("a JSON object that is not fio output (no 'fio version', 'jobs' or "
                                "'client_stats' key)", source=source, line=line,
                                offset=_byte_offset(text, start))
        docs.append(_document(obj, len(docs), source, node, line))
        pos = end
    if not docs:
        preview = text.lstrip()[:60].replace("\n", " ")
        if _looks_binary(text[:4096]):
            preview = "binary data"
        raise FioParseError(f"no fio JSON document found (it starts with: {preview!r})", source=source,
                            line=1, offset=0)
    return FioOutput(source=source, documents=tuple(docs), other_lines=tuple(other))


def _spell_nonfinite(m: re.Match[str]) -> str:
    word = m.group(0)
    if word.endswith("nan"):
        return "NaN" if word == "nan" else " NaN"  # same length: error offsets stay right
    return "-Infinity" if word.startswith("-") else "Infinity"


def _looks_binary(head: str) -> bool:
    return any(("\udc80" <= c <= "\udcff") or (c < " " and c not in "\t\r\n") for c in head)


def _lines(chunk: str) -> list[str]:
    return [ln for ln in chunk.splitlines() if ln.strip()]


def _byte_offset(text: str, pos: int) -> int:
    return len(text[:pos].encode("utf-8", errors="surrogateescape"))


# --------------------------------------------------------------------------------------------
# Interpreting one document


class _Ctx:
    def __init__(self, source: str, doc_index: int, doc_line: int) -> None:
        self.source = source
        self.doc_index = doc_index
        self.doc_line = doc_line

    def error(self, path: str, message: str) -> FioParseError:
        return FioParseError(f"document {self.doc_index + 1} (starting at line {self.doc_line}), {path}: "
                             f"{message}", source=self.source, line=self.doc_line)


def _version(text: Optional[str]) -> Optional[tuple[int, ...]]:
    if not text:
        return None
    m = _VERSION.search(text)
    if not m:
        return None
    return tuple(int(g) for g in m.groups() if g is not None)


def _document(obj: Mapping[str, Any], index: int, source: str, node: Optional[str], line: int) -> FioDocument:
    ctx = _Ctx(source, index, line)
    version_text = obj.get("fio version")
    client_server = "client_stats" in obj
    entries = obj.get("client_stats") if client_server else obj.get("jobs")
    key = "client_stats" if client_server else "jobs"
    if not isinstance(entries, list):
        raise ctx.error(key, f"expected a list of jobs, found {type(entries).__name__}")
    jobs: list[JobResult] = []
    aggregates: list[JobResult] = []
    for i, entry in enumerate(entries):
        path = f"{key}[{i}]"
        if not isinstance(entry, dict):
            raise ctx.error(path, f"expected an object, found {type(entry).__name__}")
        job = _job(entry, path, ctx, node)
        (aggregates if job.name == ALL_CLIENTS and client_server else jobs).append(job)
    ts = obj.get("timestamp")
    return FioDocument(
        index=index,
        fio_version=version_text if isinstance(version_text, str) else None,
        version=_version(version_text if isinstance(version_text, str) else None),
        timestamp=int(ts) if isinstance(ts, (int, float)) else None,
        client_server=client_server,
        jobs=tuple(jobs),
        all_clients=tuple(aggregates),
        global_options=_global_options(obj.get("global options"), ctx),
        disk_util=tuple(_disk_util(obj.get("disk_util"), ctx)),
    )


def _host_of(entry: Mapping[str, Any]) -> Optional[str]:
    host = entry.get("hostname")
    if host is None:
        return None
    port = entry.get("port")
    return f"{host}:{port}" if port is not None else str(host)


def _global_options(value: Any, ctx: _Ctx) -> dict[str, dict[str, str]]:
    if value is None:
        return {}
    if isinstance(value, dict):
        return {"": {str(k): str(v) for k, v in value.items()}}
    if isinstance(value, list):  # fio >= 3.39, client mode with several servers
        out: dict[str, dict[str, str]] = {}
        for i, item in enumerate(value):
            if not isinstance(item, dict):
                raise ctx.error(f"global options[{i}]", "expected an object")
            host = _host_of(item) or str(i)
            out[host] = {str(k): str(v) for k, v in item.items() if k not in ("hostname", "port")}
        return out
    raise ctx.error("global options", f"expected an object or a list, found {type(value).__name__}")


def _disk_util(value: Any, ctx: _Ctx) -> list[DiskUtil]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ctx.error("disk_util", f"expected a list, found {type(value).__name__}")
    out = []
    for i, d in enumerate(value):
        if not isinstance(d, dict) or "name" not in d:
            raise ctx.error(f"disk_util[{i}]", "expected an object with 'name'")
        out.append(DiskUtil(name=str(d["name"]), util_percent=float(d.get("util", 0.0)),
                            read_ios=int(d.get("read_ios", 0)), write_ios=int(d.get("write_ios", 0)),
                            host=_host_of(d)))
    return out


def _num(d: Mapping[str, Any], key: str, path: str, ctx: _Ctx) -> float:
    if key not in d:
        raise ctx.error(path, f"missing key {key!r}")
    value = d[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ctx.error(f"{path}.{key}", f"expected a number, found {value!r}")
    return float(value)


def _job(entry: Mapping[str, Any], path: str, ctx: _Ctx, node: Optional[str]) -> JobResult:
    name = str(entry.get("jobname", ""))
    label = f"{path} ({name!r})"
    directions: dict[str, Optional[DirectionStats]] = {}
    for ddir in DIRECTIONS:
        raw = entry.get(ddir)
        if raw is None:
            directions[ddir] = None
            continue
        if not isinstance(raw, dict):
            raise ctx.error(f"{label}.{ddir}", "expected an object")
        directions[ddir] = _direction(raw, ddir, f"{label}.{ddir}", ctx)
    options = entry.get("job options") or {}
    total_err = entry.get("total_err")
    return JobResult(
        name=name,
        groupid=int(entry.get("groupid", 0)),
        host=_host_of(entry) or node or "local",
        error=int(entry.get("error", 0)),
        total_err=int(total_err) if isinstance(total_err, (int, float)) else None,
        read=directions["read"],
        write=directions["write"],
        trim=directions["trim"],
        options={str(k): str(v) for k, v in options.items()} if isinstance(options, dict) else {},
        steadystate=_steadystate(entry.get("steadystate"), f"{label}.steadystate", ctx),
        path=label,
    )


def _direction(d: Mapping[str, Any], ddir: str, path: str, ctx: _Ctx) -> Optional[DirectionStats]:
    io_raw = _num(d, "io_bytes", path, ctx)
    # Before fio 2.21 'io_bytes' held KiB; the fix added 'io_kbytes' alongside the byte count.
    io_bytes = int(io_raw) if "io_kbytes" in d else int(io_raw) * 1024
    total_ios = int(d.get("total_ios", 0) or 0)
    if io_bytes == 0 and total_ios == 0:
        return None  # nothing moved in this direction: not measured, not "0 bytes/s"
    if "bw_bytes" in d:
        bw = _num(d, "bw_bytes", path, ctx)
        source = "bw_bytes"
    else:
        bw = _num(d, "bw", path, ctx) * 1024.0
        source = "bw (KiB/s)"
    if not math.isfinite(bw) or bw <= 0:
        raise ctx.error(path, f"{io_bytes} bytes were transferred but fio reports a bandwidth of {bw:g}; "
                              "refusing to record a zero bandwidth")
    clat = _latency(d, "clat", path, ctx)
    lat = _latency(d, "lat", path, ctx)
    slat = _latency(d, "slat", path, ctx)
    bins = None
    for key in ("clat_ns", "clat", "lat_ns"):
        sub = d.get(key)
        if isinstance(sub, dict) and isinstance(sub.get("bins"), dict):
            bins = sub["bins"]
            break
    return DirectionStats(
        direction=ddir, io_bytes=io_bytes, bw_bytes=bw, bw_source=source,
        iops=_num(d, "iops", path, ctx), runtime_ms=int(_num(d, "runtime", path, ctx)),
        total_ios=total_ios, clat=clat, lat=lat, slat=slat, bins_raw=bins,
    )


def _latency(d: Mapping[str, Any], kind: str, path: str, ctx: _Ctx) -> Optional[LatencyStats]:
    if isinstance(d.get(f"{kind}_ns"), dict):
        raw, scale, key = d[f"{kind}_ns"], 1.0, f"{kind}_ns"
    elif isinstance(d.get(kind), dict):
        raw, scale, key = d[kind], 1000.0, kind  # fio < 3.0: microseconds
    else:
        return None
    samples = raw.get("N")
    if samples == 0:
        return None
    where = f"{path}.{key}"
    pct: dict[float, float] = {}
    table = raw.get("percentile")
    if isinstance(table, dict):
        for q_text, value in table.items():
            try:
                q = float(q_text)
            except ValueError:
                raise ctx.error(f"{where}.percentile", f"percentile key {q_text!r} is not a number") from None
            if q <= 0:  # fio < 3 pads unused slots with "0.00": 0
                continue
            pct[q] = float(value) * scale
    return LatencyStats(
        kind=kind,
        min_ns=_num(raw, "min", where, ctx) * scale,
        max_ns=_num(raw, "max", where, ctx) * scale,
        mean_ns=_num(raw, "mean", where, ctx) * scale,
        stddev_ns=_num(raw, "stddev", where, ctx) * scale,
        samples=int(samples) if isinstance(samples, (int, float)) else None,
        percentiles=pct,
    )


def _steadystate(raw: Any, path: str, ctx: _Ctx) -> Optional[SteadyStateInfo]:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise ctx.error(path, "expected an object")
    data = raw.get("data") or {}
    bw = tuple(float(x) for x in data.get("bw", []) or [])
    iops = tuple(float(x) for x in data.get("iops", []) or [])
    duration = raw.get("duration")
    return SteadyStateInfo(
        criterion=str(raw.get("ss", "")),
        attained=bool(raw.get("attained", 0)),
        duration_s=float(duration) if isinstance(duration, (int, float)) else None,
        bw_samples=bw,
        iops_samples=iops,
        snia=check_steady_state(bw, source="fio steadystate data (bytes/s per second)"),
    )


# --------------------------------------------------------------------------------------------
# Aggregation: per group of jobs, per node, per cluster


@dataclass(frozen=True)
class DirectionSummary:
    """A direction summed over several job entries (the jobs of a group, or several hosts)."""

    direction: str
    bw_bytes: float  # sum of the entries' bandwidths, bytes/s
    iops: float
    io_bytes: int
    runtime_ms: int  # the longest entry
    entries: int
    clat_mean_ns: Optional[float]  # sample-weighted
    clat_stddev_ns: Optional[float]  # pooled
    percentiles_ns: Mapping[float, float]  # exact for one entry or merged json+ bins; else empty
    percentiles_note: str
    per_host_bw: Mapping[str, float]

    @property
    def gb_s(self) -> float:
        """Bandwidth in GB/s, decimal (10**9 bytes per second)."""
        return self.bw_bytes / 1e9

    def to_json(self) -> dict[str, object]:
        return {
            "bw_bytes": self.bw_bytes, "bw_gb_s_decimal": self.gb_s, "iops": self.iops,
            "io_bytes": self.io_bytes, "runtime_ms": self.runtime_ms, "entries": self.entries,
            "clat_mean_ns": self.clat_mean_ns, "clat_stddev_ns": self.clat_stddev_ns,
            "clat_percentiles_ns": {_pct_label(q): self.percentiles_ns.get(q) for q in REPORTED_PERCENTILES},
            "percentiles_note": self.percentiles_note,
            "per_host_bw_bytes": dict(self.per_host_bw),
        }


@dataclass(frozen=True)
class GroupSummary:
    """One fio group (a job set) summed over its jobs and, for a cluster, over hosts."""

    groupid: int
    name: str
    hosts: tuple[str, ...]
    errors: int
    read: Optional[DirectionSummary]
    write: Optional[DirectionSummary]
    trim: Optional[DirectionSummary]

    def direction(self, name: str) -> Optional[DirectionSummary]:
        stats: Optional[DirectionSummary] = getattr(self, name)
        return stats

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"groupid": self.groupid, "name": self.name, "hosts": list(self.hosts),
                                  "errors": self.errors}
        for ddir in DIRECTIONS:
            s = self.direction(ddir)
            out[ddir] = s.to_json() if s is not None else None
        return out


def _pct_label(q: float) -> str:
    return "p" + (f"{q:g}")


def _merged_percentiles(stats: Sequence[DirectionStats]) -> tuple[dict[float, float], str]:
    if len(stats) == 1:
        lat = stats[0].latency
        return (dict(lat.percentiles) if lat else {}), "fio's own percentiles"
    raw_merged: dict[str, int] = {}
    for s in stats:
        bins = s.bins_raw
        if not bins or "FIO_IO_U_PLAT_BITS" in bins:
            return {}, "percentiles of several entries need json+ bins (fio >= 3.0); not computed"
        get = raw_merged.get
        # merged on fio's own string keys; converted once per distinct bin below (50 MB json+ in < 1 s)
        for k, v in bins.items():
            raw_merged[k] = get(k, 0) + v
    merged = {int(k): int(v) for k, v in raw_merged.items()}
    total = sum(merged.values())
    if total == 0:
        return {}, "no latency samples"
    out: dict[float, float] = {}
    bin_keys = sorted(merged)
    for q in REPORTED_PERCENTILES:
        # fio's rule: the bin where the cumulative count first reaches q% of the samples
        need = q / 100.0 * total
        acc = 0
        for b in bin_keys:
            acc += merged[b]
            if acc >= need:
                out[q] = float(b)
                break
    return out, "merged from json+ clat bins"


def _summarise_direction(ddir: str, entries: Sequence[JobResult]) -> Optional[DirectionSummary]:
    stats = [(j, j.direction(ddir)) for j in entries]
    present = [(j, s) for j, s in stats if s is not None]
    if not present:
        return None
    per_host: dict[str, float] = {}
    for j, s in present:
        per_host[j.host] = per_host.get(j.host, 0.0) + s.bw_bytes
    lat_parts = [(s.clat.samples or 0, s.clat.mean_ns, s.clat.stddev_ns) for _, s in present if s.clat]
    mean = sd = None
    n_total = sum(n for n, _, _ in lat_parts)
    if lat_parts and n_total > 0:
        mean = sum(n * m for n, m, _ in lat_parts) / n_total
        second = sum(n * (sdv * sdv + m * m) for n, m, sdv in lat_parts) / n_total
        sd = max(0.0, second - mean * mean) ** 0.5
    elif len(lat_parts) == 1:
        mean, sd = lat_parts[0][1], lat_parts[0][2]
    pct, note = _merged_percentiles([s for _, s in present])
    return DirectionSummary(
        direction=ddir,
        bw_bytes=sum(s.bw_bytes for _, s in present),
        iops=sum(s.iops for _, s in present),
        io_bytes=sum(s.io_bytes for _, s in present),
        runtime_ms=max(s.runtime_ms for _, s in present),
        entries=len(present),
        clat_mean_ns=mean, clat_stddev_ns=sd,
        percentiles_ns=pct, percentiles_note=note,
        per_host_bw=per_host,
    )


def summarise_groups(jobs: Iterable[JobResult]) -> list[GroupSummary]:
    """Sum bandwidth and IOPS over the entries of each group (``groupid``), across every host given."""
    groups: dict[int, list[JobResult]] = {}
    for j in jobs:
        groups.setdefault(j.groupid, []).append(j)
    out = []
    for gid in sorted(groups):
        entries = groups[gid]
        names = list(dict.fromkeys(j.name for j in entries))
        out.append(GroupSummary(
            groupid=gid, name="+".join(names),
            hosts=tuple(dict.fromkeys(j.host for j in entries)),
            errors=sum(j.error_count for j in entries),
            read=_summarise_direction("read", entries),
            write=_summarise_direction("write", entries),
            trim=_summarise_direction("trim", entries),
        ))
    return out


def summarise_per_node(doc: FioDocument) -> dict[str, list[GroupSummary]]:
    """Group summaries for each host of a document (one host unless client/server mode)."""
    by_host: dict[str, list[JobResult]] = {}
    for j in doc.jobs:
        by_host.setdefault(j.host, []).append(j)
    return {host: summarise_groups(jobs) for host, jobs in by_host.items()}


def summarise_cluster(docs: Iterable[FioDocument]) -> list[GroupSummary]:
    """Group summaries summed across every host of every document (the final one of each output)."""
    jobs: list[JobResult] = []
    for d in docs:
        jobs.extend(d.jobs)
    return summarise_groups(jobs)

"""A parser for the Prometheus text exposition format (0.0.4, and the OpenMetrics forms engines
emit), snapshots of an engine's /metrics and deltas between two snapshots.

Handles comments, ``# HELP`` (with ``\\\\`` and ``\\n`` escapes), ``# TYPE``, labels with escaped
values (``\\\\``, ``\\"``, ``\\n``), ``+Inf``/``-Inf``/``NaN``, optional timestamps, and the sample
suffixes of counters (``_total``, ``_created``), histograms (``_bucket``/``_sum``/``_count``) and
summaries (``quantile`` label). prometheus_client, which vLLM and LMCache use, declares a counter
``x`` as ``# TYPE x_total counter``; lookups accept either name.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Optional

from harness.errors import InfraError

Labels = tuple[tuple[str, str], ...]

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
TYPES = (
    "counter",
    "gauge",
    "histogram",
    "summary",
    "untyped",
    "unknown",
    "info",
    "stateset",
    "gaugehistogram",
)
_SUFFIXES = {
    "counter": ("_total", "_created", ""),
    "histogram": ("_bucket", "_sum", "_count", "_created", "_gsum", "_gcount"),
    "gaugehistogram": ("_bucket", "_gsum", "_gcount"),
    "summary": ("_sum", "_count", "_created", ""),
    "info": ("_info", ""),
}


class MetricsParseError(InfraError):
    """The engine's /metrics text is not valid exposition format (line number and line given)."""

    def __init__(self, message: str, *, line_no: int, line: str, source: str = "metrics") -> None:
        self.line_no = line_no
        self.line = line
        super().__init__(f"{source}:{line_no}: {message}: {line[:200]!r}")


@dataclass(frozen=True)
class Sample:
    name: str
    labels: Labels  # sorted by label name
    value: float
    timestamp_ms: Optional[int] = None

    def label(self, key: str) -> Optional[str]:
        return dict(self.labels).get(key)


@dataclass
class MetricFamily:
    name: str
    type: str = "untyped"
    help: str = ""
    samples: list[Sample] = field(default_factory=list)


@dataclass(frozen=True)
class HistogramValue:
    """A histogram summed over its label sets: cumulative bucket counts by upper bound."""

    buckets: tuple[tuple[float, float], ...]  # (le, cumulative count), ascending, ending with +Inf
    sum: float
    count: float

    @property
    def mean(self) -> Optional[float]:
        return self.sum / self.count if self.count > 0 else None

    def quantile(self, q: float) -> Optional[float]:
        """Estimate like PromQL's histogram_quantile (linear within the bucket)."""
        if self.count <= 0 or not self.buckets:
            return None
        rank = q * self.count
        prev_le, prev_c = 0.0, 0.0
        for le, c in self.buckets:
            if c >= rank:
                if math.isinf(le):
                    return prev_le
                if c == prev_c:
                    return le
                return prev_le + (le - prev_le) * (rank - prev_c) / (c - prev_c)
            prev_le, prev_c = le, c
        return prev_le

    def minus(self, other: HistogramValue) -> HistogramValue:
        theirs = dict(other.buckets)
        return HistogramValue(
            tuple((le, c - theirs.get(le, 0.0)) for le, c in self.buckets),
            self.sum - other.sum,
            self.count - other.count,
        )

    def to_json(self) -> dict[str, object]:
        return {
            "buckets": [[_json_float(le), c] for le, c in self.buckets],
            "sum": self.sum,
            "count": self.count,
            "mean": self.mean,
        }


def _json_float(v: float) -> object:
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if math.isnan(v):
        return "NaN"
    return v


def _parse_value(text: str) -> float:
    t = text.strip()
    low = t.lower()
    if low in ("+inf", "inf"):
        return math.inf
    if low == "-inf":
        return -math.inf
    if low == "nan":
        return math.nan
    return float(t)  # raises ValueError


def _unescape(text: str, *, quote: bool) -> str:
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            if nxt == "n":
                out.append("\n")
            elif nxt == "\\":
                out.append("\\")
            elif nxt == '"' and quote:
                out.append('"')
            else:
                out.append("\\" + nxt)
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _parse_labels(text: str, pos: int, fail: object) -> tuple[Labels, int]:
    """Parse ``{a="x",b="y"}`` starting at ``text[pos] == '{'``; returns labels and the end index."""
    labels: dict[str, str] = {}
    i = pos + 1
    n = len(text)
    while True:
        while i < n and text[i] in " \t":
            i += 1
        if i < n and text[i] == "}":
            return tuple(sorted(labels.items())), i + 1
        m = _LABEL_NAME.match(text, i)
        if not m:
            raise ValueError("expected a label name")
        key = m.group(0)
        i = m.end()
        while i < n and text[i] in " \t":
            i += 1
        if i >= n or text[i] != "=":
            raise ValueError(f"expected '=' after label {key}")
        i += 1
        while i < n and text[i] in " \t":
            i += 1
        if i >= n or text[i] != '"':
            raise ValueError(f"expected a quoted value for label {key}")
        i += 1
        start = i
        while i < n and text[i] != '"':
            i += 2 if text[i] == "\\" else 1
        if i >= n:
            raise ValueError(f"unterminated value for label {key}")
        if key in labels:
            raise ValueError(f"label {key} given twice")
        labels[key] = _unescape(text[start:i], quote=True)
        i += 1
        while i < n and text[i] in " \t":
            i += 1
        if i < n and text[i] == ",":
            i += 1
            continue
        if i < n and text[i] == "}":
            return tuple(sorted(labels.items())), i + 1
        raise ValueError("expected ',' or '}' in the label set")


def _parse_sample(line: str) -> Sample:
    m = _NAME.match(line)
    if not m:
        raise ValueError("expected a metric name")
    name = m.group(0)
    i = m.end()
    labels: Labels = ()
    if i < len(line) and line[i] == "{":
        labels, i = _parse_labels(line, i, None)
    rest = line[i:].split()
    if not rest or line[i : i + 1] not in (" ", "\t"):
        raise ValueError("expected a value after the name and labels")
    if len(rest) > 2 and rest[2] != "#":  # OpenMetrics exemplars start with '#'
        raise ValueError("unexpected text after the value and timestamp")
    value = _parse_value(rest[0])
    ts: Optional[int] = None
    if len(rest) >= 2 and rest[1] != "#":
        ts = int(float(rest[1]) * (1000 if "." in rest[1] else 1))
    return Sample(name, labels, value, ts)


def _family_of(sample_name: str, families: Mapping[str, MetricFamily]) -> Optional[MetricFamily]:
    if sample_name in families:
        return families[sample_name]
    for fam in families.values():
        for suffix in _SUFFIXES.get(fam.type, ()):
            if suffix and sample_name == fam.name + suffix:
                return fam
        # a counter declared as x_total whose _created sibling is not declared
        if (
            fam.type == "counter"
            and fam.name.endswith("_total")
            and sample_name == fam.name[:-6] + "_created"
        ):
            return fam
    return None


def parse(text: str, *, source: str = "metrics") -> dict[str, MetricFamily]:
    """Parse exposition text into families by declared name (undeclared samples: untyped families)."""
    families: dict[str, MetricFamily] = {}
    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            parts = line[1:].strip().split(None, 2)
            if len(parts) >= 2 and parts[0] in ("HELP", "TYPE"):
                name = parts[1]
                if not _NAME.fullmatch(name):
                    raise MetricsParseError("invalid metric name", line_no=line_no, line=raw, source=source)
                fam = families.setdefault(name, MetricFamily(name))
                if parts[0] == "HELP":
                    fam.help = _unescape(parts[2] if len(parts) > 2 else "", quote=False)
                else:
                    kind = (parts[2] if len(parts) > 2 else "").strip().lower()
                    if kind not in TYPES:
                        raise MetricsParseError(
                            f"unknown metric type {kind!r}", line_no=line_no, line=raw, source=source
                        )
                    if fam.samples:
                        raise MetricsParseError(
                            "TYPE after the family's samples", line_no=line_no, line=raw, source=source
                        )
                    fam.type = kind
            continue  # other comments, and "# EOF" of OpenMetrics
        try:
            sample = _parse_sample(line)
        except ValueError as exc:
            raise MetricsParseError(str(exc), line_no=line_no, line=raw, source=source) from None
        owner = _family_of(sample.name, families)
        if owner is None:
            owner = families.setdefault(sample.name, MetricFamily(sample.name))
        owner.samples.append(sample)
    return families


def _canonical(name: str) -> str:
    return name[:-6] if name.endswith("_total") else name


def _match(labels: Labels, want: Mapping[str, str]) -> bool:
    have = dict(labels)
    return all(have.get(k) == v for k, v in want.items())


@dataclass
class MetricsSnapshot:
    """One scrape of an engine's /metrics."""

    families: dict[str, MetricFamily]
    taken_at: float = field(default_factory=time.time)
    text: str = ""

    @classmethod
    def from_text(
        cls, text: str, *, taken_at: Optional[float] = None, source: str = "metrics"
    ) -> MetricsSnapshot:
        return cls(parse(text, source=source), taken_at if taken_at is not None else time.time(), text)

    def family(self, name: str) -> Optional[MetricFamily]:
        for candidate in (name, name + "_total", _canonical(name)):
            if candidate in self.families:
                return self.families[candidate]
        return None

    def type_of(self, name: str) -> Optional[str]:
        fam = self.family(name)
        return fam.type if fam else None

    def samples(self, name: str, **labels: str) -> list[Sample]:
        """Samples named ``name`` (a counter also as ``name_total``) whose labels include ``labels``."""
        names = {name, name + "_total"} if not name.endswith("_total") else {name}
        out = []
        for fam in self.families.values():
            for s in fam.samples:
                if s.name in names and _match(s.labels, labels):
                    out.append(s)
        return out

    def value(self, name: str, **labels: str) -> Optional[float]:
        """Sum of the matching samples (counters and gauges), None when there are none."""
        found = self.samples(name, **labels)
        return sum(s.value for s in found) if found else None

    def histogram(self, name: str, **labels: str) -> Optional[HistogramValue]:
        buckets: dict[float, float] = {}
        total = count = 0.0
        seen = False
        for s in self.samples(name + "_bucket", **labels):
            le = s.label("le")
            if le is None:
                continue
            bound = _parse_value(le)
            buckets[bound] = buckets.get(bound, 0.0) + s.value
            seen = True
        for s in self.samples(name + "_sum", **labels):
            total += s.value
        for s in self.samples(name + "_count", **labels):
            count += s.value
            seen = True
        if not seen:
            return None
        return HistogramValue(tuple(sorted(buckets.items())), total, count)

    def scalar_names(self) -> list[str]:
        """Canonical names of counter and gauge families (counters without ``_total``)."""
        return sorted(
            {
                _canonical(f.name) if f.type == "counter" else f.name
                for f in self.families.values()
                if f.type in ("counter", "gauge", "untyped", "unknown") and f.samples
            }
        )


# The metrics the issue asks for, recorded for every measured point.
KEY_COUNTERS = (
    "vllm:prefix_cache_queries",
    "vllm:prefix_cache_hits",
    "vllm:external_prefix_cache_queries",
    "vllm:external_prefix_cache_hits",
    "lmcache:num_hit_tokens",
    "lmcache:num_requested_tokens",
)
KEY_GAUGES = ("vllm:num_requests_running", "vllm:num_requests_waiting")
KEY_HISTOGRAMS = ("vllm:time_to_first_token_seconds", "lmcache:retrieve_speed", "lmcache:store_speed")


@dataclass
class MetricsDelta:
    """What changed between two scrapes: counters as differences, gauges as their last value,
    histograms as bucket-wise differences. A counter that went down (engine restarted) counts
    from zero and is listed in ``resets``."""

    interval_s: float
    counters: dict[str, float] = field(default_factory=dict)
    gauges: dict[str, float] = field(default_factory=dict)
    histograms: dict[str, HistogramValue] = field(default_factory=dict)
    resets: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # key metrics the engine does not expose

    def ratio(self, hits: str, queries: str) -> Optional[float]:
        q = self.counters.get(queries)
        h = self.counters.get(hits)
        if q is None or h is None or q <= 0:
            return None
        return h / q

    def key_figures(self) -> dict[str, object]:
        """The figures a report shows for one point (None where the engine exposes nothing)."""
        ttft = self.histograms.get("vllm:time_to_first_token_seconds")
        retrieve = self.histograms.get("lmcache:retrieve_speed")
        return {
            "prefix_cache_hit_rate": self.ratio("vllm:prefix_cache_hits", "vllm:prefix_cache_queries"),
            "external_prefix_cache_hit_rate": self.ratio(
                "vllm:external_prefix_cache_hits", "vllm:external_prefix_cache_queries"
            ),
            "lmcache_hit_rate": self.ratio("lmcache:num_hit_tokens", "lmcache:num_requested_tokens"),
            "lmcache_hit_tokens": self.counters.get("lmcache:num_hit_tokens"),
            "engine_ttft_mean_s": ttft.mean if ttft else None,
            "engine_ttft_count": ttft.count if ttft else None,
            "lmcache_retrieve_speed_mean_tok_s": retrieve.mean if retrieve else None,
            "num_requests_running": self.gauges.get("vllm:num_requests_running"),
            "num_requests_waiting": self.gauges.get("vllm:num_requests_waiting"),
            # Cold-restore validity (INTERFACES item 3): None when the engine exposes no such
            # counter, never 0 in that case.
            "offload_hit_tokens": self._first_counter("vllm:external_prefix_cache_hits", "lmcache:num_hit_tokens"),
            "engine_prefix_hit_tokens": self.counters.get("vllm:prefix_cache_hits"),
            "prompt_tokens_queried": self.counters.get("vllm:prefix_cache_queries"),
        }

    def _first_counter(self, *names: str) -> Optional[float]:
        for name in names:
            if name in self.counters:
                return self.counters[name]
        return None

    def to_json(self) -> dict[str, object]:
        return {
            "interval_s": self.interval_s,
            "counters": self.counters,
            "gauges": self.gauges,
            "histograms": {k: v.to_json() for k, v in self.histograms.items()},
            "resets": self.resets,
            "missing": self.missing,
            "key_figures": self.key_figures(),
        }


def delta(
    before: MetricsSnapshot, after: MetricsSnapshot, *, names: Optional[Iterable[str]] = None
) -> MetricsDelta:
    """Differences from ``before`` to ``after`` for every counter, gauge and histogram of ``after``
    (or only ``names``), summed over label sets."""
    out = MetricsDelta(interval_s=after.taken_at - before.taken_at)
    wanted = set(names) if names is not None else None
    for fam in after.families.values():
        canon = _canonical(fam.name) if fam.type == "counter" else fam.name
        if wanted is not None and canon not in wanted:
            continue
        if fam.type == "counter":
            a = after.value(canon) or 0.0
            b = before.value(canon)
            if b is not None and a >= b:
                out.counters[canon] = a - b
            else:
                out.counters[canon] = a
                if b is not None:
                    out.resets.append(canon)
        elif fam.type in ("gauge", "untyped", "unknown"):
            if fam.name.endswith("_created"):
                continue
            v = after.value(fam.name)
            if v is not None:
                out.gauges[fam.name] = v
        elif fam.type == "histogram":
            ha = after.histogram(fam.name)
            if ha is None:
                continue
            hb = before.histogram(fam.name)
            if hb is not None and ha.count >= hb.count:
                out.histograms[fam.name] = ha.minus(hb)
            else:
                out.histograms[fam.name] = ha
                if hb is not None:
                    out.resets.append(fam.name)
    for name in (*KEY_COUNTERS, *KEY_GAUGES, *KEY_HISTOGRAMS):
        if (
            (wanted is None or name in wanted)
            and name not in out.counters
            and name not in out.gauges
            and name not in out.histograms
        ):
            out.missing.append(name)
    return out

"""Snapshots of an engine's /metrics (parsed by prometheus_client, the library vLLM and LMCache
expose them with), per-instance values summed correctly across TP ranks, and deltas between two
snapshots with the key figures a point records.

prometheus_client names a counter family without ``_total`` (its samples keep it); lookups accept
either name. LMCache's in-process metrics carry one label set per TP rank (``worker_id``), each
rank counting the same tokens: an instance's value is taken over ranks, not summed (summing
reads ~TP x the tokens).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Optional

from prometheus_client.parser import text_string_to_metric_families

from harness.errors import InfraError

Labels = tuple[tuple[str, str], ...]

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


# Label names that identify a TP rank inside one engine instance (LMCache in-process metrics).
RANK_LABELS = ("worker_id", "rank", "tp_rank")


def _families(text: str) -> list[object]:
    return list(text_string_to_metric_families(text))


def _first_bad_line(text: str) -> tuple[int, str]:
    """The first line whose prefix fails to parse (prometheus_client's errors name no line)."""
    lines = text.splitlines()
    lo, hi = 1, len(lines)  # the prefix of ``hi`` lines fails
    while lo < hi:
        mid = (lo + hi) // 2
        try:
            _families("\n".join(lines[:mid]) + "\n")
            lo = mid + 1
        except (ValueError, TypeError, IndexError, KeyError):
            hi = mid
    return hi, lines[hi - 1] if lines else ""


def parse(text: str, *, source: str = "metrics") -> dict[str, MetricFamily]:
    """Parse exposition text into families by prometheus_client's family name."""
    families: dict[str, MetricFamily] = {}
    try:
        for fam in text_string_to_metric_families(text):
            mf = families.setdefault(fam.name, MetricFamily(fam.name, fam.type, fam.documentation))
            for s in fam.samples:
                ts = None if s.timestamp is None else int(float(s.timestamp) * 1000)
                mf.samples.append(Sample(s.name, tuple(sorted(s.labels.items())), float(s.value), ts))
    except (ValueError, TypeError, IndexError, KeyError) as exc:
        line_no, line = _first_bad_line(text)
        raise MetricsParseError(f"not Prometheus text format ({exc})", line_no=line_no, line=line,
                                source=source) from None
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
        """The instance's value of a counter or gauge, None when it has no such sample.

        Label sets are summed, except across TP ranks (``RANK_LABELS``): every rank of one instance
        counts the same tokens, so the ranks' values are combined by their minimum (the figure
        every rank agrees on; never kinder than the slowest rank)."""
        found = self.samples(name, **labels)
        if not found:
            return None
        groups: dict[Labels, list[float]] = {}
        for s in found:
            key = tuple((k, v) for k, v in s.labels if k not in RANK_LABELS or k in labels)
            groups.setdefault(key, []).append(s.value)
        return sum(min(values) for values in groups.values())

    def merged(self, *others: Optional[MetricsSnapshot]) -> MetricsSnapshot:
        """This snapshot with the families of others added (an instance's LMCache server in
        multiprocess mode exposes its own /metrics: one instance, two scrapes)."""
        families = dict(self.families)
        texts = [self.text]
        for other in others:
            if other is None:
                continue
            for name, fam in other.families.items():
                if name in families:
                    families[name] = MetricFamily(name, fam.type, fam.help,
                                                  [*families[name].samples, *fam.samples])
                else:
                    families[name] = fam
            texts.append(other.text)
        return MetricsSnapshot(families, self.taken_at, "\n".join(texts))

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
# Where offloaded hits show, per LMCache mode (first found wins; see MetricsDelta.offload_hit_tokens).
OFFLOAD_HIT_SOURCES = ("vllm:external_prefix_cache_hits", "lmcache:num_hit_tokens")
# The LMCache server's own /metrics in multiprocess mode (lmcache 0.5 ``lmcache server``).
MP_HIT = "lmcache_mp_lookup_hit_tokens"  # L1 + L2
MP_L1_HIT = "lmcache_mp_lookup_hit_l1_tokens"
MP_L2_HIT = "lmcache_mp_lookup_hit_l2_tokens"
MP_HIT_COUNTERS = (MP_L1_HIT, MP_L2_HIT)
KEY_GAUGES = ("vllm:num_requests_running", "vllm:num_requests_waiting")
KEY_HISTOGRAMS = ("vllm:time_to_first_token_seconds", "lmcache:retrieve_speed", "lmcache:store_speed")
# In-process LMCache's own timing of each retrieve (seconds, lookup hit to tokens loaded): with
# lmcache:num_hit_tokens, the bandwidth of the engine's own retrievals (restoreprobe).
RETRIEVE_TIME = "lmcache:time_to_retrieve"


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
    # Seconds the engine spent in its retrievals (RETRIEVE_TIME's sum; the slowest TP rank's)
    retrieve_seconds: Optional[float] = None

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
            # the three figures the verdict's cold-restore checks consume (INTERFACES.md item 3)
            "offload_hit_tokens": self.offload_hit_tokens(),
            "engine_prefix_hit_tokens": self.counters.get("vllm:prefix_cache_hits"),
            "prompt_tokens_queried": self.counters.get("vllm:prefix_cache_queries"),
            "lmcache_mp_l2_hit_tokens": self.counters.get(MP_L2_HIT),
            # the engine's own restore timing: tokens it retrieved, seconds its retrievals took
            "offload_retrieved_tokens": self.counters.get("lmcache:num_hit_tokens"),
            "offload_retrieve_seconds": self.retrieve_seconds,
        }

    def offload_hit_tokens(self) -> Optional[float]:
        """Prompt tokens served from the KV offload tiers, from the first source the engine
        exposes: vLLM's external (KV connector) prefix-cache hits, which both LMCache modes feed;
        else LMCache's in-process counter (visible with multi-process Prometheus); else the
        LMCache server's lookup hits in multiprocess mode (L1 + L2). None when none is exposed."""
        for name in OFFLOAD_HIT_SOURCES:
            if name in self.counters:
                return self.counters[name]
        if MP_HIT in self.counters:
            return self.counters[MP_HIT]
        mp = [self.counters[n] for n in MP_HIT_COUNTERS if n in self.counters]
        return sum(mp) if mp else None

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
    out.retrieve_seconds = _slowest_rank_sum(before, after, RETRIEVE_TIME)
    for name in (*KEY_COUNTERS, *KEY_GAUGES, *KEY_HISTOGRAMS):
        if (
            (wanted is None or name in wanted)
            and name not in out.counters
            and name not in out.gauges
            and name not in out.histograms
        ):
            out.missing.append(name)
    return out


def _slowest_rank_sum(before: MetricsSnapshot, after: MetricsSnapshot, name: str) -> Optional[float]:
    """The growth of a histogram's ``_sum`` over the scrapes, label sets summed except TP ranks,
    of which the largest counts: the ranks retrieve their shares of the same tokens side by side,
    so the instance's retrieval lasted as long as its slowest rank's (summing would read TP x the
    time). None when the engine exposes no such histogram."""
    def by_rank(snap: MetricsSnapshot) -> dict[Labels, dict[Labels, float]]:
        out: dict[Labels, dict[Labels, float]] = {}
        for s in snap.samples(name + "_sum"):
            rest = tuple((k, v) for k, v in s.labels if k not in RANK_LABELS)
            rank = tuple((k, v) for k, v in s.labels if k in RANK_LABELS)
            out.setdefault(rest, {})[rank] = out.get(rest, {}).get(rank, 0.0) + s.value
        return out

    now, then = by_rank(after), by_rank(before)
    if not now:
        return None
    total = 0.0
    for rest, ranks in now.items():
        old = then.get(rest, {})
        total += max(v - old.get(r, 0.0) if v >= old.get(r, 0.0) else v for r, v in ranks.items())
    return total

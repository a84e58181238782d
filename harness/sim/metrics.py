"""Prometheus text exposition for the emulator, under the names vLLM and LMCache use.

vLLM v1 and LMCache register their metrics with ``prometheus_client``: a Counter family
``vllm:prefix_cache_queries`` is exposed as the sample ``vllm:prefix_cache_queries_total``, and a
Histogram as ``_bucket{le=...}``/``_sum``/``_count``. The emulator writes the same shapes so the
harness's scraper treats it and a real engine alike.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence

Labels = tuple[tuple[str, str], ...]

# vLLM's buckets for time_to_first_token_seconds (vllm/v1/metrics/loggers.py)
TTFT_BUCKETS: tuple[float, ...] = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
# LMCache 0.5.6's buckets for time_to_retrieve (seconds per retrieve, lmcache/observability.py)
RETRIEVE_TIME_BUCKETS: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
)
# LMCache's buckets for retrieve_speed / store_speed (tokens per second)
SPEED_BUCKETS: tuple[float, ...] = (
    1,
    8,
    16,
    32,
    64,
    128,
    256,
    512,
    1024,
    2048,
    4096,
    8192,
    16384,
    32768,
    65536,
)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _fmt_labels(labels: Labels, extra: Labels = ()) -> str:
    items = labels + extra
    if not items:
        return ""
    return "{" + ",".join(f'{k}="{_escape(v)}"' for k, v in items) + "}"


def _fmt_value(v: float) -> str:
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    if math.isnan(v):
        return "NaN"
    return repr(float(v))


class _Family:
    def __init__(self, name: str, kind: str, help_text: str) -> None:
        self.name = name
        self.kind = kind
        self.help = help_text


class Counter(_Family):
    def __init__(self, name: str, help_text: str) -> None:
        super().__init__(name, "counter", help_text)
        self.values: dict[Labels, float] = {}

    def inc(self, labels: Labels, amount: float = 1.0) -> None:
        self.values[labels] = self.values.get(labels, 0.0) + amount

    def render(self) -> list[str]:
        return [f"{self.name}_total{_fmt_labels(lab)} {_fmt_value(v)}" for lab, v in self.values.items()]

    @property
    def exposed_name(self) -> str:
        return self.name + "_total"  # prometheus_client's text format declares counters with _total


class Gauge(_Family):
    def __init__(self, name: str, help_text: str) -> None:
        super().__init__(name, "gauge", help_text)
        self.values: dict[Labels, float] = {}

    def set(self, labels: Labels, value: float) -> None:
        self.values[labels] = value

    def render(self) -> list[str]:
        return [f"{self.name}{_fmt_labels(lab)} {_fmt_value(v)}" for lab, v in self.values.items()]


class Histogram(_Family):
    def __init__(self, name: str, help_text: str, buckets: Sequence[float]) -> None:
        super().__init__(name, "histogram", help_text)
        self.buckets = tuple(buckets)
        self.values: dict[Labels, tuple[list[int], list[float]]] = {}  # counts per bucket, [sum]

    def observe(self, labels: Labels, value: float) -> None:
        counts, total = self.values.setdefault(labels, ([0] * (len(self.buckets) + 1), [0.0]))
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                counts[i] += 1
        counts[-1] += 1
        total[0] += value

    def render(self) -> list[str]:
        out: list[str] = []
        for lab, (counts, total) in self.values.items():
            for bound, c in zip(self.buckets, counts):
                out.append(f"{self.name}_bucket{_fmt_labels(lab, (('le', _fmt_value(bound)),))} {_fmt_value(c)}")
            out.append(f"{self.name}_bucket{_fmt_labels(lab, (('le', '+Inf'),))} {_fmt_value(counts[-1])}")
            out.append(f"{self.name}_count{_fmt_labels(lab)} {_fmt_value(counts[-1])}")
            out.append(f"{self.name}_sum{_fmt_labels(lab)} {_fmt_value(total[0])}")
        return out


class SimMetrics:
    """Every metric the emulator exposes; thread-safe (storage threads update it too)."""

    def __init__(self, model_name: str, *, lmcache_visible: bool = True) -> None:
        self.lock = threading.Lock()
        # False: LMCache's families are counted but not exposed, as real vLLM v1 hides in-process
        # LMCache metrics unless PROMETHEUS_MULTIPROC_DIR is set (the emulator may not be kinder)
        self.lmcache_visible = lmcache_visible
        self.started = time.time()
        self.vllm_labels: Labels = (("engine", "0"), ("model_name", model_name))
        self.lmc_labels: Labels = (("model_name", model_name), ("worker_id", "0"))
        self._vllm_families()
        self._lmcache_families()
        self._emulator_families()
        self.families: list[_Family] = [
            self.ttft,
            self.prefix_queries,
            self.prefix_hits,
            self.ext_queries,
            self.ext_hits,
            self.running,
            self.waiting,
            self.prompt_tokens,
            self.generation_tokens,
            self.request_success,
            self.lmc_requested,
            self.lmc_hit,
            self.lmc_stored,
            self.lmc_retrieve_speed,
            self.lmc_time_to_retrieve,
            self.lmc_store_speed,
            self.sim_read_bytes,
            self.sim_write_bytes,
            self.sim_chunk_hits,
            self.sim_store_errors,
            self.sim_read_errors,
            self.sim_evicted,
            self.sim_memory_hit_requests,
            self.sim_pending_writes,
            self.sim_memory_chunks,
            self.sim_read_mode,
            self.sim_tier_dir,
            self.sim_info,
        ]
        self._children_at_start()

    def _children_at_start(self) -> None:
        """The labelled children a fresh vLLM and LMCache expose before any request (zeros, the
        running and waiting gauges, the emulator's info)."""
        self.sim_info.set(self.vllm_labels, 1.0)
        self.running.set(self.vllm_labels, 0.0)
        self.sim_pending_writes.set(self.vllm_labels, 0.0)
        self.sim_memory_hit_requests.inc(self.vllm_labels, 0.0)
        self.waiting.set(self.vllm_labels, 0.0)
        for counter in (
            self.prefix_queries,
            self.prefix_hits,
            self.ext_queries,
            self.ext_hits,
            self.prompt_tokens,
            self.generation_tokens,
        ):
            counter.inc(self.vllm_labels, 0.0)
        for counter in (self.lmc_requested, self.lmc_hit, self.lmc_stored):
            counter.inc(self.lmc_labels, 0.0)
        # vLLM and LMCache create their labelled histogram children at start-up: zero counts are exposed
        for hist, labels in (
            (self.ttft, self.vllm_labels),
            (self.lmc_retrieve_speed, self.lmc_labels),
            (self.lmc_time_to_retrieve, self.lmc_labels),
            (self.lmc_store_speed, self.lmc_labels),
        ):
            hist.values.setdefault(labels, ([0] * (len(hist.buckets) + 1), [0.0]))

    def _vllm_families(self) -> None:
        """The vllm:* families, under vLLM's names and help texts."""
        self.ttft = Histogram(
            "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS
        )
        self.prefix_queries = Counter(
            "vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens."
        )
        self.prefix_hits = Counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.")
        self.ext_queries = Counter(
            "vllm:external_prefix_cache_queries",
            "External prefix cache queries from KV connector cross-instance cache "
            "sharing, in terms of number of queried tokens.",
        )
        self.ext_hits = Counter(
            "vllm:external_prefix_cache_hits",
            "External prefix cache hits from KV connector cross-instance cache sharing, "
            "in terms of number of cached tokens.",
        )
        self.running = Gauge("vllm:num_requests_running", "Number of requests in model execution batches.")
        self.waiting = Gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
        self.prompt_tokens = Counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
        self.generation_tokens = Counter("vllm:generation_tokens", "Number of generation tokens processed.")
        self.request_success = Counter("vllm:request_success", "Count of successfully processed requests.")

    def _lmcache_families(self) -> None:
        """The lmcache:* families, under LMCache's names and help texts."""
        self.lmc_requested = Counter("lmcache:num_requested_tokens", "Total number of tokens requested")
        self.lmc_hit = Counter("lmcache:num_hit_tokens", "Total number of tokens hit in lmcache")
        self.lmc_stored = Counter("lmcache:num_stored_tokens", "Total number of tokens stored in lmcache")
        self.lmc_retrieve_speed = Histogram(
            "lmcache:retrieve_speed", "Retrieve speed of lmcache (tokens per second)", SPEED_BUCKETS
        )
        self.lmc_time_to_retrieve = Histogram(
            "lmcache:time_to_retrieve", "Time to retrieve from lmcache (seconds)", RETRIEVE_TIME_BUCKETS
        )
        self.lmc_store_speed = Histogram(
            "lmcache:store_speed", "Store speed of lmcache (tokens per second)", SPEED_BUCKETS
        )

    def _emulator_families(self) -> None:
        """The emulator's own families (kvgate_sim:*): what it read and wrote, and how."""
        self.sim_read_bytes = Counter("kvgate_sim:tier_read_bytes", "Bytes read from a storage tier by the emulator.")
        self.sim_write_bytes = Counter("kvgate_sim:tier_write_bytes", "Bytes written to a storage tier.")
        self.sim_chunk_hits = Counter("kvgate_sim:chunk_hits", "KV chunks served, by tier.")
        self.sim_store_errors = Counter("kvgate_sim:store_errors", "Chunk writes that failed, by reason.")
        self.sim_read_errors = Counter("kvgate_sim:read_errors", "Chunk reads that failed, by reason.")
        self.sim_evicted = Counter("kvgate_sim:evicted_chunks", "Chunks evicted, by tier.")
        self.sim_memory_hit_requests = Counter(
            "kvgate_sim:memory_hit_requests",
            "Requests that took any KV chunk from a host-memory tier (CPU tier or the LMCache server's L1).")
        self.sim_memory_chunks = Gauge("kvgate_sim:memory_tier_chunks",
                                       "Chunks held in a host-memory tier (the in-process CPU tier).")
        self.sim_pending_writes = Gauge("kvgate_sim:pending_tier_writes",
                                        "Chunks queued for a storage tier, not yet written.")
        self.sim_read_mode = Gauge(
            "kvgate_sim:read_mode_info", "How tier reads bypass the page cache (odirect or fadvise)."
        )
        self.sim_tier_dir = Gauge(
            "kvgate_sim:tier_dir_info", "The directory each storage tier really uses (kvgate checks it)."
        )
        self.sim_info = Gauge("kvgate_sim:emulator_info", "Present on the KV emulator only (not a real engine).")

    def tier_labels(self, key: str, value: str) -> Labels:
        return self.vllm_labels + ((key, value),)

    def render(self) -> str:
        lines: list[str] = []
        with self.lock:
            for fam in self.families:
                if not self.lmcache_visible and fam.name.startswith("lmcache:"):
                    continue
                name = getattr(fam, "exposed_name", fam.name)
                lines.append(f"# HELP {name} {fam.help}")
                lines.append(f"# TYPE {name} {fam.kind}")
                lines.extend(fam.render())  # type: ignore[attr-defined]
                if fam.kind in ("counter", "histogram"):
                    # prometheus_client adds a <name>_created gauge per labelled child
                    lines.append(f"# HELP {fam.name}_created {fam.help}")
                    lines.append(f"# TYPE {fam.name}_created gauge")
                    lines.extend(
                        f"{fam.name}_created{_fmt_labels(lab)} {_fmt_value(self.started)}"
                        for lab in fam.values  # type: ignore[attr-defined]
                    )
        return "\n".join(lines) + "\n"

"""Prompt tokens per KV tier from the engine's counters: the emulator's exposition (rendered by its
own metrics code), a vLLM without a per-tier split (None, never 0), and instances summed."""

from __future__ import annotations

from harness.engines.prometheus import MetricsSnapshot
from harness.pipelines.shared.sweepdata import Repetition
from harness.pipelines.shared.tierhits import memory_hit_requests, sweep_tier_rows, tier_hits, tier_rates, tier_rows
from harness.sim.metrics import SimMetrics

CHUNK = 256


def _sim_window(*, queried: float, hbm: float, cpu_chunks: float, disk_chunks: float
                ) -> tuple[MetricsSnapshot, MetricsSnapshot]:
    m = SimMetrics("m")
    m.prefix_queries.inc(m.vllm_labels, 1000)  # before the window: must not count
    m.sim_chunk_hits.inc(m.tier_labels("tier", "local_disk"), 3)
    before = MetricsSnapshot.from_text(m.render())
    m.prefix_queries.inc(m.vllm_labels, queried)
    m.prefix_hits.inc(m.vllm_labels, hbm)
    m.sim_chunk_hits.inc(m.tier_labels("tier", "hbm"), hbm / CHUNK)
    if cpu_chunks:
        m.sim_chunk_hits.inc(m.tier_labels("tier", "local_cpu"), cpu_chunks)
    m.sim_chunk_hits.inc(m.tier_labels("tier", "local_disk"), disk_chunks)
    m.ext_hits.inc(m.vllm_labels, (cpu_chunks + disk_chunks) * CHUNK)
    m.ext_queries.inc(m.vllm_labels, queried - hbm)
    return before, MetricsSnapshot.from_text(m.render())


def test_emulator_counters_split_by_tier_over_the_window() -> None:
    before, after = _sim_window(queried=4096, hbm=512, cpu_chunks=4, disk_chunks=6)
    hits = tier_hits([before], [after], CHUNK)
    assert hits == {"queried": 4096, "hbm": 512, "offload": 2560, "local_cpu": 1024, "local_disk": 1536,
                    "remote": 0.0}
    rates = tier_rates(hits)
    assert rates["local_cpu"] == 0.25 and rates["local_disk"] == 0.375 and rates["total"] == 0.75
    # two instances add up
    b2, a2 = _sim_window(queried=1000, hbm=0, cpu_chunks=0, disk_chunks=2)
    two = tier_hits([before, b2], [after, a2], CHUNK)
    assert two["queried"] == 5096 and two["local_disk"] == 1536 + 512 and two["local_cpu"] == 1024


def test_an_engine_without_a_tier_split_gives_none_not_zero() -> None:
    text = ("# TYPE vllm:prefix_cache_queries_total counter\nvllm:prefix_cache_queries_total{engine=\"0\"} {q}\n"
            "# TYPE vllm:prefix_cache_hits_total counter\nvllm:prefix_cache_hits_total{engine=\"0\"} {h}\n"
            "# TYPE vllm:external_prefix_cache_hits_total counter\n"
            "vllm:external_prefix_cache_hits_total{engine=\"0\"} {e}\n")
    before = MetricsSnapshot.from_text(text.replace("{q}", "10").replace("{h}", "0").replace("{e}", "0"))
    after = MetricsSnapshot.from_text(text.replace("{q}", "2010").replace("{h}", "16").replace("{e}", "1536"))
    hits = tier_hits([before], [after], CHUNK)
    assert hits["offload"] == 1536 and hits["hbm"] == 16
    assert hits["local_cpu"] is None and hits["local_disk"] is None  # unknown, never 0
    rates = tier_rates(hits)
    assert rates["local_disk"] is None and rates["total"] == (16 + 1536) / 2000
    # an instance not scraped makes the sum unknown rather than smaller
    assert tier_hits([before, None], [after, after], CHUNK)["queried"] is None
    assert tier_rates({"queried": 0, "hbm": 0, "offload": 0})["total"] is None  # nothing looked up


def test_sweep_rows_per_repetition_and_recompute_arm() -> None:
    hits = {"queried": 100.0, "hbm": 0.0, "offload": None, "local_cpu": None, "local_disk": None, "remote": None}
    sweep = {2: [Repetition("b", 2, 2, {}, [], tiers=dict(hits)), Repetition("b", 2, 1, {}, [], tiers=dict(hits)),
                 Repetition("b", 2, 3, {}, [])]}  # rep 3 recorded before tier figures existed
    rows = sweep_tier_rows(sweep, offload=False)
    assert [r["point"] for r in rows] == ["c2 rep1", "c2 rep2"]
    assert rows[0]["rates"]["offload"] == 0 and rows[0]["rates"]["total"] == 0
    # with offload configured, an unexposed offload counter stays unknown
    assert sweep_tier_rows(sweep)[0]["rates"]["total"] is None
    assert tier_rows([]) == []


def _mp_window(l1_tokens: float, lookups: float) -> tuple[MetricsSnapshot, MetricsSnapshot]:
    """A real LMCache server's exposition (no emulator per-request counter) over one window."""
    def text(l1: float, n: float) -> str:
        return ("# TYPE lmcache_mp_lookup_hit_l1_tokens_total counter\n"
                f"lmcache_mp_lookup_hit_l1_tokens_total {l1}\n"
                "# TYPE lmcache_mp_lookups_requests_total counter\n"
                f"lmcache_mp_lookups_requests_total {n}\n")
    return MetricsSnapshot.from_text(text(512, 3)), MetricsSnapshot.from_text(text(512 + l1_tokens, 3 + lookups))


def test_memory_hits_are_counted_per_request_not_per_lookup() -> None:
    # the emulator counts requests itself
    m = SimMetrics("m")
    before = MetricsSnapshot.from_text(m.render())
    m.sim_memory_hit_requests.inc(m.vllm_labels, 2)
    assert memory_hit_requests([before], [MetricsSnapshot.from_text(m.render())], requests=8)[0] == 2
    # LMCache's server: no L1 hit proves none; L1 hits with one lookup per request prove one at least
    assert memory_hit_requests(*map(list, zip(_mp_window(0, 20))), requests=8)[0] == 0
    assert memory_hit_requests(*map(list, zip(_mp_window(256, 8))), requests=8)[0] == 1
    # more lookups than requests: a request's repeated lookup finds in L1 what its first one loaded
    # from L2, so the L1 hits say nothing about requests: unknown, never 0
    value, why = memory_hit_requests(*map(list, zip(_mp_window(256, 20))), requests=8)
    assert value is None and "repeated lookups" in why
    # an engine without a split: unknown, unless no memory tier exists
    plain = MetricsSnapshot.from_text("# TYPE vllm:prefix_cache_hits_total counter\nvllm:prefix_cache_hits_total 0\n")
    assert memory_hit_requests([plain], [plain], requests=8)[0] is None
    assert memory_hit_requests([plain], [plain], requests=8, structural="no host-memory KV tier configured")[0] == 0
    assert memory_hit_requests([None], [plain], requests=8)[0] is None

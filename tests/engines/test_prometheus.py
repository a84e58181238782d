"""The Prometheus exposition parser, snapshots and deltas.

The fixture ``data/vllm_lmcache_metrics.txt`` is laid out exactly as prometheus_client's
``generate_latest`` writes vLLM's and LMCache's metrics (counter families declared as ``x_total``,
``_created`` gauges, histograms ending in ``le="+Inf"``); vLLM itself cannot run here.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from harness.engines.prometheus import MetricsParseError, MetricsSnapshot, delta, parse

DATA = Path(__file__).parent / "data"


@pytest.fixture
def vllm_text() -> str:
    return (DATA / "vllm_lmcache_metrics.txt").read_text()


def test_real_vllm_lmcache_exposition(vllm_text: str) -> None:
    snap = MetricsSnapshot.from_text(vllm_text)
    assert snap.type_of("vllm:prefix_cache_queries") == "counter"
    assert snap.value("vllm:prefix_cache_queries") == 1048576.0
    assert snap.value("vllm:prefix_cache_queries_total") == 1048576.0
    assert snap.value("vllm:external_prefix_cache_hits") == 655360.0
    assert snap.value("vllm:num_requests_running", model_name="moe-480b") == 8.0
    # two TP ranks (worker_id 0 and 1) count the same tokens: one instance's value, not 2x
    assert snap.value("lmcache:num_hit_tokens") == 655360.0
    assert snap.value("lmcache:num_hit_tokens", worker_id="1") == 655360.0
    assert snap.value("vllm:nonexistent") is None
    h = snap.histogram("vllm:time_to_first_token_seconds")
    assert h is not None and h.count == 16.0 and h.sum == 41.25
    assert h.buckets[-1] == (math.inf, 16.0)
    assert h.mean == pytest.approx(41.25 / 16)
    p50 = h.quantile(0.5)
    assert p50 == pytest.approx(1.0)  # rank 8 of 16 is the top of the (0.75, 1.0] bucket, as PromQL says
    info = snap.samples("vllm:cache_config_info")[0]
    assert info.label("prefix_caching_hash_algo") == "sha256" and info.value == 1.0
    assert math.isnan(snap.value("lmcache:local_cache_usage") or 0.0)
    rs = snap.histogram("lmcache:retrieve_speed")
    assert rs is not None and rs.count == 10.0
    # _created belongs to its own gauge family, not to the counter
    assert (
        snap.families["vllm:prefix_cache_queries"].samples[0].name == "vllm:prefix_cache_queries_total"
    )
    assert len(snap.families["vllm:prefix_cache_queries"].samples) == 1


def test_escapes_timestamps_and_untyped_samples() -> None:
    text = (
        "# HELP weird A help with a backslash \\\\ and a\\nnewline\n"
        "# TYPE weird gauge\n"
        'weird{path="C:\\\\dir",quote="say \\"hi\\"",nl="a\\nb",empty=""} -Inf 1700000000000\n'
        'weird{path="x" , other="y",} +Inf\n'
        "# a free comment\n"
        "no_type_here 42\n"
        "spaced   7.5e-3   \n"
    )
    fams = parse(text)
    w = fams["weird"]
    assert w.help == "A help with a backslash \\ and a\nnewline"
    s = w.samples[0]
    assert dict(s.labels) == {"path": "C:\\dir", "quote": 'say "hi"', "nl": "a\nb", "empty": ""}
    assert s.value == -math.inf and s.timestamp_ms == 1700000000000
    assert w.samples[1].value == math.inf and dict(w.samples[1].labels) == {"path": "x", "other": "y"}
    assert fams["no_type_here"].type == "unknown" and fams["no_type_here"].samples[0].value == 42.0
    assert fams["spaced"].samples[0].value == 0.0075


def test_summary_and_openmetrics_counter_forms() -> None:
    text = (
        "# TYPE rpc_duration_seconds summary\n"
        'rpc_duration_seconds{quantile="0.5"} 0.05\n'
        'rpc_duration_seconds{quantile="0.99"} 0.2\n'
        "rpc_duration_seconds_sum 17.5\n"
        "rpc_duration_seconds_count 100\n"
        "# TYPE requests counter\n"
        "requests_total 5\n"
        "requests_created 1.7e9\n"
        "# EOF\n"
    )
    snap = MetricsSnapshot.from_text(text)
    assert [s.label("quantile") for s in snap.families["rpc_duration_seconds"].samples[:2]] == ["0.5", "0.99"]
    assert len(snap.families["rpc_duration_seconds"].samples) == 4
    assert snap.value("requests") == 5.0
    assert snap.type_of("requests") == "counter"


@pytest.mark.parametrize(
    ("text", "line_no"),
    [
        ("ok 1\nbad{a=1} 2\n", 2),
        ('x{a="1" 2\n', 1),
        ('ok 1\nok2 2\nx{a="1} 2\n', 3),
        ("x abc\n", 1),
        ("# TYPE x bogus\n", 1),
        ('x{a="1",a="2"} 1\n', 1),
    ],
)
def test_malformed_text_names_the_line(text: str, line_no: int) -> None:
    with pytest.raises(MetricsParseError) as info:
        parse(text, source="node1:8000/metrics")
    assert "not Prometheus text format" in str(info.value)
    assert info.value.line_no == line_no
    assert str(info.value).startswith(f"node1:8000/metrics:{line_no}:")
    assert info.value.line == text.splitlines()[line_no - 1]


def test_delta_counters_gauges_histograms_and_resets(vllm_text: str) -> None:
    before = MetricsSnapshot.from_text(vllm_text, taken_at=100.0)
    after_text = (
        vllm_text.replace(
            'vllm:prefix_cache_queries_total{engine="0",model_name="moe-480b"} 1.048576e+06',
            'vllm:prefix_cache_queries_total{engine="0",model_name="moe-480b"} 1.310720e+06',
        )
        .replace(
            'vllm:prefix_cache_hits_total{engine="0",model_name="moe-480b"} 262144.0',
            'vllm:prefix_cache_hits_total{engine="0",model_name="moe-480b"} 393216.0',
        )
        .replace(
            'vllm:num_requests_waiting{engine="0",model_name="moe-480b"} 3.0',
            'vllm:num_requests_waiting{engine="0",model_name="moe-480b"} 0.0',
        )
        .replace('le="+Inf"} 16.0', 'le="+Inf"} 20.0')
        .replace(
            'vllm:time_to_first_token_seconds_count{engine="0",model_name="moe-480b"} 16.0',
            'vllm:time_to_first_token_seconds_count{engine="0",model_name="moe-480b"} 20.0',
        )
        .replace(
            'vllm:time_to_first_token_seconds_sum{engine="0",model_name="moe-480b"} 41.25',
            'vllm:time_to_first_token_seconds_sum{engine="0",model_name="moe-480b"} 81.25',
        )
            # the LMCache worker 1 restarted: its counter went down
        .replace(
            'lmcache:num_hit_tokens_total{model_name="moe-480b",worker_id="1"} 655360.0',
            'lmcache:num_hit_tokens_total{model_name="moe-480b",worker_id="1"} 0.0',
        )
    )
    after = MetricsSnapshot.from_text(after_text, taken_at=160.0)
    d = delta(before, after)
    assert d.interval_s == 60.0
    assert d.counters["vllm:prefix_cache_queries"] == 262144.0
    assert d.counters["vllm:prefix_cache_hits"] == 131072.0
    assert d.ratio("vllm:prefix_cache_hits", "vllm:prefix_cache_queries") == 0.5
    assert d.gauges["vllm:num_requests_waiting"] == 0.0
    ttft = d.histograms["vllm:time_to_first_token_seconds"]
    assert ttft.count == 4.0 and ttft.sum == 40.0 and ttft.mean == 10.0
    assert dict(ttft.buckets)[math.inf] == 4.0
    assert "lmcache:num_hit_tokens" in d.resets
    assert d.counters["lmcache:num_hit_tokens"] == 0.0  # counted from zero: the restarted rank has 0
    assert "vllm:prefix_cache_queries_created" not in d.gauges
    figures = d.key_figures()
    assert figures["prefix_cache_hit_rate"] == 0.5 and figures["engine_ttft_mean_s"] == 10.0
    assert d.missing == ["lmcache:store_speed"]  # the fixture has no store_speed
    assert d.to_json()["key_figures"] == figures
    # cold-restore counters (INTERFACES item 3)
    assert figures["engine_prefix_hit_tokens"] == 131072.0 and figures["prompt_tokens_queried"] == 262144.0
    ext = d.counters.get("vllm:external_prefix_cache_hits")
    assert figures["offload_hit_tokens"] == (ext if ext is not None else 655360.0)


def test_cold_restore_counters_are_none_when_not_exposed() -> None:
    snap = MetricsSnapshot.from_text("# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 0\n",
                                     taken_at=1.0)
    figures = delta(snap, snap).key_figures()
    assert figures["offload_hit_tokens"] is None
    assert figures["engine_prefix_hit_tokens"] is None and figures["prompt_tokens_queried"] is None


def test_the_emulators_own_exposition_parses() -> None:
    from harness.sim.metrics import SimMetrics

    m = SimMetrics('model "q"\\x')
    m.ttft.observe(m.vllm_labels, 0.3)
    m.prefix_queries.inc(m.vllm_labels, 10)
    snap = MetricsSnapshot.from_text(m.render())
    assert snap.type_of("vllm:prefix_cache_queries") == "counter"
    assert snap.value("vllm:prefix_cache_queries", model_name='model "q"\\x') == 10.0
    h = snap.histogram("vllm:time_to_first_token_seconds")
    assert h is not None and h.count == 1 and h.quantile(0.5) is not None
    # like vLLM and LMCache, every histogram is exposed from start-up, with zero counts
    for name in ("lmcache:store_speed", "lmcache:retrieve_speed"):
        empty = snap.histogram(name)
        assert empty is not None and empty.count == 0 and empty.mean is None
    assert delta(snap, snap).missing == []


def _counter(name: str, value: float, **labels: str) -> str:
    text = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    return f"# TYPE {name}_total counter\n{name}_total{{{text}}} {value}\n"


def test_tp_ranks_are_one_instance_and_data_parallel_engines_add() -> None:
    text = (
        "# TYPE lmcache:num_hit_tokens_total counter\n"
        + "".join(f'lmcache:num_hit_tokens_total{{model_name="m",worker_id="{r}"}} {100 + r}\n' for r in range(8))
        + "# TYPE vllm:prefix_cache_hits_total counter\n"
        + 'vllm:prefix_cache_hits_total{engine="0",model_name="m"} 10\n'
        + 'vllm:prefix_cache_hits_total{engine="1",model_name="m"} 5\n'
    )
    snap = MetricsSnapshot.from_text(text)
    assert snap.value("lmcache:num_hit_tokens") == 100.0  # TP8: the ranks' common figure, not 8x
    assert snap.value("lmcache:num_hit_tokens", worker_id="3") == 103.0
    assert snap.value("vllm:prefix_cache_hits") == 15.0  # two engines of one server are both counted


def test_key_figures_for_both_lmcache_modes_and_none_when_not_exposed() -> None:
    def engine(queries: int, hits: int) -> str:
        return (_counter("vllm:prefix_cache_queries", queries, model_name="m")
                + _counter("vllm:prefix_cache_hits", hits, model_name="m"))

    def mp(l2: int) -> MetricsSnapshot:
        text = _counter("lmcache_mp_lookup_hit_l2_tokens", l2) + _counter("lmcache_mp_lookup_hit_l1_tokens", 0)
        return MetricsSnapshot.from_text(text)

    base = engine(0, 0)
    # multiprocess mode: vLLM without external counters here; the LMCache server's own /metrics
    engine0 = MetricsSnapshot.from_text(base, taken_at=0.0)
    mp0 = mp(0)
    engine1 = MetricsSnapshot.from_text(engine(1024, 0), taken_at=5.0)
    mp1 = mp(768)
    fig = delta(engine0.merged(mp0), engine1.merged(mp1)).key_figures()
    assert fig["offload_hit_tokens"] == 768.0 and fig["lmcache_mp_l2_hit_tokens"] == 768.0
    assert fig["engine_prefix_hit_tokens"] == 0.0 and fig["prompt_tokens_queried"] == 1024.0
    # vLLM's external prefix-cache counter wins when exposed (both modes feed it)
    ext0 = MetricsSnapshot.from_text(base + _counter("vllm:external_prefix_cache_hits", 10, model_name="m"))
    ext1 = MetricsSnapshot.from_text(base + _counter("vllm:external_prefix_cache_hits", 522, model_name="m"))
    assert delta(ext0.merged(mp0), ext1.merged(mp1)).key_figures()["offload_hit_tokens"] == 512.0
    # nothing exposed: None, never 0
    bare = MetricsSnapshot.from_text("# TYPE up gauge\nup 1\n")
    fig = delta(bare, bare).key_figures()
    assert fig["offload_hit_tokens"] is None
    assert fig["engine_prefix_hit_tokens"] is None and fig["prompt_tokens_queried"] is None


def _retrieve_time(sums: dict[str, float]) -> MetricsSnapshot:
    lines = ["# HELP lmcache:time_to_retrieve Time to retrieve from lmcache (seconds)",
             "# TYPE lmcache:time_to_retrieve histogram"]
    for rank, total in sums.items():
        labels = f'model_name="m",worker_id="{rank}"'
        lines += [f'lmcache:time_to_retrieve_bucket{{le="+Inf",{labels}}} 4.0',
                  f"lmcache:time_to_retrieve_count{{{labels}}} 4.0",
                  f"lmcache:time_to_retrieve_sum{{{labels}}} {total}"]
    return MetricsSnapshot.from_text("\n".join(lines) + "\n")


def test_retrieve_seconds_are_the_slowest_ranks_not_their_sum() -> None:
    # two TP ranks retrieve their shares of the same tokens side by side: the instance took 0.5 s
    d = delta(_retrieve_time({"0": 1.0, "1": 2.0}), _retrieve_time({"0": 1.4, "1": 2.5}))
    assert d.retrieve_seconds == pytest.approx(0.5)
    assert d.key_figures()["offload_retrieve_seconds"] == pytest.approx(0.5)
    # an engine without the histogram gives no timing (the plausibility check's fallback)
    assert delta(MetricsSnapshot.from_text(""), MetricsSnapshot.from_text("")).key_figures()[
        "offload_retrieve_seconds"] is None

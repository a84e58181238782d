"""The time model on hand-computed cases: restore, recompute, queueing bounds, break-even, the
bandwidth a TTFT reduction needs."""

from __future__ import annotations

import pytest

from harness.estimate import (
    Compute,
    Engine,
    ModelGeometry,
    Tier,
    Workload,
    attention_pairs,
    bandwidth_for_reduction,
    break_even_bandwidth,
    closed_mva,
    kv_sizes,
    predict_point,
    prefill_flops,
)

# 2 layers x 2 KV heads x 64 x 2 B x 2 = 1024 B per token
G = ModelGeometry("t", layers=2, kv_heads=2, head_dim=64, kv_dtype_bytes=2, num_attention_heads=4,
                  qk_dim=64, v_dim=64, active_params=1e6)


def test_kv_sizes_per_chunk_request_rank() -> None:
    s = kv_sizes(G, request_tokens=1000, chunk_size=256, tp=4)
    assert (s.per_token, s.per_chunk, s.per_request, s.chunks_per_request) == (1024, 262_144, 1_024_000, 3)
    # 2 KV heads on 4 ranks: each rank holds one head (replicated), half the bytes
    assert s.per_rank_per_request == 512_000
    mla = ModelGeometry("m", layers=3, attention="mla", kv_lora_rank=512, qk_rope_head_dim=64)
    assert mla.bytes_per_token == 3 * 576 * 2
    assert kv_sizes(mla, request_tokens=10, tp=8).per_rank_per_request == mla.bytes_per_token * 10


def test_attention_pairs_causal_and_windowed() -> None:
    assert attention_pairs(4, None) == 1 + 2 + 3 + 4
    assert attention_pairs(4, 2) == 1 + 2 + 2 + 2
    assert attention_pairs(2, None, prefix=3) == 4 + 5
    assert attention_pairs(3, 4, prefix=2) == 3 + 4 + 4


def test_prefill_flops_linear_plus_attention() -> None:
    # 2 x 1e6 x 10 + layers x 2 x heads x (qk + v) x pairs
    assert prefill_flops(G, 10) == 2e6 * 10 + 2 * 2 * 4 * 128 * 55


def test_restore_is_bytes_over_bandwidth_plus_chunk_overhead() -> None:
    t = Tier("d", read_bw=1e6, per_chunk_s=0.01)
    assert t.restore_seconds(2e6, 4) == pytest.approx(2.0 + 0.04)
    assert t.restore_seconds(2e6, 4, parallelism=2) == pytest.approx(2.0 + 0.02)


def _engine(shared: bool = False, batch: int = 4) -> Engine:
    return Engine(Compute(tokens_per_s=1000.0, shared=shared), max_batch=batch, decode_tokens_per_s=10.0)


def test_alone_point_is_restore_plus_the_uncached_tail() -> None:
    w = Workload(input_tokens=1040, output_tokens=11, chunk_size=256)  # 4 chunks + 16 computed
    tier = Tier("d", read_bw=1024 * 1024 / 0.5)  # 1024 tokens x 1024 B in 0.5 s
    p = predict_point(G, _engine(), w, tier, 1)
    assert p.restore_s == pytest.approx(0.5)
    assert p.compute_s == pytest.approx(16 / 1000)
    assert p.ttft_s == pytest.approx(0.516)
    assert p.request_s == pytest.approx(0.516 + 1.0)  # 10 more tokens at 10 tok/s


def test_queueing_beyond_the_batch() -> None:
    w = Workload(input_tokens=1000, output_tokens=11)
    e = _engine(batch=2)
    alone = predict_point(G, e, w, None, 1)
    assert alone.ttft_s == pytest.approx(1.0)
    four = predict_point(G, e, w, None, 4)  # 4 clients, 2 slots: each request waits one service
    assert four.bottleneck == "batch slots"
    assert four.ttft_s == pytest.approx(4 / 2 * 2.0 - 1.0)
    # a shared accelerator serialises prefills: 4 x 1 s of compute per cycle of 2 s; within the
    # batch the prediction is mean value analysis (1 s queue, 1 s decode): X(n) = n / (1 + R(n)),
    # R(n) = 1 + Q(n - 1): R = 1, 1.5, 2.2, 3.0625, so 4.0625 s a request and a TTFT of 3.0625 s,
    # a little above the bound's 3 s (a request finds the queue as it is, not only when it is full)
    shared = predict_point(G, _engine(shared=True, batch=8), w, None, 4)
    assert shared.bottleneck == "compute"
    assert shared.ttft_s == pytest.approx(3.0625)


def test_batch_slot_is_held_from_prefill_to_last_token_only() -> None:
    """The emulator (and vLLM) takes a request into a batch slot after its HTTP/front-end work:
    that fixed time is not slot time. 4 clients, 2 slots, 0.5 s outside + 1 s prefill + 1 s decode:
    slots cap throughput at 2 / 2 s, so a client's cycle is 4 s and its TTFT 3 s (0.5 s outside,
    1.5 s waiting, 1 s prefill); counting the 0.5 s as slot time would predict 4 s."""
    w = Workload(input_tokens=1000, output_tokens=11)
    e = Engine(Compute(tokens_per_s=1000.0, shared=False), max_batch=2, decode_tokens_per_s=10.0, fixed_s=0.5)
    p = predict_point(G, e, w, None, 4)
    assert p.bottleneck == "batch slots"
    assert p.ttft_waves_s == pytest.approx(3.0)
    # at random phases a slot is sometimes idle while a request is outside: mean value analysis of
    # 4 clients, 0.5 s outside, 2 slots of 2 s (by hand, exact fractions) gives X(4) = 1256/1265
    # requests/s, a TTFT of 951/314 s; beyond the batch the prediction is the mean of the two
    assert p.ttft_random_s == pytest.approx(951 / 314)
    assert p.ttft_s == pytest.approx((3.0 + 951 / 314) / 2)
    assert predict_point(G, e, w, None, 1).ttft_s == pytest.approx(1.5)


def test_tier_bandwidth_is_shared_at_concurrency() -> None:
    w = Workload(input_tokens=1024, output_tokens=1)
    tier = Tier("d", read_bw=1024 * 1024 / 0.5)
    p = predict_point(G, _engine(batch=64), w, tier, 8)
    assert p.bottleneck == "tier bandwidth"
    assert p.ttft_s == pytest.approx(8 * 0.5)


def test_closed_mva_matches_hand_computed_networks() -> None:
    # one queue of demand D = 1 s and a delay Z = 3 s, two customers: X(1) = 1 / (Z + D); the
    # second finds the first there D X(1) of the time, so R(2) = D (1 + D X(1))
    x = closed_mva(2, 3.0, [lambda j: 1.0])
    assert x == pytest.approx([1 / 4, 2 / (3 + 1 * (1 + 1 / 4))])
    # a resource k = 2 requests use at once (rate min(j, k) / D), no delay: saturated from k on
    assert closed_mva(5, 0.0, [lambda j: min(j, 2) / 2.0]) == pytest.approx([0.5, 1.0, 1.0, 1.0, 1.0])
    # 2 slots of 2 s, 0.5 s outside them (exact fractions by hand)
    assert closed_mva(4, 0.5, [lambda j: min(j, 2) / 2.0]) == pytest.approx([2 / 5, 4 / 5, 150 / 157, 1256 / 1265])
    assert closed_mva(0, 1.0, []) == []


def test_requests_beyond_the_batch_restore_in_waves() -> None:
    """Beyond the batch, requests enter their slots as slots free, and with equal work slots free
    together: min(c, batch) restores share the tier at once, every cycle. 4 clients, 2 slots, a
    tier that restores one request in 0.5 s at its full bandwidth, 1 s of decode: two restores
    together end after 1 s, a slot is held 2 s, X = 2 / 2 s, and the TTFT 4 / 1 - 1 = 3 s. At random
    phases (mean value analysis of the slots: X(2) = 2 / (1 + 0.5 (1 + 1 / 3)) = 1.2) it is
    4 / 1.2 - 1 = 7/3 s. The prediction is the mean of the two limits."""
    w = Workload(input_tokens=1024, output_tokens=11)  # 4 full chunks, no tail; 10 tokens at 10 tok/s
    tier = Tier("d", read_bw=1024 * 1024 / 0.5)
    p = predict_point(G, _engine(batch=2), w, tier, 4)
    assert p.ttft_waves_s == pytest.approx(3.0)
    assert p.ttft_random_s == pytest.approx(7 / 3)
    assert p.ttft_s == pytest.approx(8 / 3)
    assert p.requests_per_s == pytest.approx(2 / (1 / 1.2 + 1 / 1.0))
    # within the batch nothing realigns the clients: the random-phase prediction
    q = predict_point(G, _engine(batch=8), w, tier, 4)
    assert q.ttft_s == q.ttft_random_s
    # a tier whose readers add up (each stream at a quarter of its bandwidth, four at once): two
    # restores at once each take the 2 s of one alone, so both limits are the slots' own: 2 slots
    # held 2 s each (one output token: no decode), X = 1, TTFT = 4 / 1 = 4 s
    streams = Tier("s", read_bw=4 * 1024 * 1024 / 2.0, stream_bw=1024 * 1024 / 2.0, read_streams=4)
    r = predict_point(G, _engine(batch=2), Workload(input_tokens=1024, output_tokens=1), streams, 4)
    assert r.ttft_waves_s == pytest.approx(4 / 2 * 2.0) and r.ttft_random_s == pytest.approx(4.0)


def test_break_even_bandwidth() -> None:
    c = Compute(tokens_per_s=1000.0)
    assert break_even_bandwidth(G, c, 1000) == pytest.approx(1_024_000 / 1.0)
    assert break_even_bandwidth(G, c, 1024, per_chunk_s=0.1, chunk_size=256) == pytest.approx(1024 * 1024 / 0.624)
    assert break_even_bandwidth(G, c, 1024, per_chunk_s=1.0, chunk_size=256) is None


def test_bandwidth_for_reduction_meets_the_target() -> None:
    w = Workload(input_tokens=1024, output_tokens=1)
    e = _engine(batch=64)
    base = predict_point(G, e, w, Tier("b", 1e6), 1).ttft_s
    bw = bandwidth_for_reduction(G, e, w, baseline_ttft_s=base, reduction=0.25, concurrency=1,
                                 template=Tier("c", 1e9))
    assert bw is not None
    assert predict_point(G, e, w, Tier("c", bw), 1).ttft_s == pytest.approx(0.75 * base, rel=1e-3)
    assert predict_point(G, e, w, Tier("c", bw * 0.98), 1).ttft_s > 0.75 * base
    # unreachable: the per-chunk overhead alone is above the target
    assert bandwidth_for_reduction(G, e, w, baseline_ttft_s=0.1, reduction=0.25, concurrency=1,
                                   template=Tier("c", 1e9, per_chunk_s=1.0)) is None


def test_compute_needs_exactly_one_rate() -> None:
    with pytest.raises(ValueError):
        Compute()
    with pytest.raises(ValueError):
        Compute(flops_per_s=1.0, tokens_per_s=1.0)
    with pytest.raises(ValueError):
        Compute(tokens_per_s=0.0)


def test_single_threaded_front_end_is_a_shared_resource() -> None:
    w = Workload(input_tokens=1000, output_tokens=1)
    e = Engine(Compute(tokens_per_s=1e9, shared=False), max_batch=64, decode_tokens_per_s=10.0, frontend_s=0.1)
    assert predict_point(G, e, w, None, 1).ttft_s == pytest.approx(0.1 + 1e-6)
    p = predict_point(G, e, w, None, 8)  # eight requests take turns at 0.1 s of front-end work
    assert p.bottleneck == "front end"
    assert p.ttft_s == pytest.approx(0.8)


def test_lookup_work_is_held_inside_the_batch_slot() -> None:
    """The prefix lookup (hashing the prompt's chunks) runs after the request took its slot, so
    beyond the batch it lengthens every request ahead in the queue; parsing and tokenizing run
    before. 4 clients, 2 slots, 1 s prefill + 1 s decode: 0.5 s of lookup in the slot makes the
    slot time 2.5 s and the TTFT 4 / 2 x 2.5 - 1 = 4 s; the same 0.5 s before the slot leaves the
    slots' 2 s and gives 3 s (the test above). Alone, both are 1.5 s. The single-threaded front end
    counts both."""
    w = Workload(input_tokens=1000, output_tokens=11)
    compute = Compute(tokens_per_s=1000.0, shared=False)
    inside = Engine(compute, max_batch=2, decode_tokens_per_s=10.0, slot_s=0.5)
    before = Engine(compute, max_batch=2, decode_tokens_per_s=10.0, frontend_s=0.5)
    assert predict_point(G, inside, w, None, 1).ttft_s == pytest.approx(1.5)
    assert predict_point(G, before, w, None, 1).ttft_s == pytest.approx(1.5)
    p = predict_point(G, inside, w, None, 4)
    assert p.bottleneck == "batch slots"
    assert p.ttft_s == pytest.approx(4.0)
    assert predict_point(G, before, w, None, 4).ttft_waves_s == pytest.approx(3.0)
    assert predict_point(G, before, w, None, 4).ttft_random_s == pytest.approx(951 / 314)  # as above
    busy = Engine(Compute(tokens_per_s=1e9, shared=False), max_batch=64, decode_tokens_per_s=10.0,
                  frontend_s=0.06, slot_s=0.04)
    q = predict_point(G, busy, Workload(input_tokens=1000, output_tokens=1), None, 8)
    assert q.bottleneck == "front end"
    assert q.ttft_s == pytest.approx(8 * (0.06 + 0.04))


def test_host_cores_shared_by_reads_engine_and_client() -> None:
    """A tier whose reads run on the host's CPU (memory copies and CRCs) shares the cores with the
    engine's and the client's per-request work: 8 clients, 0.3 s of tier time per request, and
    0.8 CPU-s per request in all on 2 cores: the host's 0.4 s per request binds, 0.2 CPU-s (0.1 s)
    does not. Left at 0 (a real engine's DMA reads), nothing changes."""
    w = Workload(input_tokens=1024, output_tokens=1)
    tier = Tier("d", read_bw=1024 * 1024 / 0.3)  # 0.3 s of tier time per request
    base = _engine(batch=64)
    plain = predict_point(G, base, w, tier, 8)
    assert plain.bottleneck == "tier bandwidth" and plain.ttft_s == pytest.approx(8 * 0.3)
    busy = Engine(base.compute, base.max_batch, base.decode_tokens_per_s, host_cpu_s=0.8, host_cores=2.0)
    p = predict_point(G, busy, w, tier, 8)
    assert p.bottleneck == "host CPU"
    assert p.ttft_s == pytest.approx(8 * 0.8 / 2.0)
    light = Engine(base.compute, base.max_batch, base.decode_tokens_per_s, host_cpu_s=0.2, host_cores=2.0)
    assert predict_point(G, light, w, tier, 8).ttft_s == pytest.approx(plain.ttft_s)  # 0.1 s < 0.3 s
    # even alone, a request is no faster than its own CPU work spread over the cores
    assert predict_point(G, busy, w, tier, 1).ttft_s == pytest.approx(0.4)
    assert predict_point(G, light, w, tier, 1).ttft_s == pytest.approx(predict_point(G, base, w, tier, 1).ttft_s)
    with pytest.raises(ValueError):
        Engine(base.compute, 1, 1.0, host_cores=0)


def test_waits_for_a_busy_front_end_thread() -> None:
    """The emulator runs every request's parse, lookup, HTTP and token writes on one event loop, and
    each step of a request's path waits for it: at utilisation rho a step waits rho / (1 - rho) x
    the mean residual of the work in progress. 1 client, 1 s of compute, 10 ms parse + 10 ms
    lookup on the loop, 2 waits before the first token (plus the arrival's): the fixed point of
    x = 1 / (1.02 + 3 w(x)), w = rho / (1 - rho) x 5 ms, rho = 0.02 x, solved here by iteration."""
    w1 = Workload(input_tokens=1000, output_tokens=1)
    compute = Compute(tokens_per_s=1000.0, shared=False)
    e = Engine(compute, max_batch=64, decode_tokens_per_s=10.0, frontend_s=0.01, slot_s=0.01,
               loop_waits_first=2)
    x = 1.0
    for _ in range(200):
        rho = 0.02 * x
        x = 1 / (1.02 + 3 * rho / (1 - rho) * 0.005)
    p = predict_point(G, e, w1, None, 1)
    assert p.requests_per_s == pytest.approx(x, rel=1e-6)
    assert p.ttft_s == pytest.approx(1 / x, rel=1e-6)
    # no waits modelled: the plain bounds
    plain = Engine(compute, max_batch=64, decode_tokens_per_s=10.0, frontend_s=0.01, slot_s=0.01)
    assert predict_point(G, plain, w1, None, 1).ttft_s == pytest.approx(1.02)
    # beyond the batch the waits in the slot lengthen the queue: 8 clients, 2 slots, 50% busier loop
    w = Workload(input_tokens=100, output_tokens=11)  # 0.1 s compute, 1 s decode
    busy = Engine(compute, max_batch=2, decode_tokens_per_s=10.0, frontend_s=0.05, slot_s=0.05,
                  loop_other_s=0.1, loop_waits_first=3, loop_waits_last=1)
    q = predict_point(G, busy, w, None, 8)
    rho = q.requests_per_s * 0.2
    wait = rho / (1 - rho) * (0.05 ** 2 * 2) / (2 * 0.2)
    assert q.bottleneck == "batch slots"
    assert q.requests_per_s == pytest.approx(2 / (0.05 + 0.1 + 1.0 + 4 * wait), rel=1e-6)
    assert q.ttft_s == pytest.approx(8 / q.requests_per_s - (1.0 + wait), rel=1e-6)
    assert q.ttft_s > predict_point(G, Engine(compute, max_batch=2, decode_tokens_per_s=10.0, frontend_s=0.05,
                                                slot_s=0.05, loop_other_s=0.1), w, None, 8).ttft_s
    with pytest.raises(ValueError):
        Engine(compute, 1, 1.0, loop_waits_first=-1)


def test_a_prediction_recorded_before_the_two_limits_reads_back() -> None:
    """Campaigns keep their estimate as a dict (``as_dict``); one recorded before the random-phase
    and waves limits existed has no such keys and must still read back, with the limits unknown.
    Any other key missing is an error, never a silently made-up figure."""
    from harness.estimate.plan import point_prediction

    w = Workload(input_tokens=1024, output_tokens=11)
    p = predict_point(G, _engine(batch=2), w, Tier("d", read_bw=1024 * 1024 / 0.5), 4)
    assert point_prediction(p.as_dict()) == p
    old = {k: v for k, v in p.as_dict().items() if k not in ("ttft_random_s", "ttft_waves_s")}
    back = point_prediction(old)
    assert (back.ttft_s, back.ttft_random_s, back.ttft_waves_s) == (p.ttft_s, None, None)
    del old["ttft_s"]
    with pytest.raises(KeyError):
        point_prediction(old)

"""The time model: restore, recompute, TTFT per arm and concurrency, break-even bandwidth.

Rules (derived in ``docs/estimator.md``):

* restore (s) = restored bytes / tier read bandwidth (B/s) + per-chunk overhead (s) x chunks /
  read parallelism. A tier's bandwidth is an aggregate (fio, many jobs): it is shared by the
  requests restoring at once.
* recompute (s) = prefill FLOPs / (peak FLOP/s x devices x efficiency), or tokens / token rate
  when compute is given as a rate (the emulator, or a rate calibrated from a recompute arm).
* one request alone: TTFT0 = restore + recompute of the tokens no tier served + fixed overhead.
* a closed loop of ``c`` clients (no think time) is a closed queueing network: a request spends
  the fixed overhead and the front end's parsing outside the batch slots, then holds a slot from
  its prefix lookup to its last token, sharing the tier (and a real accelerator) with the requests
  in the other slots. How much they overlap depends on the requests' phases; two limits:
  random phases (exact mean value analysis, ``closed_mva``, with the slots as one flow-equivalent
  server) and waves (beyond the batch, requests enter as slots free and slots free together: k =
  min(c, max_batch) restores at once, every cycle, under the asymptotic bounds of every shared
  resource: slots, tier bandwidth and readers, shared compute, the front end's thread, the host's
  cores). Within the batch the prediction is the first; beyond it, the mean of the two. By the
  response time law TTFT(c) = c / X(c) - decode time; p50 equals the mean for equal requests.
* break-even bandwidth: the read bandwidth at which restoring a prefix takes as long as
  recomputing it: B* = KV bytes / (recompute time - per-chunk overhead term).

Pure functions over plain values; no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Optional

from harness.estimate.geometry import ModelGeometry, prefill_flops


@dataclass(frozen=True)
class Compute:
    """How fast a prefill runs. Give ``flops_per_s`` (peak x devices x efficiency) or
    ``tokens_per_s``. ``shared``: the accelerator's throughput is shared by every request in
    flight (a real engine); False: each request gets the whole rate (the emulator's sleep)."""

    flops_per_s: Optional[float] = None
    tokens_per_s: Optional[float] = None
    shared: bool = True

    def __post_init__(self) -> None:
        if (self.flops_per_s is None) == (self.tokens_per_s is None):
            raise ValueError("give exactly one of flops_per_s and tokens_per_s")
        rate = self.flops_per_s if self.flops_per_s is not None else self.tokens_per_s
        if rate is None or rate <= 0:
            raise ValueError(f"compute rate must be > 0, got {rate}")

    def seconds(self, geom: ModelGeometry, tokens: int, *, prefix: int = 0) -> float:
        """Seconds to prefill ``tokens`` new tokens after ``prefix`` cached ones."""
        if tokens <= 0:
            return 0.0
        if self.tokens_per_s is not None:
            return tokens / self.tokens_per_s
        assert self.flops_per_s is not None
        return prefill_flops(geom, tokens, prefix=prefix) / self.flops_per_s


@dataclass(frozen=True)
class Tier:
    """A KV tier as the time model sees it.

    ``read_bw``: aggregate read bandwidth (B/s), e.g. fio seq-read. ``per_chunk_s``: fixed cost of
    one chunk read (lookup, open, syscall, device latency). ``stream_bw``: the bandwidth one
    request's sequential reads reach (B/s; default ``read_bw``). ``read_streams``: requests that
    can read at once (the emulator: 4 reader threads; None: unbounded)."""

    name: str
    read_bw: float
    per_chunk_s: float = 0.0
    stream_bw: Optional[float] = None
    read_streams: Optional[int] = None

    def __post_init__(self) -> None:
        if self.read_bw <= 0:
            raise ValueError(f"tier {self.name}: read bandwidth must be > 0, got {self.read_bw}")

    def restore_seconds(self, nbytes: float, chunks: int, *, parallelism: int = 1) -> float:
        """One request alone: bytes at its stream bandwidth plus the per-chunk overhead."""
        bw = min(self.read_bw, self.stream_bw or self.read_bw)
        return nbytes / bw + self.per_chunk_s * chunks / max(1, parallelism)


@dataclass(frozen=True)
class Workload:
    """One request shape: ``input_tokens`` of prompt, ``output_tokens`` generated, and the share
    a tier can serve (full chunks of a context that was populated: ``hit_tokens``)."""

    input_tokens: int
    output_tokens: int
    chunk_size: int = 256
    hit_ratio: float = 1.0  # share of requests whose context is in the tier

    @property
    def hit_tokens(self) -> int:
        return (self.input_tokens // self.chunk_size) * self.chunk_size

    @property
    def chunks(self) -> int:
        return self.input_tokens // self.chunk_size


@dataclass(frozen=True)
class Engine:
    """The serving side: compute, batch slots, decode rate, fixed per-request overhead (s), and the
    per-request work of a single-threaded front end, which requests take turns at: ``frontend_s``
    before the request gets a batch slot (request parsing, tokenization) and ``slot_s`` once it
    holds one (the prefix lookup: hashing the prompt's chunks, as the emulator does after taking
    its slot and vLLM's scheduler does when it schedules the request).

    ``host_cpu_s``: CPU seconds one request costs the host's cores, shared by every request: the
    tier's read path where it runs on the CPU (copies, checksums), the engine's own per-request
    work and a load client on the same host; ``host_cores``: the cores they share. 0 (the default)
    leaves the host out: a real engine's tier reads are DMA, its host work small next to them. The
    emulator on a small machine is another matter: its tmpfs "disk" is memory copies and CRCs on
    the very cores that run its event loop and the load client."""

    compute: Compute
    max_batch: int
    decode_tokens_per_s: float
    fixed_s: float = 0.0
    frontend_s: float = 0.0
    slot_s: float = 0.0
    host_cpu_s: float = 0.0
    host_cores: float = 1.0
    # The front end's thread is one queue: ``loop_other_s`` is the rest of a request's work on it
    # (HTTP, writing its tokens), spread over the request's life; ``loop_waits_first`` and
    # ``loop_waits_last`` count the steps of a request's path in its slot that wait for that thread
    # (before its first token: e.g. the slot grant, the restore's hand-back, the end of the prefill;
    # after it: the last token). 0 (the default): no queueing at the thread is modelled.
    loop_other_s: float = 0.0
    loop_waits_first: int = 0
    loop_waits_last: int = 0

    def __post_init__(self) -> None:
        if self.host_cores <= 0:
            raise ValueError(f"host_cores must be > 0, got {self.host_cores}")
        if min(self.loop_other_s, self.loop_waits_first, self.loop_waits_last) < 0:
            raise ValueError("loop_other_s and the loop waits must be >= 0")

    @property
    def loop_s(self) -> float:
        """All of a request's work on the front end's single thread."""
        return self.frontend_s + self.slot_s + self.loop_other_s

    def loop_wait(self, requests_per_s: float) -> float:
        """Mean wait of one step for the front end's thread at a throughput (M/G/1: utilisation
        rho = X x loop_s, wait = rho / (1 - rho) x the mean residual of the work in progress; the
        parse and the lookup are the long pieces, the rest is many short ones). 0 when no waits
        are modelled."""
        if not (self.loop_waits_first or self.loop_waits_last) or self.loop_s <= 0:
            return 0.0
        rho = min(0.95, requests_per_s * self.loop_s)
        residual = (self.frontend_s ** 2 + self.slot_s ** 2) / (2 * self.loop_s)
        return rho / (1 - rho) * residual

    def decode_seconds(self, output_tokens: int) -> float:
        # the first token ends the prefill; the others follow at the decode rate
        return max(0, output_tokens - 1) / self.decode_tokens_per_s


@dataclass(frozen=True)
class PointPrediction:
    concurrency: int
    ttft_s: float
    ttft_alone_s: float
    restore_s: float
    compute_s: float
    request_s: float
    requests_per_s: float
    output_tokens_per_s: float
    bottleneck: str
    # the two limits the prediction lies between beyond the batch (section 4 of docs/estimator.md):
    # requests at random phases (mean value analysis) and requests entering the slots in waves
    ttft_random_s: Optional[float] = None
    ttft_waves_s: Optional[float] = None

    def as_dict(self) -> dict[str, object]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


RateFn = Callable[[int], float]


def closed_mva(customers: int, think_s: float, stations: Sequence[RateFn]) -> list[float]:
    """Throughput X(n), n = 1..``customers``, of a closed network: a delay of ``think_s`` seconds
    (time no other request can lengthen) and queueing stations whose service rate (requests/s)
    depends on how many requests are there (``rate(j)``, j >= 1): exact mean value analysis with
    load-dependent stations (Reiser and Lavenberg). A single server of demand D is ``lambda j: 1 /
    D``; a resource shared by up to k requests at once, ``lambda j: min(j, k) / D``."""
    if customers < 1:
        return []
    marginals = [[1.0] + [0.0] * customers for _ in stations]  # P(j at station | n - 1 customers)
    out: list[float] = []
    for n in range(1, customers + 1):
        residence = [sum(j / rate(j) * p[j - 1] for j in range(1, n + 1)) for rate, p in zip(stations, marginals)]
        x = n / (think_s + sum(residence))
        for rate, p in zip(stations, marginals):
            nxt = [0.0] * (customers + 1)
            for j in range(1, n + 1):
                nxt[j] = x / rate(j) * p[j - 1]
            nxt[0] = max(0.0, 1.0 - sum(nxt[1:]))
            p[:] = nxt
        out.append(x)
    return out


def predict_point(geom: ModelGeometry, engine: Engine, work: Workload, tier: Optional[Tier],
                  concurrency: int) -> PointPrediction:
    """Predicted TTFT and throughput of one arm at one concurrency (``tier`` None: recompute).

    Two limits of the same closed network (docs/estimator.md, section 4): requests at random phases
    (exact mean value analysis: a request finds the others spread over their cycle, so a restore
    shares the tier with the average number restoring), and requests in waves (beyond the batch,
    requests enter their slots when slots free, and slots free together when their requests
    entered together with equal work: ``min(c, max_batch)`` restores and prefills at once, every
    cycle). At or below the batch nothing realigns the clients and the prediction is the first;
    beyond it, the mean of the two (the queue realigns the waves, jitter spreads them)."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    hit = work.hit_ratio if tier is not None else 0.0
    restored_bytes = geom.bytes_for_context(work.hit_tokens) if tier is not None else 0
    restore_hit = tier.restore_seconds(restored_bytes, work.chunks) if tier is not None else 0.0
    compute_hit = engine.compute.seconds(geom, work.input_tokens - work.hit_tokens, prefix=work.hit_tokens)
    compute_miss = engine.compute.seconds(geom, work.input_tokens)
    m = _ClosedLoop(
        engine=engine, tier=tier, concurrency=concurrency,
        restore_s=hit * restore_hit,
        compute_s=hit * compute_hit + (1 - hit) * compute_miss,
        decode0=engine.decode_seconds(work.output_tokens),
        chunk_s=hit * tier.per_chunk_s * work.chunks if tier is not None else 0.0,  # latency, not shared
        mean_bytes=hit * restored_bytes,
    )
    k = min(concurrency, engine.max_batch)
    x_random = m.fixed_point(m.random_phases)
    x_waves = m.fixed_point(lambda x: m.waves(x, k)[0])
    _, bottleneck, _ = m.waves(x_random, 1)
    ttft_random = m.ttft_at(x_random)
    ttft_waves = max(m.waves(x_waves, k)[2], concurrency / x_waves - m.decode0 - m.waits(x_waves)[2])
    ttft = ttft_random if concurrency <= engine.max_batch else (ttft_random + ttft_waves) / 2
    x = x_random if concurrency <= engine.max_batch else 2 / (1 / x_random + 1 / x_waves)
    return PointPrediction(concurrency, ttft, m.alone_at(0.0), m.restore_s, m.compute_s, concurrency / x, x,
                           x * work.output_tokens, bottleneck, ttft_random, ttft_waves)


@dataclass(frozen=True)
class _ClosedLoop:
    """One arm at one concurrency as the closed network ``predict_point`` solves: the mean time a
    request spends restoring (``restore_s``), computing its prefill (``compute_s``) and decoding
    (``decode0``), its per-chunk latency (``chunk_s``) and the bytes it restores (``mean_bytes``)."""

    engine: Engine
    tier: Optional[Tier]
    concurrency: int
    restore_s: float
    compute_s: float
    decode0: float
    chunk_s: float
    mean_bytes: float

    def tier_rate(self, j: int) -> float:
        """Restores per second the tier completes with ``j`` requests restoring."""
        tier = self.tier
        assert tier is not None
        streams = min(j, tier.read_streams or j)
        return min(streams * (tier.stream_bw or tier.read_bw), tier.read_bw) / self.mean_bytes

    def waits(self, x: float) -> tuple[float, float, float]:
        """(front end's wait per step, TTFT's share of the waits, the decode's) at ``x`` requests/s."""
        engine = self.engine
        w = engine.loop_wait(x)
        return w, w * (1 + engine.loop_waits_first) if w else 0.0, w * engine.loop_waits_last

    def caps(self) -> dict[str, float]:
        """Throughput caps of the resources every request takes its turn at, whatever the phases."""
        engine = self.engine
        out: dict[str, float] = {}
        if engine.loop_s:
            out["front end"] = 1.0 / engine.loop_s
        if engine.host_cpu_s:
            out["host CPU"] = engine.host_cores / engine.host_cpu_s
        return out

    def random_phases(self, x: float) -> float:
        """Throughput with the front end's waits at ``x`` requests/s: the batch slots as one
        flow-equivalent server (the network inside them solved for 1..max_batch requests), the
        clients' time outside them as the delay."""
        engine, compute_s = self.engine, self.compute_s
        w, ttft_w, decode_w = self.waits(x)
        stations: list[RateFn] = []
        inside = engine.slot_s + self.chunk_s + self.decode0 + decode_w + ttft_w - w
        if self.tier is not None and self.mean_bytes:
            stations.append(self.tier_rate)  # the bytes; their per-chunk latency is in ``inside``
        if engine.compute.shared and compute_s:
            stations.append(lambda j: 1.0 / compute_s)
        else:
            inside += compute_s
        # never more requests in the slots than clients: the network inside them up to min(batch, c)
        slots = closed_mva(min(engine.max_batch, self.concurrency), max(0.0, inside), stations) if stations else []

        def slot_rate(j: int) -> float:
            k = min(j, engine.max_batch)
            return slots[k - 1] if slots else k / max(inside, 1e-12)

        outside = engine.fixed_s + engine.frontend_s + w
        return min([closed_mva(self.concurrency, outside, [slot_rate])[-1], *self.caps().values()])

    def waves(self, x: float, k: int) -> tuple[float, str, float]:
        """(throughput, bottleneck, TTFT alone) with ``k`` requests restoring and prefilling at
        once, each at its share of the tier and the accelerator (asymptotic bounds; k = 1: the
        plain bounds, whose largest demand names the bottleneck)."""
        engine, tier, compute_s, decode0 = self.engine, self.tier, self.compute_s, self.decode0
        w, ttft_w, decode_w = self.waits(x)
        restore_k = self.restore_s
        if tier is not None and self.mean_bytes:
            restore_k += k / self.tier_rate(k) - 1 / self.tier_rate(1)  # k restores end together
        compute_k = compute_s * (k if engine.compute.shared else 1)
        alone = engine.fixed_s + engine.frontend_s + engine.slot_s + restore_k + compute_k + ttft_w
        in_slot = engine.slot_s + restore_k + compute_k + decode0 + ttft_w - w + decode_w
        demands: dict[str, float] = {"clients": (alone + decode0 + decode_w) / self.concurrency,
                                     "batch slots": in_slot / engine.max_batch}
        if tier is not None and self.mean_bytes:
            demands["tier bandwidth"] = self.mean_bytes / tier.read_bw
            if tier.read_streams:
                demands["tier readers"] = self.restore_s / tier.read_streams
        if engine.compute.shared and compute_s:
            demands["compute"] = compute_s
        demands.update({name: 1.0 / cap for name, cap in self.caps().items()})
        name = max(demands, key=lambda n: demands[n])
        return 1.0 / demands[name], name, alone

    def fixed_point(self, f: Callable[[float], float]) -> float:
        """x = f(x): f falls as x rises (the front end's waits lengthen every path), so bisect."""
        x = f(0.0)
        if not self.engine.loop_wait(x):
            return x
        lo, hi = 0.0, x
        for _ in range(60):
            mid = (lo + hi) / 2
            if mid < f(mid):
                lo = mid
            else:
                hi = mid
        return lo

    def alone_at(self, x: float) -> float:
        """TTFT of a request that finds no other ahead of it, with the front end's waits at ``x``."""
        e = self.engine
        return e.fixed_s + e.frontend_s + e.slot_s + self.restore_s + self.compute_s + self.waits(x)[1]

    def ttft_at(self, x: float) -> float:
        return max(self.alone_at(x), self.concurrency / x - self.decode0 - self.waits(x)[2])


def break_even_bandwidth(geom: ModelGeometry, compute: Compute, tokens: int, *, per_chunk_s: float = 0.0,
                         chunk_size: int = 256) -> Optional[float]:
    """Read bandwidth (B/s) at which restoring the KV of a ``tokens`` prefix takes as long as
    recomputing it; None when the per-chunk overhead alone already exceeds the recompute time."""
    recompute = compute.seconds(geom, tokens)
    budget = recompute - per_chunk_s * (tokens // chunk_size)
    if budget <= 0:
        return None
    return geom.bytes_for_context(tokens) / budget


def bandwidth_for_reduction(geom: ModelGeometry, engine: Engine, work: Workload, *, baseline_ttft_s: float,
                            reduction: float, concurrency: int, template: Tier,
                            low: float = 1e6, high: float = 1e14) -> Optional[float]:
    """Smallest aggregate read bandwidth (B/s) of a tier shaped like ``template`` (its per-chunk
    overhead and readers kept) at which the predicted TTFT is at most (1 - reduction) x the
    baseline's; None when no bandwidth up to ``high`` reaches it (other terms dominate)."""
    target = (1.0 - reduction) * baseline_ttft_s

    def ttft(bw: float) -> float:
        t = Tier(template.name, bw, template.per_chunk_s,
                 None if template.stream_bw is None else bw * template.stream_bw / template.read_bw,
                 template.read_streams)
        return predict_point(geom, engine, work, t, concurrency).ttft_s

    if ttft(high) > target:
        return None
    if ttft(low) <= target:
        return low
    lo, hi = math.log(low), math.log(high)
    for _ in range(80):
        mid = (lo + hi) / 2
        if ttft(math.exp(mid)) <= target:
            hi = mid
        else:
            lo = mid
    return math.exp(hi)

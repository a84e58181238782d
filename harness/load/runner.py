"""The load runner: closed or open loop over a workload, records as requests complete, a summary.

* Closed loop (no ``request_rate``): ``concurrency`` workers, each sends its next request when its
  previous one completed. ``queue_ms`` is the time from taking the request to writing it
  (connection set-up); no request waits for a slot, by construction.
* Open loop (``request_rate`` set, or a trace with timestamps, replayed as given unless a rate is
  set): arrivals are scheduled up front
  (Poisson, or gamma with ``burstiness`` as vLLM does; a linear rate ramp over ``ramp_up_s``) and
  each request is due at its arrival time whatever happens to the others, so a slow server cannot
  slow the schedule (no coordinated omission). ``concurrency`` caps requests in flight; the time a
  request spends waiting for a slot or behind schedule is its ``queue_ms`` = send - due.
* Sessions (``sessions`` / ``agent`` workloads, ``harness.load.sessions``): each turn is built when
  the previous answer has arrived and is due when the think time after it ends. Closed loop:
  ``concurrency`` users, each plays one session to its end (think times included) before taking
  the next. Open loop: sessions arrive on the rate's schedule, ``concurrency`` caps sessions in
  progress, and the first turn's wait for a slot is its ``queue_ms``. TTFT is always from the send.
* Warm-up requests (the workload's ``warmup`` list) run first, closed loop, into ``warmup.jsonl``;
  they are not measured. ``duration`` starts after them.
* Bounds: the workload's requests, ``num_requests`` (cycling the list with new ids when larger),
  or ``duration_s`` (cycling until the time is up; requests in flight complete).
* SIGINT/SIGTERM (or ``stop`` set by the caller): no new request is sent, requests in flight are
  cancelled and recorded as ``cancelled`` with what they had received, the summary is written
  with ``kvgate.interrupted = true``.
"""

from __future__ import annotations

import asyncio
import bisect
import gc
import itertools
import math
import random
import signal
import threading
import time
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter_ns
from typing import Any, Optional, Union

from harness import __version__
from harness.load.client import TOKEN_RULE, ClientOptions, RequestResult, StreamClient, load_api_key
from harness.load.errors import LoadInputError
from harness.load.records import RecordWriter, make_record
from harness.load.sessions import Session, SessionPlan
from harness.load.spec import RequestSpec
from harness.load.summary import DEFAULT_PERCENTILES, Summary
from harness.load.workloads import LazyRequests, RequestRecipe, Workload, build_workload
from harness.progress import Progress

RECORDS_FILE = "records.jsonl"
WARMUP_FILE = "warmup.jsonl"
SUMMARY_FILE = "summary.json"


@dataclass
class LoadConfig:
    """Everything a load run needs. Secrets are not held here: the key is read from
    ``api_key_env`` or ``api_key_file`` when the run starts."""

    endpoint: str
    model: str
    api: str = "completions"
    workload: str = "random"
    workload_params: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    concurrency: int = 1
    request_rate: Optional[float] = None  # None or inf: closed loop
    burstiness: float = 1.0
    num_requests: Optional[int] = None
    duration_s: Optional[float] = None
    ramp_up_s: float = 0.0
    run_warmup: bool = True
    timeout_s: float = 600.0
    idle_timeout_s: Optional[float] = None
    ignore_eos: bool = True
    continuous_usage: bool = False
    keep_text: bool = False  # record each response's text (the gates' output identity check)
    extra_body: dict[str, Any] = field(default_factory=dict)
    api_key_env: Optional[str] = "OPENAI_API_KEY"
    api_key_file: Optional[str] = None
    ca_file: Optional[str] = None
    insecure_tls: bool = False
    goodput: dict[str, float] = field(default_factory=dict)
    prompt_format: str = "text"  # "token_ids": completions prompts as token ids (real engines; client.py)
    percentiles: tuple[float, ...] = DEFAULT_PERCENTILES
    pre_connect: bool = True
    progress: bool = True
    label: Optional[str] = None

    def __post_init__(self) -> None:
        def bad(name: str, value: Any, expected: str) -> LoadInputError:
            return LoadInputError(f"load config: {name} = {value!r}: expected {expected}")

        if self.api not in ("completions", "chat"):
            raise bad("api", self.api, "'completions' or 'chat'")
        if not isinstance(self.concurrency, int) or self.concurrency < 1:
            raise bad("concurrency", self.concurrency, "an integer >= 1")
        if self.request_rate is not None and math.isinf(self.request_rate):
            self.request_rate = None
        if self.request_rate is not None and not self.request_rate > 0:
            raise bad("request_rate", self.request_rate, "a rate > 0 requests/s (or none for closed loop)")
        if not self.burstiness > 0:
            raise bad("burstiness", self.burstiness, "> 0 (1 = Poisson)")
        if self.num_requests is not None and self.num_requests < 1:
            raise bad("num_requests", self.num_requests, "an integer >= 1")
        if self.duration_s is not None and not self.duration_s > 0:
            raise bad("duration_s", self.duration_s, "seconds > 0")
        if self.ramp_up_s < 0:
            raise bad("ramp_up_s", self.ramp_up_s, "seconds >= 0")
        if not self.timeout_s > 0:
            raise bad("timeout_s", self.timeout_s, "seconds > 0")
        for k, v in self.goodput.items():
            if k not in ("ttft", "tpot", "e2el") or not isinstance(v, (int, float)) or v < 0:
                raise bad(f"goodput[{k}]", v, "ttft/tpot/e2el SLOs in ms >= 0")
        for p in self.percentiles:
            if not 0 < p < 100:
                raise bad("percentiles", p, "values between 0 and 100")

    def client_options(self) -> ClientOptions:
        return ClientOptions(
            model=self.model, api=self.api, timeout_s=self.timeout_s, idle_timeout_s=self.idle_timeout_s,
            ignore_eos=self.ignore_eos, continuous_usage=self.continuous_usage, extra_body=dict(self.extra_body),
            keep_text=self.keep_text,
            api_key=load_api_key(self.api_key_env, self.api_key_file), ca_file=self.ca_file,
            insecure_tls=self.insecure_tls, prompt_format=self.prompt_format)


def arrival_offsets(n: int, rate: float, *, burstiness: float = 1.0, ramp_up_s: float = 0.0,
                    seed: int = 0) -> list[float]:
    """Arrival times (seconds from the start) of ``n`` requests: gamma inter-arrivals with mean
    1/rate and shape ``burstiness`` (1 = Poisson); during ``ramp_up_s`` the rate rises linearly
    from 10% to ``rate``."""
    rng = random.Random(seed ^ 0x5EED)
    out: list[float] = []
    t = 0.0
    for _ in range(n):
        r = rate
        if ramp_up_s > 0 and t < ramp_up_s:
            r = rate * max(0.1, t / ramp_up_s)
        t += rng.gammavariate(burstiness, 1.0 / (r * burstiness))
        out.append(t)
    return out


class _Live:
    """Counters for the progress line."""

    def __init__(self, progress: Progress) -> None:
        self.p = progress
        self.ok = 0
        self.failed = 0
        self.tokens = 0
        self.ttfts: list[float] = []
        self.t0 = time.monotonic()
        self.last = 0.0

    def add(self, res: RequestResult) -> None:
        if res.ok:
            self.ok += 1
            self.tokens += res.output_tokens
            if res.ttft_ms is not None:
                bisect.insort(self.ttfts, res.ttft_ms)
        elif res.status == "error":
            self.failed += 1
        self.p.done += 1
        now = time.monotonic()
        if now - self.last >= 1.0:
            self.last = now
            self.p.status(self.text())

    def text(self) -> str:
        el = max(1e-9, time.monotonic() - self.t0)
        p50 = self.ttfts[len(self.ttfts) // 2] if self.ttfts else float("nan")
        return (f"ok {self.ok} failed {self.failed} | {self.ok / el:.1f} req/s "
                f"{self.tokens / el:.0f} tok/s | TTFT p50 {p50:.1f} ms")


class _Run:
    def __init__(self, cfg: LoadConfig, client: StreamClient, stop: asyncio.Event) -> None:
        self.cfg = cfg
        self.client = client
        self.stop = stop
        self.inflight: set[asyncio.Task[RequestResult]] = set()
        self.measured: list[dict[str, Any]] = []
        self.issued = 0
        self.sessions_started = self.sessions_completed = self.sessions_aborted = 0
        self.cpu_s = 0.0  # this process's CPU seconds over the measured window

    async def _one(self, spec: RequestSpec, phase: str, writer: RecordWriter, live: Optional[_Live],
                   t_ready: int, scheduled_ns: Optional[int], build_ms: Optional[float] = None) -> RequestResult:
        task = asyncio.ensure_future(self.client.request(spec))
        self.inflight.add(task)
        try:
            res = await task
        except asyncio.CancelledError:
            partial: Optional[RequestResult] = self.client.partial.pop(spec.request_id, None)
            res = partial or RequestResult(
                spec.request_id, "cancelled", t_ready, perf_counter_ns(), error_kind="cancelled",
                error="stopped by the runner", input_tokens=spec.input_tokens)
        finally:
            self.inflight.discard(task)
        ref = scheduled_ns if scheduled_ns is not None else t_ready
        queue_ms = max(0.0, (res.start_ns - ref) / 1e6)
        rec = make_record(res, spec, phase=phase, queue_ms=queue_ms, scheduled_ns=scheduled_ns, build_ms=build_ms)
        if not self.cfg.keep_text:
            rec.pop("text", None)  # kept by the client only to feed sessions their answers
        writer.write(rec)
        if phase == "measure":
            self.measured.append(_slim(rec))
        if live is not None:
            live.add(res)
        return res

    async def _wait_stop(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; True if stop was requested meanwhile."""
        if seconds <= 0:
            return self.stop.is_set()
        try:
            await asyncio.wait_for(self.stop.wait(), seconds)
        except asyncio.TimeoutError:
            return False
        return True

    async def _ready(self, item: _Item) -> tuple[RequestSpec, Optional[float]]:
        """The request to send: a recipe's prompt is built now, on a worker thread so that the
        streams in flight are not stamped late behind it; the time it took is its ``build_ms``."""
        if isinstance(item, RequestSpec):
            return item, None
        if not item.deferred:
            return item.build(), None  # short: its words were drawn up front, joining them is nothing
        t0 = perf_counter_ns()
        spec = await asyncio.get_running_loop().run_in_executor(None, item.build)
        return spec, (perf_counter_ns() - t0) / 1e6

    async def closed_loop(self, specs: Iterator[_Item], phase: str, writer: RecordWriter,
                          live: Optional[_Live], deadline_ns: Optional[int], ramp_s: float) -> None:
        c = self.cfg.concurrency

        async def worker(i: int) -> None:
            if ramp_s > 0 and await self._wait_stop(ramp_s * i / c):
                return
            while not self.stop.is_set():
                if deadline_ns is not None and perf_counter_ns() >= deadline_ns:
                    return
                item = next(specs, None)
                if item is None:
                    return
                self.issued += phase == "measure"
                t_ready = perf_counter_ns()
                spec, build_ms = await self._ready(item)
                if self.stop.is_set():
                    return  # stopped while the prompt was built: never sent, not a record
                await self._one(spec, phase, writer, live, t_ready, None, build_ms)

        await asyncio.gather(*(worker(i) for i in range(c)))

    async def open_loop(self, specs: list[_Item], offsets: list[float], writer: RecordWriter,
                        live: Optional[_Live], deadline_ns: Optional[int]) -> None:
        sem = asyncio.Semaphore(self.cfg.concurrency)
        tasks: list[asyncio.Task[None]] = []

        async def limited(item: _Item, due: int) -> None:
            async with sem:
                if self.stop.is_set():
                    return
                spec, build_ms = await self._ready(item)  # built once it has a slot: its time is queue time
                if self.stop.is_set():
                    return
                await self._one(spec, "measure", writer, live, due, due, build_ms)

        t0 = perf_counter_ns()
        for spec, off in zip(specs, offsets):
            due = t0 + int(off * 1e9)
            if deadline_ns is not None and due >= deadline_ns:
                break
            if await self._wait_stop((due - perf_counter_ns()) / 1e9):
                break
            self.issued += 1
            tasks.append(asyncio.ensure_future(limited(spec, due)))
        await asyncio.gather(*tasks)

    async def play_session(self, session: Session, writer: RecordWriter, live: Optional[_Live],
                           due: int, open_loop: bool, deadline_ns: Optional[int], limit: Optional[int]) -> None:
        """The turns of one session, each built after the previous answer arrived and due when the
        think time after it ends. ``due`` is when the first turn is due (open loop: its arrival)."""
        self.sessions_started += 1
        while not session.done and not self.stop.is_set():
            if deadline_ns is not None and due >= deadline_ns:
                break
            if limit is not None and self.issued >= limit:
                break
            if await self._wait_stop((due - perf_counter_ns()) / 1e9):
                break
            t_ready = perf_counter_ns() if not open_loop else due
            b0 = perf_counter_ns()
            spec = session.next_turn()
            build_ms = (perf_counter_ns() - b0) / 1e6
            self.issued += 1
            res = await self._one(spec, "measure", writer, live, t_ready, due if open_loop else None, build_ms)
            if res.status == "cancelled":
                break  # stopped by the runner: unfinished, not aborted by the server
            session.answered(res.text, res.ok)
            due = perf_counter_ns() + int(session.think_s() * 1e9)
        if session.aborted:
            self.sessions_aborted += 1
        elif session.done:
            self.sessions_completed += 1

    async def sessions_closed(self, plan: SessionPlan, writer: RecordWriter, live: Optional[_Live],
                              deadline_ns: Optional[int], ramp_s: float, cycle: bool) -> None:
        """Closed loop over sessions: ``concurrency`` users, each plays its next session to the end
        (think times included) before taking another."""
        c = self.cfg.concurrency
        prefix = plan.shared_prefix()
        indices = itertools.count() if cycle else iter(range(plan.num_sessions))
        limit = self.cfg.num_requests

        async def user(i: int) -> None:
            if ramp_s > 0 and await self._wait_stop(ramp_s * i / c):
                return
            while not self.stop.is_set():
                if deadline_ns is not None and perf_counter_ns() >= deadline_ns:
                    return
                if limit is not None and self.issued >= limit:
                    return
                k = next(indices, None)
                if k is None:
                    return
                await self.play_session(plan.session(k, prefix), writer, live, perf_counter_ns(), False,
                                        deadline_ns, limit)

        await asyncio.gather(*(user(i) for i in range(c)))

    async def sessions_open(self, plan: SessionPlan, offsets: list[float], writer: RecordWriter,
                            live: Optional[_Live], deadline_ns: Optional[int]) -> None:
        """Open loop over sessions: session i arrives at ``offsets[i]`` whatever the others do;
        ``concurrency`` caps sessions in progress, and a first turn waiting for a slot counts
        that wait in its ``queue_ms``."""
        sem = asyncio.Semaphore(self.cfg.concurrency)
        prefix = plan.shared_prefix()
        tasks: list[asyncio.Task[None]] = []
        limit = self.cfg.num_requests

        async def limited(k: int, due: int) -> None:
            async with sem:
                if self.stop.is_set():
                    return
                await self.play_session(plan.session(k, prefix), writer, live, due, True, deadline_ns, limit)

        t0 = perf_counter_ns()
        for k, off in enumerate(offsets):
            due = t0 + int(off * 1e9)
            if deadline_ns is not None and due >= deadline_ns:
                break
            if await self._wait_stop((due - perf_counter_ns()) / 1e9):
                break
            tasks.append(asyncio.ensure_future(limited(k, due)))
        await asyncio.gather(*tasks)

    def cancel_inflight(self) -> None:
        for t in list(self.inflight):
            t.cancel()


_SUMMARY_KEYS = ("phase", "status", "error_kind", "error", "start_ns", "ttft_ms", "e2el_ms", "tpot_ms",
                 "input_tokens", "output_tokens", "queue_ms", "build_ms", "turn")


def _slim(rec: dict[str, Any]) -> dict[str, Any]:
    """What the summary needs of a record, held in memory for the whole run: the ITLs as a packed
    array (8 bytes a token instead of a float object and a list slot); the full record is on disk."""
    out = {k: rec.get(k) for k in _SUMMARY_KEYS}
    out["itl_ms"] = array("d", rec.get("itl_ms") or ())
    return out


_gc_lock = threading.Lock()
_gc_users = 0
_gc_saved: tuple[int, int, int] = (700, 10, 10)


def _quiet_gc() -> None:
    """Make collector pauses rare during a run: a full collection over the records taken so far
    stalls the event loop for milliseconds, and every stream waits behind it (a TTFT error). The
    heap as it is now is frozen (never scanned again) and young collections run 100x less often.
    Counted, so runs side by side in one process (several engine instances) restore the settings
    only when the last one ends (``_restore_gc``)."""
    global _gc_users, _gc_saved
    with _gc_lock:
        if _gc_users == 0:
            _gc_saved = gc.get_threshold()
            gc.collect()
            gc.freeze()
            gc.set_threshold(max(_gc_saved[0], 1) * 100, _gc_saved[1], _gc_saved[2])
        _gc_users += 1


def _restore_gc() -> None:
    global _gc_users
    with _gc_lock:
        _gc_users -= 1
        if _gc_users == 0:
            gc.set_threshold(*_gc_saved)
            gc.unfreeze()


_Item = Union[RequestSpec, RequestRecipe]


def _items(specs: Sequence[RequestSpec]) -> Sequence[_Item]:
    """The requests to run: a lazy workload's recipes (prompts built when sent), else the specs."""
    return specs.recipes if isinstance(specs, LazyRequests) else specs


def _cycled(specs: Sequence[_Item], limit: Optional[int], cycle: bool) -> Iterator[_Item]:
    def gen() -> Iterator[_Item]:
        for k in itertools.count():
            for s in specs:
                yield s if k == 0 else s.with_id(f"{s.request_id}-c{k}")
            if not cycle:
                return

    it = gen()
    return itertools.islice(it, limit) if limit is not None else it


async def run_load_async(config: LoadConfig, out_dir: Path, *, workload: Optional[Workload] = None,
                         stop: Optional[asyncio.Event] = None, handle_signals: bool = True) -> Summary:
    """The async form of :func:`run_load` (for callers that already run an event loop)."""
    cfg = config
    wl = workload if workload is not None else build_workload(cfg.workload, cfg.workload_params, cfg.seed)
    if not wl.measured and wl.sessions is None:
        raise LoadInputError(f"workload {wl.kind!r} has no measured requests")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    # bad input (endpoint, key file) fails here, before any global state is touched
    options = cfg.client_options()
    if wl.sessions is not None:
        options.keep_text = True  # each answer is fed into the session's next turn
    client = StreamClient(cfg.endpoint, options, max_connections=cfg.concurrency)
    installed, interrupted = _install_signals(loop, stop, handle_signals)
    started_wall = time.time()
    _quiet_gc()
    run = _Run(cfg, client, stop)
    watcher = asyncio.ensure_future(stop.wait())
    watcher.add_done_callback(lambda _f: run.cancel_inflight())
    open_loop = cfg.request_rate is not None or any(s.at_s is not None for s in _items(wl.measured))
    try:
        t_start, t_end = await _warm_and_measure(run, cfg, wl, client, out_dir, open_loop, stop)
    finally:
        watcher.cancel()
        await client.aclose()
        _restore_gc()
        for sig in installed:
            loop.remove_signal_handler(sig)
    setup, extra = _run_description(cfg, wl, client, run, started_wall, open_loop,
                                    interrupted=bool(interrupted) or stop.is_set(),
                                    signame=interrupted[0] if interrupted else None)
    # The client's own CPU over the measured window (start-up, workload build and warm-up left
    # out): a client near one core busy queues requests and readings of its own, which would sit
    # inside the TTFTs it reports; with this a reader can tell that apart from the server's time
    extra["client_cpu_s"] = round(run.cpu_s, 4)
    extra["client_cpu_share"] = round(run.cpu_s / ((t_end - t_start) / 1e9), 4) if t_end > t_start else None
    summary = Summary.from_records(run.measured, duration_s=(t_end - t_start) / 1e9, percentiles=cfg.percentiles,
                                   goodput=cfg.goodput or None, setup=setup, extra=extra)
    summary.save(out_dir / SUMMARY_FILE)
    return summary


def _install_signals(loop: asyncio.AbstractEventLoop, stop: asyncio.Event,
                     handle_signals: bool) -> tuple[list[signal.Signals], list[str]]:
    """SIGINT/SIGTERM set ``stop`` (every record taken is kept); returns what to remove, and the
    list the handler appends the signal's name to."""
    installed: list[signal.Signals] = []
    interrupted: list[str] = []

    def on_signal(signame: str) -> None:
        interrupted.append(signame)
        stop.set()

    if handle_signals and threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, on_signal, sig.name)
                installed.append(sig)
            except (NotImplementedError, RuntimeError):
                pass
    return installed, interrupted


async def _warm_and_measure(run: _Run, cfg: LoadConfig, wl: Workload, client: StreamClient, out_dir: Path,
                            open_loop: bool, stop: asyncio.Event) -> tuple[int, int]:
    """Warm-up (not measured), then the measured requests; returns the measured window (ns)."""
    planned = wl.sessions.total_turns if wl.sessions is not None else len(wl.measured)
    total = cfg.num_requests or (None if cfg.duration_s else planned)
    t_start = t_end = perf_counter_ns()
    if cfg.pre_connect:
        await client.warm(min(cfg.concurrency, max(planned, len(wl.warmup))))
    if cfg.run_warmup and wl.warmup and not stop.is_set():
        with RecordWriter(out_dir / WARMUP_FILE) as ww, \
                Progress("load warm-up", total=len(wl.warmup), enabled=cfg.progress) as wp:
            await run.closed_loop(iter(_items(wl.warmup)), "warmup", ww, _Live(wp), None, 0.0)
    with RecordWriter(out_dir / RECORDS_FILE) as writer, \
            Progress("load", total=total, enabled=cfg.progress) as prog:
        live = _Live(prog)
        t_start = perf_counter_ns()
        cpu_start = time.process_time()
        deadline = t_start + int(cfg.duration_s * 1e9) if cfg.duration_s else None
        cycle = cfg.duration_s is not None or (cfg.num_requests or 0) > planned
        if wl.sessions is not None:
            plan = wl.sessions
            if not open_loop:
                await run.sessions_closed(plan, writer, live, deadline, cfg.ramp_up_s, cycle)
            else:
                assert cfg.request_rate is not None  # a session plan has no trace timestamps
                n = plan.num_sessions
                if cycle:
                    n = max(n, int((cfg.duration_s or 0) * cfg.request_rate * 1.5) + 16,
                            -(-(cfg.num_requests or 0) // plan.num_turns))
                offsets = arrival_offsets(n, cfg.request_rate, burstiness=cfg.burstiness,
                                          ramp_up_s=cfg.ramp_up_s, seed=cfg.seed)
                await run.sessions_open(plan, offsets, writer, live, deadline)
        elif not open_loop:
            await run.closed_loop(_cycled(_items(wl.measured), cfg.num_requests, cycle), "measure", writer,
                                  live, deadline, cfg.ramp_up_s)
        else:
            n = cfg.num_requests or len(wl.measured)
            if cfg.duration_s and cfg.request_rate:
                n = max(n, int(cfg.duration_s * cfg.request_rate * 1.5) + 16)
            specs = list(_cycled(_items(wl.measured), n, cycle))
            if cfg.request_rate is not None:
                offsets = arrival_offsets(len(specs), cfg.request_rate, burstiness=cfg.burstiness,
                                          ramp_up_s=cfg.ramp_up_s, seed=cfg.seed)
            else:
                offsets = [s.at_s or 0.0 for s in specs]
            await run.open_loop(specs, offsets, writer, live, deadline)
        t_end = perf_counter_ns()
        run.cpu_s = time.process_time() - cpu_start
        prog.status(live.text(), force=True)
    return t_start, t_end


def _run_description(cfg: LoadConfig, wl: Workload, client: StreamClient, run: _Run, started_wall: float,
                     open_loop: bool, *, interrupted: bool,
                     signame: Optional[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The summary's ``setup`` (vllm bench serve's keys) and kvgate's ``extra`` description."""
    endpoint = client.endpoint
    setup = {
        "date": time.strftime("%Y%m%d-%H%M%S", time.localtime(started_wall)),
        "endpoint_type": "openai-chat" if cfg.api == "chat" else "openai",
        "backend": "openai-chat" if cfg.api == "chat" else "openai",
        "label": cfg.label,
        "model_id": cfg.model,
        "tokenizer_id": None,
        "num_prompts": run.issued,
        "request_rate": cfg.request_rate if cfg.request_rate is not None else "inf",
        "burstiness": cfg.burstiness,
        "max_concurrency": cfg.concurrency,
    }
    extra = {
        "tool": f"kvgate-load {__version__}",
        "endpoint": f"{endpoint.scheme}://{endpoint.host_header}{client.path}",
        "api": cfg.api,
        "mode": "open" if open_loop else "closed",
        "workload": wl.describe(),
        "warmup_requests": len(wl.warmup) if cfg.run_warmup else 0,
        "interrupted": interrupted,
        "signal": signame,
        "num_requests_bound": cfg.num_requests,
        "duration_bound_s": cfg.duration_s,
        "ramp_up_s": cfg.ramp_up_s,
        "connections_opened": client.connections_opened,
        "token_rule": TOKEN_RULE,
        "clock": "time.perf_counter_ns (CLOCK_MONOTONIC)",
        "started_at_unix": started_wall,
        "records": RECORDS_FILE,
    }
    if wl.sessions is not None:
        extra["sessions"] = {"started": run.sessions_started, "completed": run.sessions_completed,
                             "aborted": run.sessions_aborted,
                             "unfinished": run.sessions_started - run.sessions_completed - run.sessions_aborted}
    return setup, extra


def run_load(config: LoadConfig, out_dir: Path, *, workload: Optional[Workload] = None) -> Summary:
    """Run ``config`` (its workload, or ``workload`` when given) and write ``out_dir/records.jsonl``,
    ``out_dir/warmup.jsonl`` (when there is a warm-up) and ``out_dir/summary.json``.
    SIGINT/SIGTERM stop it cleanly (``summary['kvgate']['interrupted']``)."""
    return asyncio.run(run_load_async(config, out_dir, workload=workload))

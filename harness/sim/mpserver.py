"""The emulator's LMCache multiprocess server: ``kvgate sim lmcache-server`` stands in for
``lmcache server`` (lmcache 0.5) as far as kvgate can observe it, and the emulated engine talks to
it the way vLLM's ``LMCacheMPConnector`` does (lookup+load before prefill, store after it).

What it keeps from the real server (the emulator may be faster, never kinder):
- it takes ``lmcache server``'s command line (``--host --port --http-host --http-port
  --chunk-size --l1-size-gb --eviction-policy --supported-transfer-mode --l2-adapter JSON``);
- L1 is the server's memory (LRU, bounded by ``--l1-size-gb``): it survives an engine restart but
  not a server restart, and ``POST /cache/clear {"tier": "l1"}`` empties it;
- L2 ``fs_native`` is a directory of chunk files found by their names, so it survives a restart
  of both processes (the real adapter finds its files again); its ``max_capacity_gb`` is enforced
  only with an ``eviction`` block, by a background pass at LMCache's watermark (``l2evict.py``);
- a store lands in L1 at once and is written to L2 behind it, through a queue (one writer), as
  LMCache's StoreController submits L1 objects to its L2 adapters asynchronously; an object whose
  L2 write has not completed is read-locked, and the non-forced ``POST /cache/clear`` keeps it
  (``L1Manager.clear(force=False)`` skips read-locked objects), so a clear right after a populate
  leaves in L1 whatever is still queued, and a restore then takes it from DRAM. What the harness
  sees, under LMCache's names: ``lmcache_mp_l2_store_submitted_objects_chunks`` and
  ``..._completed_objects_chunks`` (counters), ``lmcache_mp_num_inflight_l2_stores`` and
  ``lmcache_mp_l1_memory_usage_bytes`` (gauges);
- a lookup counts the chunk-aligned tokens requested, the contiguous prefix hit, and splits it
  into the L1-servable prefix and what L2 added (``lookup_hit_l1 + lookup_hit_l2 == lookup_hit``);
  the L2 part is read from the files (O_DIRECT, in parallel) and promoted to L1;
- its counters are on its own ``/metrics`` (HTTP port), never on the engine's.

The request port speaks JSON lines (one request, one answer per connection); it is kvgate's own
protocol between two emulator processes, not LMCache's ZMQ wire format.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import socket
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Optional

from harness.sim import directio
from harness.sim.chunkcrc import ChunkCrc, expected_crc, with_crc
from harness.sim.http import Request, Response, limit_connections, serve_connection
from harness.sim.l2evict import INTERVAL_S, EvictionConfig, L2Ledger, parse_eviction
from harness.sim.metrics import Counter
from harness.sim.tiers import DirTier, Pins

log = logging.getLogger("kvgate.sim.lmcache")

GB = 1024**3
CPU_COPY_BYTES_PER_S = 20e9  # an L1 hit costs a host-memory copy at this rate (as the CPU tier)
L2_IO_WORKERS = 8
MAX_LINE = 16 * 1024 * 1024


class MPServerError(Exception):
    """The multiprocess server could not be reached or refused a request."""


@dataclass
class MPSettings:
    host: str
    port: int
    http_host: str
    http_port: int
    chunk_size: int
    l1_bytes: int
    l2_dir: Optional[str]
    l2_max_bytes: int = 0
    read_delay_s: float = 0.0
    write_delay_s: float = 0.0  # injected per L2 chunk write (a slow disk's backlog)
    l2_eviction: Optional[EvictionConfig] = None  # the adapter's eviction block (None: accounting only)


class L1:
    """Chunk hashes held in the server's memory, bounded in bytes, least recently used first out.
    A locked chunk (its L2 write still queued or running) is neither evicted nor cleared."""

    def __init__(self, capacity_bytes: int) -> None:
        self.capacity = capacity_bytes
        self._items: OrderedDict[bytes, int] = OrderedDict()
        self.pins = Pins()
        self._used = 0
        self._lock = threading.Lock()
        self.evicted = 0

    @property
    def used_bytes(self) -> int:
        with self._lock:
            return self._used


    def contains(self, d: bytes) -> bool:
        with self._lock:
            if d in self._items:
                self._items.move_to_end(d)
                return True
            return False

    def add(self, d: bytes, size: int) -> None:
        with self._lock:
            if d in self._items:
                self._items.move_to_end(d)
                return
            if size > self.capacity:
                return
            self._items[d] = size
            self._used += size
            for key in list(self._items):
                if self._used <= self.capacity:
                    break
                if key in self.pins:
                    continue
                self._used -= self._items.pop(key)
                self.evicted += 1

    def clear(self, force: bool = False) -> tuple[int, int]:
        """Drop every unlocked chunk (all with ``force``); returns (cleared, kept locked)."""
        with self._lock:
            keep = {} if force else {d: s for d, s in self._items.items() if d in self.pins}
            n = len(self._items) - len(keep)
            self._items = OrderedDict(keep)
            self._used = sum(keep.values())
            return n, len(keep)


class MPMetrics:
    """The server's counters under the names lmcache 0.5's Prometheus exporter gives them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started = time.time()
        self.requested = Counter("lmcache_mp_lookup_requested_tokens",
                                 "Total tokens submitted for lookup (chunk-aligned tokens only).")
        self.hit = Counter("lmcache_mp_lookup_hit_tokens", "Total tokens found in L1+L2 during lookup.")
        self.hit_l1 = Counter("lmcache_mp_lookup_hit_l1_tokens", "Of lookup_hit: tokens L1 already held.")
        self.hit_l2 = Counter("lmcache_mp_lookup_hit_l2_tokens",
                              "Of lookup_hit: tokens L2 added beyond the L1-servable prefix.")
        self.lookups = Counter("lmcache_mp_lookups_requests", "Completed lookups.")
        self.l2_submitted = Counter("lmcache_mp_l2_store_submitted_objects_chunks",
                                    "Total chunks submitted for L2 store")
        self.l2_stored = Counter("lmcache_mp_l2_store_completed_objects_chunks", "Chunks stored to L2.")
        self.l2_read_bytes = Counter("kvgate_sim:l2_read_bytes", "Bytes read from L2 files by the emulator.")
        self.l2_evicted = Counter("lmcache_mp_l2_evicted_objects_chunks", "Total chunks evicted from L2")
        self.families: list[Counter] = [self.requested, self.hit, self.hit_l1, self.hit_l2, self.lookups,
                                        self.l2_submitted, self.l2_stored, self.l2_read_bytes, self.l2_evicted]
        # gauges, read when rendered: (name, help, callable, labels as rendered)
        self.gauges: list[tuple[str, str, Callable[[], float], str]] = []

    def render(self) -> str:
        lines: list[str] = []
        with self.lock:
            for fam in self.families:
                if not fam.values:
                    continue  # OpenTelemetry exposes an instrument only after its first record
                lines.append(f"# HELP {fam.exposed_name} {fam.help}")
                lines.append(f"# TYPE {fam.exposed_name} counter")
                lines.extend(fam.render())
        for name, help_text, read, labels in self.gauges:
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", f"{name}{labels} {float(read())!r}"]
        return "\n".join(lines) + "\n"


class MPStore:
    """L1 and L2 of one server; blocking methods (run them in threads)."""

    def __init__(self, s: MPSettings, metrics: MPMetrics) -> None:
        self.s = s
        self.metrics = metrics
        self.l1 = L1(s.l1_bytes)
        # no bound on the directory itself: LMCache writes past the capacity and evicts behind it
        self.l2 = DirTier("l2", s.l2_dir, 0, read_delay_s=s.read_delay_s) if s.l2_dir else None
        self.ledger = L2Ledger(s.l2_max_bytes, s.l2_eviction)
        self._stop = threading.Event()
        self._evictor: Optional[threading.Thread] = None
        self._io = ThreadPoolExecutor(max_workers=L2_IO_WORKERS, thread_name_prefix="l2-io")
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="l2-store")
        self._lock = threading.Lock()
        self._inflight = 0  # chunks submitted to L2 whose write has not completed
        metrics.gauges += [
            ("lmcache_mp_l1_memory_usage_bytes", "Bytes currently held in L1 cache", lambda: self.l1.used_bytes, ""),
            ("lmcache_mp_num_inflight_l2_stores", "L2 store tasks currently executing", lambda: self._inflight, ""),
        ]
        if self.l2 is not None:
            # LMCache's own line (fs_native_l2_adapter.py), which kvgate reads back (engines/tierreadback.py)
            log.info("Created FS native L2 adapter: %s (workers=%d, odirect=%s, read_ahead=%s)", s.l2_dir,
                     L2_IO_WORKERS, False, None)
            metrics.gauges.append(("lmcache_mp_l2_usage_bytes", "Bytes currently held in each L2 adapter",
                                   lambda: self.ledger.used_bytes, '{l2_name="fs_native"}'))
            self._start_evictor()

    def _start_evictor(self) -> None:
        if self.ledger.capacity > 0 and self.s.l2_eviction is None:
            log.warning("fs_native: max_capacity_gb=%g is declared for %s but no 'eviction' block is configured, "
                        "so it is used for usage accounting only and will NOT bound disk usage",
                        self.ledger.capacity / GB, self.s.l2_dir)
        if self.ledger.enforced:
            self._evictor = threading.Thread(target=self._eviction_loop, name="l2-evict", daemon=True)
            self._evictor.start()

    def _eviction_loop(self) -> None:
        while not self._stop.wait(INTERVAL_S):
            self.evict_once()

    def evict_once(self) -> int:
        """One pass of LMCache's L2EvictionController; returns the chunks deleted."""
        keys = self.ledger.to_evict()
        if not keys or self.l2 is None:
            return 0
        cap = self.ledger.capacity
        log.info("L2 usage %.2f above watermark %.2f; triggering eviction.", self.ledger.used_bytes / cap,
                 self.s.l2_eviction.trigger_watermark if self.s.l2_eviction else 0.0)
        gone = [k for k in keys if self.l2.delete(k)]
        self.ledger.deleted(keys)
        if gone:
            with self.metrics.lock:
                self.metrics.l2_evicted.inc((), len(gone))
        return len(gone)

    def close(self) -> None:
        self._stop.set()
        if self._evictor is not None:
            self._evictor.join()
        self._writer.shutdown(wait=True)
        self._io.shutdown(wait=True)

    def lookup(self, digests: list[bytes], chunk_bytes: int) -> dict[str, object]:
        """Find the contiguous prefix of ``digests`` held in L1 or L2, load the L2 part (real reads,
        in parallel) into L1; returns what served it."""

        cs = self.s.chunk_size
        start = time.perf_counter()
        l1_prefix = 0
        while l1_prefix < len(digests) and self.l1.contains(digests[l1_prefix]):
            l1_prefix += 1
        where: list[str] = ["l1"] * l1_prefix
        for d in digests[l1_prefix:]:
            if self.l1.contains(d):
                where.append("l1")
            elif self.l2 is not None and self.l2.exists(d):
                where.append("l2")
            else:
                break
        crcs = {i: ChunkCrc() for i, w in enumerate(where) if w == "l2"}
        futs = {i: self._io.submit(self.l2.read, digests[i], crcs[i]) for i in crcs} if self.l2 else {}
        served: list[str] = []
        loaded: list[bytes] = []
        corrupted: list[str] = []
        read_bytes = 0
        try:
            for i, w in enumerate(where):
                if w == "l1":
                    time.sleep(chunk_bytes / CPU_COPY_BYTES_PER_S)
                    served.append("l1")
                    continue
                try:
                    nbytes, _ = futs[i].result()
                except (OSError, ValueError) as exc:
                    log.warning("L2 read of chunk %s failed: %s", digests[i].hex()[:16], exc)
                    break
                read_bytes += nbytes
                c = crcs[i]
                if c.crc != (c.recorded or expected_crc(digests[i], chunk_bytes)):
                    corrupted.append(c.crc.to_bytes(4, "little").hex())
                self.l1.add(digests[i], chunk_bytes)
                served.append("l2")
                loaded.append(digests[i])
        finally:
            for f in futs.values():
                f.cancel()
        self.ledger.accessed(loaded)
        n_l1 = 0
        while n_l1 < len(served) and served[n_l1] == "l1":
            n_l1 += 1
        hit = len(served)
        m = self.metrics
        with m.lock:
            m.requested.inc((), len(digests) * cs)
            m.hit.inc((), hit * cs)
            m.hit_l1.inc((), n_l1 * cs)
            m.hit_l2.inc((), (hit - n_l1) * cs)
            m.lookups.inc((), 1)
            if read_bytes:
                m.l2_read_bytes.inc((), read_bytes)
        return {"served": served, "corrupted": corrupted, "read_s": time.perf_counter() - start}

    def store(self, digests: list[bytes], chunk_bytes: int) -> dict[str, object]:
        """Every chunk to L1 at once; the ones L2 lacks are locked in L1 and queued for L2 (the
        answer does not wait for them, as LMCache's store returns once L1 holds the KV)."""
        queued: list[bytes] = []
        for d in digests:
            self.l1.add(d, chunk_bytes)
            if self.l2 is not None and not self.l2.exists(d):
                self.l1.pins.lock(d)
                queued.append(d)
        if queued:
            with self._lock:
                self._inflight += len(queued)
            with self.metrics.lock:
                self.metrics.l2_submitted.inc((), len(queued))
            self._writer.submit(self._write_l2, queued, chunk_bytes)
        return {"stored": len(digests), "l2_queued": len(queued)}

    def _write_l2(self, digests: list[bytes], chunk_bytes: int) -> None:
        """The L2 writer: each chunk written (or failed), then unlocked in L1."""
        assert self.l2 is not None
        keys: list[bytes] = []
        sizes: list[int] = []
        for d in digests:
            written = False
            try:
                if self.s.write_delay_s > 0:
                    time.sleep(self.s.write_delay_s)
                data = with_crc(directio.chunk_payload(d, chunk_bytes))
                written, _ = self.l2.write(d, data)
            except OSError as exc:
                log.error("L2 store of chunk %s failed: %s", d.hex()[:16], exc)
            finally:
                self.l1.pins.unlock(d)
                with self._lock:
                    self._inflight -= 1
            if written:
                keys.append(d)
                sizes.append(len(data))
                with self.metrics.lock:
                    self.metrics.l2_stored.inc((), 1)
        # one batch, as LMCache's adapter reports a store task: its keys enter the LRU order reversed
        self.ledger.stored(keys, sizes)


class MPServer:
    def __init__(self, s: MPSettings) -> None:
        self.s = s
        self.metrics = MPMetrics()
        self.store = MPStore(s, self.metrics)
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="mp-req")

    async def _on_request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await reader.readline()
            try:
                req = json.loads(line)
                answer = await asyncio.get_running_loop().run_in_executor(self._pool, self._handle, req)
            except (ValueError, KeyError, TypeError) as exc:
                answer = {"error": f"{type(exc).__name__}: {exc}"}
            writer.write(json.dumps(answer).encode() + b"\n")
            await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    def _handle(self, req: dict[str, Any]) -> dict[str, object]:
        op = req["op"]
        if op == "info":
            return {"chunk_size": self.s.chunk_size, "l2": self.s.l2_dir is not None}
        digests = [bytes.fromhex(h) for h in req["digests"]]
        chunk_bytes = int(req["chunk_bytes"])
        if op == "lookup":
            return self.store.lookup(digests, chunk_bytes)
        if op == "store":
            return self.store.store(digests, chunk_bytes)
        raise ValueError(f"unknown op {op!r}")

    async def _on_http(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await serve_connection(reader, writer, self._http, error_body=lambda exc: {"error": exc.message})

    async def _http(self, req: Request, resp: Response) -> None:
        if req.path == "/metrics" and req.method in ("GET", "HEAD"):
            await resp.send(200, self.metrics.render().encode(), "text/plain; version=0.0.4; charset=utf-8")
        elif req.path in ("/health", "/api/healthcheck") and req.method in ("GET", "HEAD"):
            await resp.send_json(200, {"status": "healthy"})
        elif req.path == "/cache/clear" and req.method == "POST":
            try:
                body = json.loads(req.body or b"{}")
            except ValueError:
                await resp.send_json(400, {"error": "body must be JSON"})
                return
            tier = body.get("tier", "l1") if isinstance(body, dict) else None
            if tier != "l1":
                await resp.send_json(400, {"error": "only {\"tier\": \"l1\"} can be cleared"})
                return
            n, kept = self.store.l1.clear(force=body.get("force") is True)
            log.info("cleared L1: %d chunk(s), %d locked chunk(s) remaining (L2 writes in flight); L2 kept",
                     n, kept)
            await resp.send_json(200, {"status": "ok", "cleared": {"tier": "l1"}, "cleared_chunks": n,
                                       "locked_kept": kept})
        else:
            await resp.send_json(404, {"error": f"no route {req.method} {req.path}"})

    async def serve_until_signalled(self) -> None:
        req_server = await asyncio.start_server(self._on_request, self.s.host, self.s.port,
                                                limit=MAX_LINE, reuse_address=True)
        http_server = await asyncio.start_server(limit_connections(self._on_http), self.s.http_host,
                                                 self.s.http_port, reuse_address=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.add_signal_handler(sig, stop.set)
            except (NotImplementedError, RuntimeError):
                pass
        log.info("kvgate emulated LMCache server on %s:%d (HTTP %s:%d), chunk %d, L1 %d B, L2 %s",
                 self.s.host, self.s.port, self.s.http_host, self.s.http_port, self.s.chunk_size,
                 self.s.l1_bytes, self.s.l2_dir or "none")
        await stop.wait()
        for srv in (req_server, http_server):
            srv.close()
            await srv.wait_closed()
        self._pool.shutdown(wait=True)
        self.store.close()


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=5555, help="request port (the engine's connector)")
    p.add_argument("--http-host", default="127.0.0.1")
    p.add_argument("--http-port", type=int, default=8080, help="HTTP API and /metrics")
    p.add_argument("--chunk-size", type=int, default=256)
    p.add_argument("--l1-size-gb", type=float, default=1.0)
    p.add_argument("--eviction-policy", default="LRU", choices=["LRU"])
    p.add_argument("--supported-transfer-mode", default="auto")
    p.add_argument("--l2-adapter", default=None, help='JSON, e.g. {"type":"fs_native","base_path":DIR}')


def settings_from_args(args: argparse.Namespace, read_delay_s: float = 0.0, write_delay_s: float = 0.0) -> MPSettings:
    """The server's settings; ValueError naming the flag when one is wrong."""
    if args.chunk_size < 1:
        raise ValueError("--chunk-size must be >= 1")
    if args.l1_size_gb <= 0:
        raise ValueError("--l1-size-gb must be > 0")
    l2_dir: Optional[str] = None
    l2_max = 0
    eviction: Optional[EvictionConfig] = None
    if args.l2_adapter:
        try:
            adapter = json.loads(args.l2_adapter)
        except ValueError as exc:
            raise ValueError(f"--l2-adapter is not valid JSON: {exc}") from None
        if not isinstance(adapter, dict) or adapter.get("type") != "fs_native" or not adapter.get("base_path"):
            raise ValueError('--l2-adapter: the emulator models {"type": "fs_native", "base_path": DIR} only')
        l2_dir = str(adapter["base_path"])
        cap = adapter.get("max_capacity_gb", 0)
        if isinstance(cap, bool) or not isinstance(cap, (int, float)) or cap < 0:
            raise ValueError("--l2-adapter: max_capacity_gb must be a non-negative number")
        l2_max = int(cap * GB)
        eviction = parse_eviction(adapter)
    return MPSettings(host=args.host, port=args.port, http_host=args.http_host, http_port=args.http_port,
                      chunk_size=args.chunk_size, l1_bytes=int(args.l1_size_gb * GB), l2_dir=l2_dir,
                      l2_max_bytes=l2_max, read_delay_s=read_delay_s, write_delay_s=write_delay_s,
                      l2_eviction=eviction)


# --- the engine's side (LMCacheMPConnector) ------------------------------------------------------
class MPClient:
    """The emulated engine's connection to its LMCache server (blocking; call from threads)."""

    def __init__(self, host: str, port: int, timeout: float = 300.0) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout

    def call(self, req: dict[str, object]) -> dict[str, Any]:
        try:
            with socket.create_connection((self.host, self.port), timeout=self.timeout) as sock:
                sock.sendall(json.dumps(req).encode() + b"\n")
                buf = bytearray()
                while not buf.endswith(b"\n"):
                    part = sock.recv(1 << 16)
                    if not part:
                        break
                    buf += part
        except OSError as exc:
            raise MPServerError(f"LMCache server tcp://{self.host}:{self.port}: {exc}") from exc
        return self._answer(bytes(buf))

    async def submit(self, req: dict[str, object]) -> asyncio.Task[dict[str, Any]]:
        """Send ``req`` now; its answer is awaited behind, by the task returned. As the real
        connector's ``wait_for_save`` submits a request's store before its token leaves the
        engine, while the server lands it in its own time."""
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(self.host, self.port), self.timeout)
            writer.write(json.dumps(req).encode() + b"\n")
            await asyncio.wait_for(writer.drain(), self.timeout)
        except (OSError, asyncio.TimeoutError) as exc:
            raise MPServerError(f"LMCache server tcp://{self.host}:{self.port}: {exc!r}") from exc
        return asyncio.ensure_future(self._read_answer(reader, writer))

    async def _read_answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> dict[str, Any]:
        try:
            line = await asyncio.wait_for(reader.readline(), self.timeout)
        except (OSError, ValueError, asyncio.TimeoutError) as exc:
            raise MPServerError(f"LMCache server tcp://{self.host}:{self.port}: {exc!r}") from exc
        finally:
            writer.close()
        return self._answer(line)

    def _answer(self, buf: bytes) -> dict[str, Any]:
        try:
            answer = json.loads(buf)
        except ValueError:
            raise MPServerError(f"LMCache server tcp://{self.host}:{self.port} answered no JSON") from None
        if not isinstance(answer, dict) or "error" in answer:
            raise MPServerError(f"LMCache server tcp://{self.host}:{self.port}: {answer}")
        return answer

    def wait_info(self, deadline_s: float = 60.0) -> dict[str, Any]:
        """The server's chunk size (it is started before the engine; wait for it briefly)."""
        end = time.monotonic() + deadline_s
        while True:
            try:
                return self.call({"op": "info"})
            except MPServerError:
                if time.monotonic() > end:
                    raise
                time.sleep(0.2)


def mp_address(kv_transfer: dict[str, Any]) -> tuple[str, int]:
    """(host, port) from ``kv_connector_extra_config`` of an ``LMCacheMPConnector`` config."""
    extra = kv_transfer.get("kv_connector_extra_config") or {}
    host = str(extra.get("lmcache.mp.host", "tcp://127.0.0.1"))
    if host.startswith("tcp://"):
        host = host[len("tcp://"):]
    try:
        port = int(extra.get("lmcache.mp.port", 5555))
    except (TypeError, ValueError):
        raise ValueError("kv_connector_extra_config.lmcache.mp.port must be a port number") from None
    return host, port


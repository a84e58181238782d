"""What a request costs: prefix lookup across the tiers, real tier reads, emulated recompute,
and the write-behind of new chunks.

Tokens are whitespace-separated words (the load generator builds prompts that way). Full chunks
of ``chunk_size`` tokens get chained hashes (hash of the previous hash and the chunk's token ids,
seeded with the model name), so a chunk's hash names its whole prefix, as in LMCache.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import logging
import time
import zlib
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Optional

from harness.sim import directio
from harness.sim.chunkcrc import ChunkCrc, expected_crc, with_crc
from harness.sim.lmcache_config import LMCacheConfig
from harness.sim.metrics import SimMetrics
from harness.sim.mpserver import MPClient, MPServerError
from harness.sim.tiers import ChunkLRU, DirTier, probe_read_mode

log = logging.getLogger("kvgate.sim")

# The CPU tier holds no bytes (it would double the emulator's memory); a hit costs the time a
# copy at this rate would take, a typical host-to-device rate.
CPU_COPY_BYTES_PER_S = 20e9
CHUNK_IO_WORKERS = 8  # concurrent O_DIRECT chunk reads per emulator (queue depth seen by the device)
# Tiers in host memory (in-process CPU tier, the LMCache server's L1): a restore served from them
# did not read the storage under test.
MEMORY_TIERS = ("local_cpu", "lmcache_l1")


def tokenize(text: str) -> list[int]:
    return [zlib.crc32(w.encode("utf-8", "surrogatepass")) for w in text.split()]


def chunk_hashes(model: str, token_ids: list[int], chunk_size: int) -> list[bytes]:
    """Chained hashes of the full chunks of ``token_ids``."""
    prev = hashlib.sha256(model.encode()).digest()
    out: list[bytes] = []
    for start in range(0, len(token_ids) - chunk_size + 1, chunk_size):
        h = hashlib.sha256(prev)
        h.update(b"".join(t.to_bytes(4, "little") for t in token_ids[start : start + chunk_size]))
        prev = h.digest()
        out.append(prev)
    return out


@dataclass
class StoreSettings:
    model: str
    prefill_tokens_per_s: float
    hbm_tokens: int
    kv_bytes_per_token: int
    kv_scale: float
    prefix_caching: bool = True
    connector: bool = False  # a KV connector (LMCache) is configured
    lmcache: LMCacheConfig = field(default_factory=LMCacheConfig)
    # Fault injection for tests and demos (KVGATE_SIM_TIER_READ_DELAY_MS): a slower storage tier
    # without changing the profile, so the run keeps its workload fingerprint.
    tier_read_delay_s: float = 0.0
    tier_write_delay_s: float = 0.0  # KVGATE_SIM_TIER_WRITE_DELAY_MS: a slow disk's write backlog
    # KVGATE_SIM_MEMORY_RESTORE_BPS, a dishonest engine: directory-tier chunks are served from memory
    # (never read) while reported as that tier's hits, each retrieval timed as if read at this rate
    # (bytes/s): what a check on the engine's own retrieval timing must catch (bench-restore); the
    # TTFT-implied restore plausibility check sees it only far above the storage's speed.
    memory_restore_bps: float = 0.0
    # LMCache multiprocess mode (LMCacheMPConnector): the tiers live in the LMCache server
    mp: Optional[MPClient] = None

    @property
    def chunk_size(self) -> int:
        return self.lmcache.chunk_size

    @property
    def chunk_bytes(self) -> int:
        raw = int(self.kv_bytes_per_token * self.chunk_size * self.kv_scale)
        return directio.aligned_size(max(raw, directio.HEADER))


@dataclass
class PrefillResult:
    prompt_tokens: int
    hbm_hit_tokens: int = 0
    external_hit_tokens: int = 0
    computed_tokens: int = 0
    tiers: dict[str, int] = field(default_factory=dict)  # chunks served per tier
    read_seconds: float = 0.0
    compute_seconds: float = 0.0
    new_chunks: list[bytes] = field(default_factory=list)
    # Content hashes of chunks a tier returned with other bytes than were stored (corrupted).
    corrupted: list[bytes] = field(default_factory=list)


def output_tokens(prompt_ids: list[int], corrupted: list[bytes], n: int) -> list[str]:
    """The emulator's greedy output: a pure function of the prompt and of the KV bytes the request
    actually used. Correct KV (recomputed, or read back as stored) gives the same words for the
    same prompt in every arm; a chunk read back with other bytes changes them, as corrupted KV
    changes a real model's answer."""
    seed = hashlib.sha256(b"".join(i.to_bytes(4, "little", signed=False) for i in prompt_ids))
    for h in corrupted:
        seed.update(h)
    words = []
    state = seed.digest()
    for _ in range(n):
        state = hashlib.sha256(state).digest()
        words.append(f" w{int.from_bytes(state[:4], 'little') % 997}")
    return words


class KVStore:
    def __init__(self, settings: StoreSettings, metrics: SimMetrics) -> None:
        self.s = settings
        self.metrics = metrics
        cs = settings.chunk_size
        self.hbm = ChunkLRU(settings.hbm_tokens // cs if settings.prefix_caching else 0)
        cfg = settings.lmcache
        self.cpu: Optional[ChunkLRU] = None
        self.dirs: list[DirTier] = []
        self.read_modes: dict[str, str] = {}
        if settings.connector:
            if cfg.local_cpu:
                self.cpu = ChunkLRU(cfg.max_local_cpu_bytes // settings.chunk_bytes)
            if cfg.local_disk:
                self.dirs.append(DirTier("local_disk", cfg.local_disk, cfg.max_local_disk_bytes,
                                         read_delay_s=settings.tier_read_delay_s, index_in_memory=True))
            if cfg.remote_dir:
                self.dirs.append(DirTier("remote", cfg.remote_dir, 0, read_delay_s=settings.tier_read_delay_s))
            elif cfg.remote_error:
                # lmcache 0.5.6 RemoteBackend.init_connection: logged, and the engine runs without the tier
                log.warning("Failed to initialize/re-establish remote connection: %s", cfg.remote_error)
            elif cfg.remote_url:
                log.warning("remote_url %s is not an fs:// URL; the emulator ignores that tier", cfg.remote_url)
        for tier in self.dirs:
            metrics.sim_tier_dir.set(metrics.vllm_labels + (("path", tier.directory), ("tier", tier.name)), 1.0)
            if tier.name == "local_disk":  # LMCache's own line (local_disk_backend.py), read back by kvgate
                log.info("Local disk cache path: %s", tier.directory)
            mode = probe_read_mode(tier.directory)
            if mode:
                self.read_modes[tier.name] = mode
                metrics.sim_read_mode.set(metrics.vllm_labels + (("tier", tier.name), ("mode", mode)), 1.0)
                log.info("tier %s at %s: reads bypass the page cache with %s", tier.name, tier.directory, mode)
        self._readers = ThreadPoolExecutor(max_workers=4, thread_name_prefix="kv-read")
        # parallel chunk reads of one request (a separate pool: the readers above wait on it)
        self._chunk_io = ThreadPoolExecutor(max_workers=CHUNK_IO_WORKERS, thread_name_prefix="kv-io")
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kv-write")
        self._pending_writes: set[asyncio.Future[Any]] = set()
        self._pending_chunks = 0  # queued for the directory tiers, not yet written
        self.payload_cache: dict[bytes, bytes] = {}

    def close(self) -> None:
        self._readers.shutdown(wait=True)
        self._chunk_io.shutdown(wait=True)
        self._writer.shutdown(wait=True)

    # --- lookup and load -------------------------------------------------------------------------------
    def _expected_crc(self, digest: bytes) -> int:
        return expected_crc(digest, self.s.chunk_bytes)

    def _load_external(self, digests: list[bytes], corrupted: list[bytes]) -> tuple[list[str], float]:
        """Runs in a reader thread: find the prefix of chunks some tier holds, then read the disk
        chunks of that prefix in parallel (O_DIRECT, one buffer each), as LMCache's retrieval does
        with several I/O workers: one chunk at a time would show a fraction of the device's
        bandwidth. Stops at the first chunk no tier can deliver (only a prefix can be reused). The
        content hash of every chunk read with other bytes than were stored goes to ``corrupted``."""
        start = time.perf_counter()
        where: list[Optional[DirTier]] = []  # None: the CPU tier
        for d in digests:
            if self.cpu is not None and self.cpu.contains(d):
                where.append(None)
                continue
            tier = next((t for t in self.dirs if t.exists(d)), None)
            if tier is None:
                break
            where.append(tier)
        if self.s.memory_restore_bps > 0:
            return self._serve_from_memory(digests, where, start)
        # one CRC pass over the bytes read, as a real engine copies them once more to the device:
        # cheap, and it makes what was read decide the output
        crcs = {i: ChunkCrc() for i, t in enumerate(where) if t is not None}
        futures = {i: self._chunk_io.submit(t.read, digests[i], crcs[i]) for i, t in enumerate(where) if t is not None}
        # the CPU tier's copies, while the disk reads are in flight: one wait for all of them, since
        # a wait per chunk costs a timer slack and a GIL hand-over each (about twice the nominal
        # copy time under concurrency), which is the emulator's own overhead, not the tier's
        cpu_chunks = sum(1 for t in where if t is None)
        if cpu_chunks:
            time.sleep(cpu_chunks * self.s.chunk_bytes / CPU_COPY_BYTES_PER_S)
        served: list[str] = []
        try:
            for i, tier in enumerate(where):
                d = digests[i]
                if tier is None:
                    assert self.cpu is not None
                    self.cpu.touch(d)
                    served.append("local_cpu")
                    continue
                got = self._chunk_result(futures[i], tier, d, crcs[i])
                if got is None:
                    break
                if crcs[i].crc != (crcs[i].recorded or self._expected_crc(d)):
                    corrupted.append(crcs[i].crc.to_bytes(4, "little"))
                served.append(got)
        finally:
            for fut in futures.values():
                fut.cancel()  # reads past a missing chunk are not needed
        return served, time.perf_counter() - start

    def _chunk_result(self, fut: Future[tuple[int, str]], tier: DirTier, d: bytes, content: ChunkCrc) -> Optional[str]:
        """The tier that delivered chunk ``d`` (its parallel read, else the other tiers in turn);
        ``content`` holds the CRC of the bytes that tier returned."""
        m = self.metrics
        candidates: list[tuple[DirTier, Optional[Future[tuple[int, str]]]]] = [(tier, fut)]
        candidates += [(t, None) for t in self.dirs if t is not tier]
        for t, f in candidates:
            try:
                if f is None:
                    content.crc, content.recorded = 0, 0  # a fresh CRC for the other tier's bytes
                nbytes, _mode = f.result() if f is not None else t.read(d, content)
            except FileNotFoundError:
                continue
            except (OSError, ValueError) as exc:
                reason = errno.errorcode.get(getattr(exc, "errno", 0) or 0, type(exc).__name__)
                log.warning("read of chunk %s from %s failed: %s", d.hex()[:16], t.name, exc)
                with m.lock:
                    m.sim_read_errors.inc(m.tier_labels("reason", reason))
                continue
            with m.lock:
                m.sim_read_bytes.inc(m.tier_labels("tier", t.name), nbytes)
            return t.name
        return None

    def _load_mp(self, digests: list[bytes], corrupted: list[bytes]) -> tuple[list[str], float]:
        """Runs in a reader thread: the LMCache server looks the chunks up and loads the L2 part
        (its own real reads) into L1, as LMCacheMPConnector asks before the prefill. A server that
        cannot be reached serves nothing (the prefill recomputes), as vLLM would without it."""
        assert self.s.mp is not None
        start = time.perf_counter()
        try:
            answer = self.s.mp.call({"op": "lookup", "digests": [d.hex() for d in digests],
                                     "chunk_bytes": self.s.chunk_bytes})
        except MPServerError as exc:
            log.error("lookup failed, recomputing: %s", exc)
            with self.metrics.lock:
                self.metrics.sim_read_errors.inc(self.metrics.tier_labels("reason", "lmcache_server"))
            return [], time.perf_counter() - start
        corrupted.extend(bytes.fromhex(str(h)) for h in answer.get("corrupted") or [])
        served = ["lmcache_" + str(t) for t in answer.get("served") or []]
        return served, time.perf_counter() - start

    async def prefill(self, prompt_ids: list[int]) -> PrefillResult:
        """Everything before the first token: lookups, tier reads, emulated recompute."""
        cs = self.s.chunk_size
        digests = chunk_hashes(self.s.model, prompt_ids, cs)
        res = PrefillResult(prompt_tokens=len(prompt_ids))
        i = 0
        while i < len(digests) and self.hbm.contains(digests[i]):
            self.hbm.touch(digests[i])
            i += 1
        res.hbm_hit_tokens = i * cs
        if i:
            res.tiers["hbm"] = i
        ext_served: list[str] = []
        if self.s.connector and i < len(digests) and (self.cpu is not None or self.dirs or self.s.mp):
            loop = asyncio.get_running_loop()
            load = self._load_mp if self.s.mp is not None else self._load_external
            ext_served, res.read_seconds = await loop.run_in_executor(
                self._readers, load, digests[i:], res.corrupted)
            for name in ext_served:
                res.tiers[name] = res.tiers.get(name, 0) + 1
        loaded = len(ext_served)
        # vLLM takes at most prompt - 1 tokens from a KV connector: the last prompt token is always
        # computed, to sample the first output token (LMCache's own counters still count the whole
        # chunks it served). Found by the conformance test: 3069 of 3072 on the real server.
        res.external_hit_tokens = min(loaded * cs, max(0, res.prompt_tokens - res.hbm_hit_tokens - 1))
        res.computed_tokens = res.prompt_tokens - res.hbm_hit_tokens - res.external_hit_tokens
        res.compute_seconds = res.computed_tokens / self.s.prefill_tokens_per_s
        if res.compute_seconds > 0:
            await asyncio.sleep(res.compute_seconds)
        for d in digests:
            self.hbm.add(d)
        res.new_chunks = digests[i + loaded :]
        m = self.metrics
        with m.lock:
            m.prefix_queries.inc(m.vllm_labels, res.prompt_tokens)
            m.prefix_hits.inc(m.vllm_labels, res.hbm_hit_tokens)
            m.prompt_tokens.inc(m.vllm_labels, res.prompt_tokens)
            for name, n in res.tiers.items():
                m.sim_chunk_hits.inc(m.tier_labels("tier", name), n)
            if any(name in MEMORY_TIERS for name in res.tiers):
                m.sim_memory_hit_requests.inc(m.vllm_labels, 1)
            if self.s.connector:
                ext_q = res.prompt_tokens - res.hbm_hit_tokens
                m.ext_queries.inc(m.vllm_labels, ext_q)
                m.ext_hits.inc(m.vllm_labels, res.external_hit_tokens)
            if self.s.connector and self.s.mp is None:  # in-process LMCache's own counters
                m.lmc_requested.inc(m.lmc_labels, ext_q)
                m.lmc_hit.inc(m.lmc_labels, loaded * cs)
                if loaded:  # LMCache times each retrieve (lookup hit to tokens loaded), as here
                    m.lmc_retrieve_speed.observe(m.lmc_labels, loaded * cs / max(res.read_seconds, 1e-9))
                    m.lmc_time_to_retrieve.observe(m.lmc_labels, res.read_seconds)
        return res

    def _serve_from_memory(self, digests: list[bytes], where: list[Optional[DirTier]],
                           start: float) -> tuple[list[str], float]:
        """The memory-serving fault mode (``StoreSettings.memory_restore_bps``): no chunk is read; the
        retrieval lasts as long as reading its bytes at that rate would, and reports the tiers. Its
        timing is exactly that rate's: the sleep's wake-up lag on a loaded machine (measured: a 5.7 ms
        retrieval timed 6.7-11.7 ms at load 6) would make the fault slower than it says."""
        nbytes = len(where) * self.s.chunk_bytes
        seconds = nbytes / self.s.memory_restore_bps
        time.sleep(max(0.0, start + seconds - time.perf_counter()))
        served = []
        for d, tier in zip(digests, where):
            if tier is None and self.cpu is not None:
                self.cpu.touch(d)
            served.append("local_cpu" if tier is None else tier.name)
        return served, seconds

    # --- write-behind --------------------------------------------------------------------------------
    def _store(self, digests: list[bytes]) -> None:
        """Runs in the writer thread: put new chunks in every configured tier."""
        m = self.metrics
        if self.s.mp is not None:  # store_now (probes, benchmarks): the answer awaited here
            try:
                self.s.mp.call({"op": "store", "digests": [d.hex() for d in digests],
                                "chunk_bytes": self.s.chunk_bytes})
            except MPServerError as exc:
                self._mp_store_failed(len(digests), exc)
            return
        start = time.perf_counter()
        stored = 0
        for d in digests:
            try:
                self._store_dirs(d)
            finally:
                if self.cpu is not None and self.dirs:
                    self.cpu.pins.unlock(d)
                with m.lock:
                    self._pending_chunks -= 1
                    m.sim_pending_writes.set(m.vllm_labels, self._pending_chunks)
            stored += 1
        elapsed = time.perf_counter() - start
        if stored:
            tokens = stored * self.s.chunk_size
            with m.lock:
                m.lmc_stored.inc(m.lmc_labels, tokens)
                m.lmc_store_speed.observe(m.lmc_labels, tokens / max(elapsed, 1e-9))

    def _store_dirs(self, d: bytes) -> None:
        """One chunk to every directory tier (a write error is logged and counted, not raised)."""
        m = self.metrics
        if self.s.tier_write_delay_s > 0 and self.dirs:
            time.sleep(self.s.tier_write_delay_s)
        data = b""
        for tier in self.dirs:
            if not data:
                data = with_crc(directio.chunk_payload(d, self.s.chunk_bytes))
            try:
                written, evicted = tier.write(d, data)
            except OSError as exc:
                reason = errno.errorcode.get(exc.errno or 0, "OSError")
                log.error(
                    "store of chunk %s to %s (%s) failed: %s [%s]; the request was served, the "
                    "chunk will be recomputed next time",
                    d.hex()[:16],
                    tier.name,
                    tier.directory,
                    exc.strerror or exc,
                    reason,
                )
                with m.lock:
                    m.sim_store_errors.inc(m.tier_labels("reason", reason))
                continue
            with m.lock:
                if written:
                    m.sim_write_bytes.inc(m.tier_labels("tier", tier.name), len(data))
                if evicted:
                    m.sim_evicted.inc(m.tier_labels("tier", tier.name), evicted)

    async def submit_store(self, digests: list[bytes]) -> None:
        """Store ``digests`` before the first token leaves: in-process, the CPU tier holds them at once
        and the writes go behind; multiprocess, the store is sent to the LMCache server now and its
        answer awaited behind. The real connector submits a request's store at the end of the forward
        pass that computed the token (``wait_for_save``), so a request sent after the token arrived
        finds it; sent from a thread after the token, it lagged under load and a lookup right after
        (the reset probe's third pass) missed what the real server hit."""
        if self.s.mp is None:
            self.store_behind(digests)
            return
        if not self.s.connector or not digests:
            return
        try:
            answer = await self.s.mp.submit({"op": "store", "digests": [d.hex() for d in digests],
                                             "chunk_bytes": self.s.chunk_bytes})
        except MPServerError as exc:
            self._mp_store_failed(len(digests), exc)
            return
        self._pending_writes.add(answer)
        answer.add_done_callback(lambda fut: self._mp_store_done(fut, len(digests)))

    def _mp_store_done(self, fut: asyncio.Future[dict[str, object]], chunks: int) -> None:
        self._pending_writes.discard(fut)
        exc = None if fut.cancelled() else fut.exception()
        if isinstance(exc, MPServerError):
            self._mp_store_failed(chunks, exc)
        elif exc is not None:
            log.error("store of %d chunk(s) to the LMCache server failed: %r", chunks, exc)

    def _mp_store_failed(self, chunks: int, exc: MPServerError) -> None:
        log.error("store of %d chunk(s) to the LMCache server failed: %s", chunks, exc)
        with self.metrics.lock:
            self.metrics.sim_store_errors.inc(self.metrics.tier_labels("reason", "lmcache_server"))

    def store_behind(self, digests: list[bytes]) -> None:
        """Schedule the write of ``digests`` (call after the response has started)."""
        if not self.s.connector or not digests or (self.cpu is None and not self.dirs and self.s.mp is None):
            return
        if self.s.mp is None:
            self._admit(digests)
        fut = asyncio.get_running_loop().run_in_executor(self._writer, self._store, list(digests))
        self._pending_writes.add(fut)
        fut.add_done_callback(self._write_done)

    def store_now(self, digests: list[bytes]) -> None:
        """Store ``digests`` in every tier and return once written (probes and benchmarks)."""
        if self.s.mp is None:
            self._admit(digests)
        self._store(list(digests))

    def _admit(self, digests: list[bytes]) -> None:
        """LMCache's in-process store: the CPU tier holds the chunks at once, and each stays
        pinned there until its asynchronous disk write completed (an evict keeps it meanwhile); each
        directory tier makes room for them now (``DirTier.admit``), and writes them behind."""
        m = self.metrics
        if self.cpu is not None:
            before = self.cpu.evicted
            for d in digests:
                self.cpu.add(d)
                if self.dirs:
                    self.cpu.pins.lock(d)
            with m.lock:
                m.sim_evicted.inc(m.tier_labels("tier", "local_cpu"), self.cpu.evicted - before)
        nbytes = directio.aligned_size(self.s.chunk_bytes)
        for tier in self.dirs:
            evicted = 0
            for d in digests:
                try:
                    evicted += tier.admit(d, nbytes)[1]
                except OSError as exc:
                    # no room while earlier stores are in flight: LMCache skips the store (a warning in
                    # its log); the emulator's write skips it too. Not a storage error: debug only.
                    log.debug("store of chunk %s to %s skipped: %s", d.hex()[:16], tier.name, exc)
            if evicted:
                with m.lock:
                    m.sim_evicted.inc(m.tier_labels("tier", tier.name), evicted)
        with m.lock:
            self._pending_chunks += len(digests)
            m.sim_pending_writes.set(m.vllm_labels, self._pending_chunks)

    def _write_done(self, fut: asyncio.Future[None]) -> None:
        self._pending_writes.discard(fut)
        if not fut.cancelled() and fut.exception() is not None:
            log.error("write-behind failed: %r", fut.exception())

    async def drain(self) -> None:
        """Wait for pending write-behind (shutdown, tests)."""
        while self._pending_writes:
            await asyncio.gather(*list(self._pending_writes), return_exceptions=True)

    def evict(self, tiers: list[str]) -> dict[str, int]:
        """Drop in-process tiers (``hbm``, ``local_cpu``), as an engine restart would."""
        out: dict[str, int] = {}
        if "hbm" in tiers:
            out["hbm"] = self.hbm.clear()
        if "local_cpu" in tiers and self.cpu is not None:
            out["local_cpu"] = self.cpu.clear()
        return out

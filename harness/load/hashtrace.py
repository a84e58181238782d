"""Hash-id traces: the published KV-reuse trace formats, read, filtered, replayed, and their reuse.

Formats (JSONL, one request a line):

* Mooncake FAST'25: ``timestamp`` (ms from the start), ``input_length``, ``output_length``,
  ``hash_ids`` (one id per 512-token block of the prompt; the last block may be partial).
* Qwen-Bailian: the same keys with 16-token blocks, plus ``chat_id``, ``parent_chat_id``,
  ``turn``, ``type`` (kept as workload keys in the records). Its ``timestamp`` is in seconds:
  ``time_unit: s``.

A prompt is built block by block: block ``h`` is ``block_size`` vocabulary words drawn from a
generator seeded with ``(seed, h)``, so equal ids give identical token blocks (wherever they
occur) and different ids differ; the last block is cut to the request's ``input_length``. The ids
of these traces name a block's whole prefix, so the engine's chained chunk hashes see the same
sharing as the trace.

Expected reuse (:func:`expected_reuse`) is computed from the trace alone: requests in order, an
LRU of ``capacity`` blocks, and for each request the leading run of its *full* blocks found in
the LRU counts as reused (an engine reuses a prefix only, and never a partial block); then all
its blocks become most recently used, in order. That is what vLLM's prefix cache and LMCache's
lookup deliver for one instance serving the requests one after another.
"""

from __future__ import annotations

import json
import random
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from harness.load.errors import LoadInputError
from harness.load.jsonl import json_objects, trace_seconds
from harness.load.vocabulary import VOCABULARY

MOONCAKE_BLOCK = 512
BAILIAN_BLOCK = 16


@dataclass(frozen=True)
class TraceRequest:
    """One line of a hash-id trace."""

    line: int
    timestamp_s: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...]
    extra: dict[str, Any] = field(default_factory=dict)


def _int_field(obj: dict[str, Any], name: str, where: str, *, minimum: int) -> int:
    value = obj.get(name)
    if value is None:
        raise LoadInputError(f"{where}: field {name!r} is missing (expected an integer >= {minimum})")
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise LoadInputError(f"{where}: field {name!r} = {value!r}: expected an integer >= {minimum}")
    return value


def parse_trace(path: Path, *, block_size: int, time_unit: str = "ms") -> list[TraceRequest]:
    """Read a hash-id trace; a bad line raises :class:`LoadInputError` naming file, line and field."""
    if block_size <= 0:
        raise LoadInputError(f"hash trace: block_size {block_size}: expected > 0")
    if time_unit not in ("ms", "s"):
        raise LoadInputError(f"hash trace: time_unit {time_unit!r}: expected 'ms' or 's'")
    scale = 1e-3 if time_unit == "ms" else 1.0
    out: list[TraceRequest] = []
    for no, where, obj in json_objects(path, "hash trace"):
        ts = obj.pop("timestamp", None)
        if ts is None:
            raise LoadInputError(f"{where}: field 'timestamp' is missing (expected {time_unit} >= 0)")
        ts_s = trace_seconds(ts, where, unit=time_unit, scale=scale)
        in_len = _int_field(obj, "input_length", where, minimum=1)
        out_len = _int_field(obj, "output_length", where, minimum=1)
        ids = obj.get("hash_ids")
        if not isinstance(ids, list) or not all(isinstance(h, int) and not isinstance(h, bool) for h in ids):
            raise LoadInputError(f"{where}: field 'hash_ids' = {str(ids)[:60]}: expected a list of integers")
        need = -(-in_len // block_size)
        if len(ids) != need:
            raise LoadInputError(
                f"{where}: field 'hash_ids' has {len(ids)} ids but input_length {in_len} needs {need} "
                f"blocks of {block_size} tokens (is block_size right for this trace?)")
        for k in ("input_length", "output_length", "hash_ids"):
            obj.pop(k)
        out.append(TraceRequest(no, ts_s, in_len, out_len, tuple(ids), obj))
    if not out:
        raise LoadInputError(f"hash trace {path}: no requests")
    for prev, cur in zip(out, out[1:]):
        if cur.timestamp_s < prev.timestamp_s:
            raise LoadInputError(f"{path}:{cur.line}: field 'timestamp' goes back in time "
                                 f"(line {prev.line} is later): a trace is in arrival order")
    return out


def select(reqs: Sequence[TraceRequest], *, max_context: int = 0, start_s: float = 0.0, end_s: float = 0.0,
           sample: float = 1.0, max_requests: int = 0, seed: int = 0) -> list[TraceRequest]:
    """The requests kept by the filters, in trace order: ``input + output <= max_context`` (0: no
    limit), ``start_s <= timestamp < end_s`` (0: no end), a seeded ``sample`` fraction, then the
    first ``max_requests`` (0: all)."""
    if not 0.0 < sample <= 1.0:
        raise LoadInputError(f"hash trace: sample {sample}: expected 0 < sample <= 1")
    if end_s and end_s <= start_s:
        raise LoadInputError(f"hash trace: time window [{start_s}, {end_s}) s is empty")
    rng = random.Random(seed)
    kept = []
    for r in reqs:
        keep = rng.random() < sample  # drawn for every line, so a filter does not move the sample
        if max_context and r.input_length + r.output_length > max_context:
            continue
        if r.timestamp_s < start_s or (end_s and r.timestamp_s >= end_s):
            continue
        if keep:
            kept.append(r)
    return kept[:max_requests] if max_requests else kept


def block_words(seed: int, hash_id: int, block_size: int) -> list[str]:
    """The vocabulary words of block ``hash_id`` (the same for the same seed and id)."""
    return random.Random(f"kvgate-block:{seed}:{hash_id}").choices(VOCABULARY, k=block_size)


def build_prompt(req: TraceRequest, block_size: int, seed: int,
                 cache: Optional[OrderedDict[int, list[str]]] = None, cache_blocks: int = 4096) -> str:
    """The prompt of ``req``: its blocks' words, the last block cut to ``input_length``."""
    out: list[str] = []
    for h in req.hash_ids:
        blk = cache.get(h) if cache is not None else None
        if blk is None:
            blk = block_words(seed, h, block_size)
            if cache is not None:
                cache[h] = blk
                if len(cache) > cache_blocks:
                    cache.popitem(last=False)
        elif cache is not None:
            cache.move_to_end(h)
        out.extend(blk)
    return " ".join(out[: req.input_length])


@dataclass(frozen=True)
class ReuseEstimate:
    """What the trace promises: ``reused_tokens`` of ``prompt_tokens`` served from a tier of
    ``capacity_blocks`` blocks (0: unbounded)."""

    prompt_tokens: int
    reused_tokens: int
    capacity_blocks: int
    block_size: int

    @property
    def ratio(self) -> float:
        return self.reused_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"prompt_tokens": self.prompt_tokens, "reused_tokens": self.reused_tokens,
                "expected_hit_rate": round(self.ratio, 6), "lru_capacity_blocks": self.capacity_blocks,
                "block_size": self.block_size}


def capacity_blocks_for_bytes(capacity_bytes: int, block_size: int, kv_bytes_per_token: int) -> int:
    """How many whole blocks a tier of ``capacity_bytes`` holds."""
    if block_size <= 0 or kv_bytes_per_token <= 0:
        raise LoadInputError("hash trace: block_size and kv_bytes_per_token must be > 0 to size the LRU in bytes")
    return capacity_bytes // (block_size * kv_bytes_per_token)


def expected_reuse(reqs: Iterable[tuple[int, Sequence[int]]], block_size: int,
                   capacity_blocks: int = 0, *, count_from: int = 0) -> ReuseEstimate:
    """Expected reuse of ``(input_length, hash_ids)`` requests served in order by one LRU of
    ``capacity_blocks`` blocks (0: unbounded): per request, the leading run of full blocks present
    counts; then every block of the request is made most recently used, in order. Requests before
    index ``count_from`` only warm the LRU (a populate pass) and are not counted."""
    lru: OrderedDict[int, None] = OrderedDict()
    total = reused = 0
    for index, (in_len, ids) in enumerate(reqs):
        counted = index >= count_from
        full = min(len(ids), in_len // block_size)
        run = 0
        while run < full and ids[run] in lru:
            run += 1
        if counted:
            total += in_len
            reused += run * block_size
        for h in ids[:full]:  # a partial block is never stored by an engine
            lru[h] = None
            lru.move_to_end(h)
            if capacity_blocks and len(lru) > capacity_blocks:
                lru.popitem(last=False)
    return ReuseEstimate(total, reused, capacity_blocks, block_size)


def working_set_trace(*, prefixes: int, prefix_blocks: int, block_size: int, suffix_len: int = 0,
                      passes: int = 1, order: str = "cyclic", output_length: int = 4,
                      seed: int = 0, first_id: int = 0) -> tuple[list[TraceRequest], int]:
    """The requests of one capacity-cliff point and how many of them populate.

    A working set of ``prefixes`` distinct prefixes of ``prefix_blocks`` full blocks each: first a
    populate pass (every prefix once, in order), then ``passes`` x ``prefixes`` measured requests,
    in the populate order each pass (``cyclic``: the pattern that turns an LRU's capacity into a
    cliff) or drawn uniformly with ``seed`` (``random``: a gradual fall). Every request ends with
    ``suffix_len`` tokens (< ``block_size``) of a block id used once: a partial block, never reused,
    so the engine computes at least those tokens itself, as a real engine always computes the last.
    Block ids start at ``first_id``: points of one sweep that use disjoint ids share no block, so
    one engine can serve them in turn (an earlier point's blocks are only older entries of each
    tier, evicted first). Timestamps are 100 ms apart (a closed-loop replay ignores them)."""
    if prefixes < 1 or prefix_blocks < 1 or block_size < 1 or passes < 1:
        raise LoadInputError("working set: prefixes, prefix_blocks, block_size and passes must be >= 1")
    if not 0 <= suffix_len < block_size:
        raise LoadInputError(f"working set: suffix_len {suffix_len}: expected 0 <= suffix_len < block_size "
                             f"({block_size}), a partial block")
    if order not in ("cyclic", "random"):
        raise LoadInputError(f"working set: order {order!r}: expected 'cyclic' or 'random'")
    rng = random.Random(f"kvgate-working-set:{seed}:{prefixes}")
    sequence = list(range(prefixes))
    if order == "cyclic":
        sequence += list(range(prefixes)) * passes
    else:
        sequence += [rng.randrange(prefixes) for _ in range(prefixes * passes)]
    next_id = first_id + prefixes * prefix_blocks
    out: list[TraceRequest] = []
    for line, p in enumerate(sequence, start=1):
        ids = [first_id + p * prefix_blocks + j for j in range(prefix_blocks)]
        if suffix_len:
            ids.append(next_id)
            next_id += 1
        out.append(TraceRequest(line, (line - 1) * 0.1, prefix_blocks * block_size + suffix_len,
                                output_length, tuple(ids), {"prefix": p}))
    return out, prefixes


def trace_lines(reqs: Iterable[TraceRequest]) -> Iterator[str]:
    """``reqs`` as Mooncake FAST'25 JSONL lines (timestamps in ms), to keep beside the results:
    the same file replays with the ``hash-trace`` workload."""
    for r in reqs:
        yield json.dumps({"timestamp": round(r.timestamp_s * 1000), "input_length": r.input_length,
                          "output_length": r.output_length, "hash_ids": list(r.hash_ids)}) + "\n"

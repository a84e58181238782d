"""A generator of hash-id traces (Mooncake FAST'25 JSONL) with a configurable reuse.

Each request has ``blocks`` blocks (uniform in ``blocks * [1 - spread, 1 + spread]``); with
probability ``reuse`` its first ``prefix_blocks`` blocks are one of ``prefixes`` shared prefixes
(chosen uniformly), the rest are ids never used before. Arrivals are Poisson at ``rate``
requests/s, timestamps in ms (``time_unit: s`` for the Bailian layout). The last block is partial
by up to ``block_size - 1`` tokens, as in the real traces. Same parameters and seed, same bytes.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TextIO

from harness.load.errors import LoadInputError


@dataclass(frozen=True)
class TraceGenSpec:
    requests: int = 100
    block_size: int = 512
    blocks: int = 8
    spread: float = 0.0
    prefix_blocks: int = 4
    prefixes: int = 4
    reuse: float = 0.5
    rate: float = 1.0
    output_length: int = 16
    partial: bool = True
    time_unit: str = "ms"
    seed: int = 0

    def check(self) -> None:
        def bad(name: str, expected: str) -> LoadInputError:
            return LoadInputError(f"trace-gen: {name} = {getattr(self, name)!r}: expected {expected}")

        for name in ("requests", "block_size", "blocks", "prefixes", "output_length"):
            if getattr(self, name) < 1:
                raise bad(name, "an integer >= 1")
        if not 0 <= self.prefix_blocks <= self.blocks:
            raise bad("prefix_blocks", f"0..blocks ({self.blocks})")
        if not 0.0 <= self.reuse <= 1.0:
            raise bad("reuse", "a fraction 0..1")
        if not 0.0 <= self.spread < 1.0:
            raise bad("spread", "0 <= spread < 1")
        if not self.rate > 0:
            raise bad("rate", "requests/s > 0")
        if self.time_unit not in ("ms", "s"):
            raise bad("time_unit", "'ms' or 's'")


def generate(spec: TraceGenSpec) -> Iterator[dict[str, object]]:
    """The trace's lines as dicts (Mooncake keys), deterministic under ``spec.seed``."""
    spec.check()
    rng = random.Random(spec.seed)
    next_id = 0

    def fresh(n: int) -> list[int]:
        nonlocal next_id
        ids = list(range(next_id, next_id + n))
        next_id += n
        return ids

    pool = [fresh(spec.prefix_blocks) for _ in range(spec.prefixes)]
    t = 0.0
    for i in range(spec.requests):
        if i:
            t += rng.expovariate(spec.rate)
        lo = max(1, round(spec.blocks * (1 - spec.spread)))
        hi = max(lo, round(spec.blocks * (1 + spec.spread)))
        n = max(rng.randint(lo, hi), spec.prefix_blocks + 1)
        if spec.prefix_blocks and rng.random() < spec.reuse:
            ids = pool[rng.randrange(spec.prefixes)] + fresh(n - spec.prefix_blocks)
        else:
            ids = fresh(n)
        cut = rng.randrange(spec.block_size) if spec.partial else 0
        ts: float = round(t * 1000) if spec.time_unit == "ms" else round(t, 3)
        yield {"timestamp": ts, "input_length": n * spec.block_size - cut,
               "output_length": spec.output_length, "hash_ids": ids}


def write_trace(spec: TraceGenSpec, out: TextIO) -> int:
    """Write the trace as JSONL to ``out``; returns the number of lines."""
    n = 0
    for obj in generate(spec):
        out.write(json.dumps(obj, separators=(", ", ": ")) + "\n")
        n += 1
    return n


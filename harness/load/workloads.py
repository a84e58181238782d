"""Workloads: deterministic request lists built under a seed.

Prompts are words drawn from a fixed vocabulary of 1024 lowercase ASCII words, joined by single
spaces. The KV emulator tokenizes by whitespace (one word = one token), so ``input_tokens`` is
exact for it; on a real engine the server's ``usage.prompt_tokens`` replaces the client's count
in the records.

Kinds (``build_workload(kind, params, seed)``; an unknown kind or parameter lists the valid ones):

* ``random``: ``num_requests``, ``input_len``, ``output_len``, ``range_ratio`` (lengths uniform in
  ``len * [1 - r, 1 + r]``, as vLLM's random dataset), ``warmup`` (extra requests run first, not
  measured).
* ``shared-prefix``: ``num_groups`` x ``prompts_per_group`` prompts; each group shares a prefix of
  ``prefix_len`` words, each prompt adds a ``suffix_len`` suffix; order shuffled under the seed.
* ``multi-round``: ``num_users`` x ``num_rounds``; round r of a user sends the whole history
  (first context of ``context_len``, then each question of ``question_len`` and a synthetic answer
  of ``output_len`` words) plus the new question. Requests go round by round, so each round reuses
  the previous round's prefix.
* ``long-doc``: ``num_docs`` documents of ``doc_len`` words; the warm-up list sends each document
  once (with a question of ``query_len``); the measured list has ``num_queries`` questions, a
  ``hit_ratio`` fraction on warmed documents and the rest on fresh documents never sent before.
  The warm-up list is the populate pass of a cold-restore measurement.
* ``trace``: ``path`` of a JSONL file, one request per line: ``prompt`` (string) or ``input_len``,
  ``output_len`` (or ``max_tokens``), optional ``timestamp`` (seconds from the start, replayed as
  the arrival time), optional ``request_id``; other keys are kept as workload keys.
* ``hash-trace``: ``path`` of a hash-id trace (Mooncake FAST'25 or Qwen-Bailian JSONL, see
  ``harness.load.hashtrace``), ``block_size`` (512; 16 for Bailian), ``time_unit`` (``ms``/``s``),
  ``replay`` (``timestamps``: open loop at the trace's times divided by ``speed``; ``closed``),
  filters ``max_context``, ``start_s``/``end_s``, ``sample`` (seeded), ``max_requests``; and the
  LRU the expected reuse is computed for: ``lru_blocks``, or ``lru_bytes`` with
  ``kv_bytes_per_token`` (0: unbounded). The estimate is in ``Workload.expected``.
* ``sessions`` and ``agent``: multi-turn conversations whose history grows by each real answer
  (``harness.load.sessions``): ``num_sessions``, ``num_turns``, ``shared_prefix_len`` (shared by
  every session: an agent's tools), ``context_len``, ``question_len``, ``output_len``,
  ``think_time_s``, ``think_dist``, ``max_context``. ``agent`` differs by its defaults (a 4096-word
  shared prefix, 12 short turns, short think time). ``Workload.sessions`` holds the plan; the
  runner builds each turn after the previous answer (``measured`` is empty).
"""

from __future__ import annotations

import hashlib
import itertools
import random
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Optional, Union, overload

from harness.load import hashtrace
from harness.load.errors import LoadInputError
from harness.load.jsonl import json_objects, trace_seconds
from harness.load.sessions import SESSION_PARAMS, SessionPlan
from harness.load.spec import RequestSpec
from harness.load.vocabulary import VOCABULARY, words  # noqa: F401 - VOCABULARY re-exported


def count_tokens(text: str) -> int:
    """The emulator's tokenization: whitespace-separated words."""
    return len(text.split())


# Long prompts are built lazily: a 128K-word prompt is about 900 KB of text, and a workload of
# many is held for the whole run. A ``words(rng, n)`` call of at least LAZY_MIN_WORDS words is
# recorded as the generator's state (2.5 KB packed) and replayed when the request is about to be
# sent, giving the very same words as the eager build (prompts must not drift between versions).
LAZY_MIN_WORDS = 1024


class _DeferredWords:
    """``words(rng, n)`` as it would have run from the generator state recorded here."""

    __slots__ = ("key", "n")

    def __init__(self, rng: random.Random, n: int) -> None:
        version, state, gauss = rng.getstate()
        assert version == 3 and gauss is None  # words() never draws a gauss: nothing to keep
        self.key = array("I", state)
        self.n = n
        # advance ``rng`` exactly as words() would: rng.choices draws one random() per word
        draw = rng.random
        for _ in itertools.repeat(None, n):
            draw()

    def text(self) -> str:
        rng = random.Random()
        rng.setstate((3, tuple(self.key), None))
        return words(rng, self.n)


class _DeferredBlocks:
    """A hash-trace request's prompt (``hashtrace.build_prompt``), built when sent: its blocks are
    pure functions of (seed, hash id), so the request keeps only its ids."""

    __slots__ = ("req", "block_size", "seed", "n")

    def __init__(self, req: hashtrace.TraceRequest, block_size: int, seed: int) -> None:
        self.req = req
        self.block_size = block_size
        self.seed = seed
        self.n = min(req.input_length, len(req.hash_ids) * block_size)

    def text(self) -> str:
        return hashtrace.build_prompt(self.req, self.block_size, self.seed)


_Part = Union[str, _DeferredWords, _DeferredBlocks]


def _words_part(rng: random.Random, n: int) -> _Part:
    return _DeferredWords(rng, n) if n >= LAZY_MIN_WORDS else words(rng, n)


def _part_words(part: _Part) -> int:
    return count_tokens(part) if isinstance(part, str) else part.n


@dataclass(frozen=True)
class RequestRecipe:
    """A request whose prompt is built when it is needed (:meth:`build`): the parts, joined by
    single spaces as the eager builders join them."""

    request_id: str
    parts: tuple[_Part, ...]
    max_tokens: int
    meta: dict[str, Any] = field(default_factory=dict)
    at_s: Optional[float] = None

    @property
    def deferred(self) -> bool:
        """Whether building it draws words (a long part), or only joins strings drawn up front."""
        return any(not isinstance(p, str) for p in self.parts)

    @property
    def input_tokens(self) -> int:
        return sum(_part_words(p) for p in self.parts)

    def build(self) -> RequestSpec:
        text = " ".join(p if isinstance(p, str) else p.text() for p in self.parts).strip()
        # the words of the parts: count_tokens(text) without splitting a long text again
        return RequestSpec(self.request_id, text, self.input_tokens, self.max_tokens, meta=self.meta,
                           at_s=self.at_s)

    def with_id(self, request_id: str) -> RequestRecipe:
        return replace(self, request_id=request_id)


class LazyRequests(Sequence[RequestSpec]):
    """A workload's requests as recipes: indexing or iterating builds each prompt then (a
    ``list()`` of it is the eager list). The runner takes the recipes and builds each prompt
    just before its request is sent, off the event loop, timing it (``build_ms``)."""

    def __init__(self, recipes: Iterable[RequestRecipe]) -> None:
        self.recipes: list[RequestRecipe] = list(recipes)

    def __len__(self) -> int:
        return len(self.recipes)

    @overload
    def __getitem__(self, i: int) -> RequestSpec: ...

    @overload
    def __getitem__(self, i: slice) -> LazyRequests: ...

    def __getitem__(self, i: Union[int, slice]) -> Union[RequestSpec, LazyRequests]:
        if isinstance(i, slice):
            return LazyRequests(self.recipes[i])
        return self.recipes[i].build()

    def __iter__(self) -> Iterator[RequestSpec]:
        for r in self.recipes:
            yield r.build()

    # as the lists they replace: equal to the same requests, concatenated into a list
    def __eq__(self, other: object) -> bool:
        if isinstance(other, (LazyRequests, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __add__(self, other: Sequence[RequestSpec]) -> list[RequestSpec]:
        return list(self) + list(other)

    def __radd__(self, other: Sequence[RequestSpec]) -> list[RequestSpec]:
        return list(other) + list(self)


@dataclass
class Workload:
    """A built workload: ``warmup`` runs first and is not measured; ``measured`` is measured."""

    kind: str
    params: dict[str, Any]
    seed: int
    measured: Sequence[RequestSpec]  # a list, or LazyRequests (prompts built when sent)
    warmup: Sequence[RequestSpec] = field(default_factory=list)
    # what the workload itself promises (hash-trace: the expected reuse), reported beside the results
    expected: dict[str, Any] = field(default_factory=dict)
    # sessions / agent: turns are built as answers arrive, so ``measured`` is empty and the runner
    # plays these sessions instead
    sessions: Optional[SessionPlan] = None

    def describe(self) -> dict[str, Any]:
        measured = self.sessions.total_turns if self.sessions is not None else len(self.measured)
        out = {"kind": self.kind, "params": self.params, "seed": self.seed,
               "warmup_requests": len(self.warmup), "measured_requests": measured}
        if self.sessions is not None:
            out["sessions"] = self.sessions.describe()
        if self.expected:
            out["expected"] = self.expected
        return out


_REQUIRED = object()


def _params(kind: str, given: Mapping[str, Any], schema: dict[str, tuple[type, Any]]) -> dict[str, Any]:
    unknown = sorted(set(given) - set(schema))
    if unknown:
        raise LoadInputError(f"workload {kind!r}: unknown parameter(s) {', '.join(unknown)}; "
                             f"accepted: {', '.join(sorted(schema))}")
    out: dict[str, Any] = {}
    for name, (typ, default) in schema.items():
        if name not in given or given[name] is None:
            if default is _REQUIRED:
                raise LoadInputError(f"workload {kind!r}: parameter {name!r} is required")
            out[name] = default
            continue
        value = given[name]
        try:
            if typ is int:
                if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                    raise ValueError
                value = int(value)
            elif typ is float:
                if isinstance(value, bool):
                    raise ValueError
                value = float(value)
            elif typ is str:
                value = str(value)
        except (TypeError, ValueError):
            raise LoadInputError(f"workload {kind!r}: parameter {name!r} = {value!r}: expected "
                                 f"{typ.__name__}") from None
        if typ in (int, float) and value < 0:
            raise LoadInputError(f"workload {kind!r}: parameter {name!r} = {value!r}: expected >= 0")
        out[name] = value
    return out


def _positive(kind: str, p: Mapping[str, Any], *names: str) -> None:
    for n in names:
        if p[n] <= 0:
            raise LoadInputError(f"workload {kind!r}: parameter {n!r} = {p[n]!r}: expected > 0")


def _random(p: dict[str, Any], seed: int) -> Workload:
    _positive("random", p, "input_len", "output_len")
    if not 0.0 <= p["range_ratio"] < 1.0:
        raise LoadInputError(f"workload 'random': range_ratio {p['range_ratio']}: expected 0 <= r < 1")
    rng = random.Random(seed)

    def length(base: int) -> int:
        r = p["range_ratio"]
        lo, hi = max(1, int(base * (1 - r))), max(1, int(base * (1 + r)))
        return rng.randint(lo, hi)

    def make(prefix: str, n: int) -> LazyRequests:
        out = []
        for i in range(n):
            il, ol = length(p["input_len"]), length(p["output_len"])
            out.append(RequestRecipe(f"{prefix}{i:06d}", (_words_part(rng, il),), ol, meta={"workload": "random"}))
        return LazyRequests(out)

    warm = make("rnd-warm-", p["warmup"])
    return Workload("random", p, seed, make("rnd-", p["num_requests"]), warm)


def _shared_prefix(p: dict[str, Any], seed: int) -> Workload:
    _positive("shared-prefix", p, "num_groups", "prompts_per_group", "output_len")
    rng = random.Random(seed)
    specs = []
    for g in range(p["num_groups"]):
        prefix = words(rng, p["prefix_len"])
        for s in range(p["prompts_per_group"]):
            suffix = words(rng, p["suffix_len"])
            prompt = f"{prefix} {suffix}".strip()
            specs.append(RequestSpec(f"sp-g{g:03d}-s{s:04d}", prompt, count_tokens(prompt), p["output_len"],
                                     meta={"workload": "shared-prefix", "group": g, "prefix_len": p["prefix_len"]}))
    rng.shuffle(specs)
    return Workload("shared-prefix", p, seed, specs)


def _multi_round(p: dict[str, Any], seed: int) -> Workload:
    _positive("multi-round", p, "num_users", "num_rounds", "question_len", "output_len")
    rng = random.Random(seed)
    history = [words(rng, p["context_len"]) for _ in range(p["num_users"])]
    chat: list[list[dict[str, str]]] = [[{"role": "system", "content": h}] if h else [] for h in history]
    specs = []
    for r in range(p["num_rounds"]):
        for u in range(p["num_users"]):
            question = words(rng, p["question_len"])
            prompt = f"{history[u]} {question}".strip()
            msgs = tuple(chat[u] + [{"role": "user", "content": question}])
            specs.append(RequestSpec(f"mr-u{u:03d}-r{r:03d}", prompt, count_tokens(prompt), p["output_len"],
                                     messages=msgs, meta={"workload": "multi-round", "user": u, "round": r}))
            answer = words(rng, p["output_len"])  # synthetic: the history must be known up front
            history[u] = f"{prompt} {answer}"
            chat[u] = list(msgs) + [{"role": "assistant", "content": answer}]
    return Workload("multi-round", p, seed, specs)


def _long_doc(p: dict[str, Any], seed: int) -> Workload:
    _positive("long-doc", p, "num_docs", "doc_len", "output_len")
    if not 0.0 <= p["hit_ratio"] <= 1.0:
        raise LoadInputError(f"workload 'long-doc': hit_ratio {p['hit_ratio']}: expected 0..1")
    rng = random.Random(seed)
    docs = [_words_part(rng, p["doc_len"]) for _ in range(p["num_docs"])]
    warm = []
    for d, doc in enumerate(docs):
        warm.append(RequestRecipe(f"ld-warm-d{d:04d}", (doc, words(rng, p["query_len"])), p["output_len"],
                                  meta={"workload": "long-doc", "doc": d, "phase": "warmup"}))
    n = p["num_queries"]
    hits = round(n * p["hit_ratio"])
    kinds = [True] * hits + [False] * (n - hits)
    rng.shuffle(kinds)
    measured = []
    fresh = 0
    for i, hit in enumerate(kinds):
        if hit:
            d = i % p["num_docs"]
            doc, doc_id = docs[d], f"d{d:04d}"
        else:
            doc, doc_id = _words_part(rng, p["doc_len"]), f"fresh{fresh:04d}"
            fresh += 1
        measured.append(RequestRecipe(f"ld-q{i:05d}", (doc, words(rng, p["query_len"])), p["output_len"],
                                      meta={"workload": "long-doc", "doc": doc_id, "hit": hit, "phase": "query"}))
    return Workload("long-doc", p, seed, LazyRequests(measured), LazyRequests(warm))


def _trace(p: dict[str, Any], seed: int) -> Workload:
    path = Path(p["path"])
    rng = random.Random(seed)
    specs = []
    for no, where, obj in json_objects(path, "trace"):
        obj = dict(obj)
        out_len = obj.pop("output_len", obj.pop("max_tokens", None))
        if not isinstance(out_len, int) or isinstance(out_len, bool) or out_len <= 0:
            raise LoadInputError(f"{where}: field 'output_len' (or 'max_tokens'): expected a positive integer")
        prompt = obj.pop("prompt", None)
        in_len = obj.pop("input_len", None)
        if prompt is None:
            if not isinstance(in_len, int) or isinstance(in_len, bool) or in_len <= 0:
                raise LoadInputError(f"{where}: expected 'prompt' (string) or 'input_len' (positive integer)")
            prompt = words(rng, in_len)
        elif not isinstance(prompt, str):
            raise LoadInputError(f"{where}: field 'prompt': expected a string")
        ts = obj.pop("timestamp", obj.pop("at_s", None))
        if ts is not None:
            ts = trace_seconds(ts, where)
        rid = str(obj.pop("request_id", f"tr-{no:06d}"))
        meta = {"workload": "trace", "trace_line": no, **obj}
        specs.append(RequestSpec(rid, prompt, count_tokens(prompt), out_len, meta=meta,
                                 at_s=float(ts) if ts is not None else None))
    if not specs:
        raise LoadInputError(f"trace {path}: no requests")
    if len({s.request_id for s in specs}) != len(specs):
        raise LoadInputError(f"trace {path}: request_id values are not unique")
    return Workload("trace", {"path": str(path)}, seed, specs)


def _hash_trace(p: dict[str, Any], seed: int) -> Workload:
    _positive("hash-trace", p, "block_size")
    if p["replay"] not in ("timestamps", "closed"):
        raise LoadInputError(f"workload 'hash-trace': replay {p['replay']!r}: expected 'timestamps' or 'closed'")
    if not p["speed"] > 0:
        raise LoadInputError(f"workload 'hash-trace': speed {p['speed']}: expected > 0")
    bs = p["block_size"]
    path = Path(p["path"])
    reqs = hashtrace.select(
        hashtrace.parse_trace(path, block_size=bs, time_unit=p["time_unit"]),
        max_context=p["max_context"], start_s=p["start_s"], end_s=p["end_s"], sample=p["sample"],
        max_requests=p["max_requests"], seed=seed)
    if not reqs:
        raise LoadInputError(f"hash trace {path}: the filters keep no request")
    if p["lru_bytes"]:
        capacity = hashtrace.capacity_blocks_for_bytes(p["lru_bytes"], bs, p["kv_bytes_per_token"])
        if capacity == 0:
            raise LoadInputError(f"workload 'hash-trace': lru_bytes {p['lru_bytes']} holds no block of {bs} tokens")
    else:
        capacity = p["lru_blocks"]
    t0 = reqs[0].timestamp_s
    cache: OrderedDict[int, list[str]] = OrderedDict()
    specs = []
    for r in reqs:
        # a long request keeps its ids and is built when sent; a short one now, blocks cached
        part: _Part = (_DeferredBlocks(r, bs, seed) if r.input_length >= LAZY_MIN_WORDS
                       else hashtrace.build_prompt(r, bs, seed, cache))
        at = (r.timestamp_s - t0) / p["speed"] if p["replay"] == "timestamps" else None
        meta = {"workload": "hash-trace", "trace_line": r.line, "blocks": len(r.hash_ids), **r.extra}
        specs.append(RequestRecipe(f"ht-{r.line:07d}", (part,), r.output_length, meta=meta, at_s=at))
    est = hashtrace.expected_reuse(((r.input_length, r.hash_ids) for r in reqs), bs, capacity)
    # the file's digest: two runs on different traces at the same path are not alike
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return Workload("hash-trace", p, seed, LazyRequests(specs),
                    expected={"reuse": est.as_dict(), "trace_requests": len(reqs), "trace_sha256": digest})


def _sessions(kind: str) -> Callable[[dict[str, Any], int], Workload]:
    def build(p: dict[str, Any], seed: int) -> Workload:
        return Workload(kind, p, seed, [], sessions=SessionPlan.from_params(kind, p, seed))
    return build


_Builder = Callable[[dict[str, Any], int], Workload]
WORKLOADS: dict[str, tuple[dict[str, tuple[type, Any]], _Builder]] = {
    "random": ({"num_requests": (int, _REQUIRED), "input_len": (int, _REQUIRED), "output_len": (int, _REQUIRED),
                "range_ratio": (float, 0.0), "warmup": (int, 0)}, _random),
    "shared-prefix": ({"num_groups": (int, _REQUIRED), "prompts_per_group": (int, _REQUIRED),
                       "prefix_len": (int, _REQUIRED), "suffix_len": (int, _REQUIRED),
                       "output_len": (int, _REQUIRED)}, _shared_prefix),
    "multi-round": ({"num_users": (int, _REQUIRED), "num_rounds": (int, _REQUIRED), "context_len": (int, 0),
                     "question_len": (int, _REQUIRED), "output_len": (int, _REQUIRED)}, _multi_round),
    "long-doc": ({"num_docs": (int, _REQUIRED), "doc_len": (int, _REQUIRED), "query_len": (int, 16),
                  "num_queries": (int, _REQUIRED), "hit_ratio": (float, 1.0),
                  "output_len": (int, _REQUIRED)}, _long_doc),
    "trace": ({"path": (str, _REQUIRED)}, _trace),
    "hash-trace": ({"path": (str, _REQUIRED), "block_size": (int, hashtrace.MOONCAKE_BLOCK),
                    "time_unit": (str, "ms"), "replay": (str, "timestamps"), "speed": (float, 1.0),
                    "max_context": (int, 0), "start_s": (float, 0.0), "end_s": (float, 0.0),
                    "sample": (float, 1.0), "max_requests": (int, 0), "lru_blocks": (int, 0),
                    "lru_bytes": (int, 0), "kv_bytes_per_token": (int, 0)}, _hash_trace),
    "sessions": ({k: (t, d) for k, (t, d, _a) in SESSION_PARAMS.items()}, _sessions("sessions")),
    "agent": ({k: (t, a) for k, (t, _d, a) in SESSION_PARAMS.items()}, _sessions("agent")),
}


def build_workload(kind: str, params: Optional[Mapping[str, Any]] = None, seed: int = 0) -> Workload:
    """Build the requests of workload ``kind`` (deterministic for a given ``params`` and ``seed``)."""
    try:
        schema, builder = WORKLOADS[kind]
    except KeyError:
        raise LoadInputError(f"unknown workload {kind!r}; known: {', '.join(WORKLOADS)}") from None
    return builder(_params(kind, params or {}, schema), seed)

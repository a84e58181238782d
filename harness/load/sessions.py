"""Multi-turn sessions: each turn's prompt is built from what the server really answered.

A session is a conversation: an optional prefix shared by every session (``shared_prefix_len``:
an agent's tool definitions and instructions), a context of its own (``context_len``), then
``num_turns`` turns. Turn k sends the whole history (prefix, context, every earlier question and
the answer text the server returned for it) plus a new question of ``question_len`` words, so the
history grows by each real answer and turn k+1 can only be built once turn k's response has
arrived: prompts are dynamic, never precomputed. A KV-reusing engine serves turn k+1's history
from the cache; the summary's TTFT per turn index shows it (turn 1 pays the whole prefill).

Between turns the user thinks: ``think_time_s`` (``think_dist`` ``fixed``, or ``exponential``
with that mean, drawn from the session's own seeded generator). Think time is never inside a
request's TTFT: a turn is due when the think time ends, and it is sent then (``queue_ms`` is the
gap between due and sent, as for every request).

A turn that fails ends its session (the next prompt would need its answer); the turns never sent
are not records, the summary counts such sessions as ``aborted``.

``max_context`` (tokens; 0: no limit) is checked when the plan is built: the last turn's prompt
plus its ``output_len`` must fit, as a server checks prompt + max_tokens against its context
limit. The emulator's words are tokens; on a real engine the count is the client's estimate.

Kinds (registered in ``harness.load.workloads``): ``sessions`` (chat-style defaults) and ``agent``
(a long shared tool prefix, many short turns, short think time).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Optional

from harness.load.errors import LoadInputError
from harness.load.spec import RequestSpec
from harness.load.vocabulary import words

THINK_DISTRIBUTIONS = ("fixed", "exponential")


@dataclass(frozen=True)
class SessionPlan:
    """What every session of a run looks like; sessions are made one at a time by
    :meth:`session` (each from its own seeded generator, so session i is the same whatever the
    concurrency or the order sessions start in)."""

    kind: str
    num_sessions: int
    num_turns: int
    shared_prefix_len: int
    context_len: int
    question_len: int
    output_len: int
    think_time_s: float
    think_dist: str
    max_context: int
    seed: int

    @classmethod
    def from_params(cls, kind: str, p: dict[str, Any], seed: int) -> SessionPlan:
        """``p`` as checked by the workloads' parameter table (types, >= 0); the rest here."""
        for n in ("num_sessions", "num_turns", "question_len", "output_len"):
            if p[n] <= 0:
                raise LoadInputError(f"workload {kind!r}: parameter {n!r} = {p[n]!r}: expected > 0")
        if p["think_dist"] not in THINK_DISTRIBUTIONS:
            raise LoadInputError(f"workload {kind!r}: parameter 'think_dist' = {p['think_dist']!r}: expected "
                                 f"one of {', '.join(THINK_DISTRIBUTIONS)}")
        plan = cls(kind, p["num_sessions"], p["num_turns"], p["shared_prefix_len"], p["context_len"],
                   p["question_len"], p["output_len"], float(p["think_time_s"]), p["think_dist"],
                   p["max_context"], seed)
        need = plan.last_turn_tokens + plan.output_len
        if plan.max_context and need > plan.max_context:
            raise LoadInputError(
                f"workload {kind!r}: parameter 'num_turns' = {plan.num_turns}: the last turn needs {need} tokens "
                f"(prefix {plan.shared_prefix_len} + context {plan.context_len} + {plan.num_turns} questions of "
                f"{plan.question_len} + {plan.num_turns - 1} answers of {plan.output_len} + {plan.output_len} to "
                f"generate), over max_context {plan.max_context}")
        return plan

    @property
    def last_turn_tokens(self) -> int:
        """Prompt tokens of the last turn when every answer has ``output_len`` tokens."""
        return (self.shared_prefix_len + self.context_len + self.num_turns * self.question_len
                + (self.num_turns - 1) * self.output_len)

    @property
    def total_turns(self) -> int:
        return self.num_sessions * self.num_turns

    def shared_prefix(self) -> str:
        return words(random.Random(f"kvgate-sessions-prefix:{self.seed}"), self.shared_prefix_len)

    def session(self, index: int, shared_prefix: Optional[str] = None) -> Session:
        prefix = self.shared_prefix() if shared_prefix is None else shared_prefix
        return Session(self, index, prefix)

    def sessions(self) -> Iterator[Session]:
        prefix = self.shared_prefix()  # built once, shared by reference: one copy however many sessions
        for i in range(self.num_sessions):
            yield self.session(i, prefix)

    def describe(self) -> dict[str, Any]:
        return {"sessions": self.num_sessions, "turns_per_session": self.num_turns,
                "shared_prefix_len": self.shared_prefix_len, "last_turn_tokens": self.last_turn_tokens,
                "think_time_s": self.think_time_s, "think_dist": self.think_dist}


@dataclass
class Session:
    """One conversation in progress: :meth:`next_turn` gives the next request, :meth:`answered`
    feeds the server's answer text back into the history."""

    plan: SessionPlan
    index: int
    shared_prefix: str
    turn: int = 0  # turns sent so far
    aborted: bool = False
    _history: str = ""
    _chat: list[dict[str, str]] = field(default_factory=list)
    _pending: Optional[RequestSpec] = None

    def __post_init__(self) -> None:
        self.rng = random.Random(f"kvgate-sessions:{self.plan.seed}:{self.index}")
        own = words(self.rng, self.plan.context_len)
        system = f"{self.shared_prefix} {own}".strip()
        self._history = system
        self._chat = [{"role": "system", "content": system}] if system else []

    @property
    def session_id(self) -> str:
        return f"{'ag' if self.plan.kind == 'agent' else 'ss'}{self.index:05d}"

    @property
    def done(self) -> bool:
        return self.aborted or self.turn >= self.plan.num_turns

    def next_turn(self) -> RequestSpec:
        """The request of the next turn (1-based ``turn`` in its meta); the previous one must have
        been answered."""
        if self._pending is not None:
            raise RuntimeError(f"session {self.session_id}: turn {self.turn} has not been answered")
        if self.done:
            raise RuntimeError(f"session {self.session_id} is over")
        self.turn += 1
        question = words(self.rng, self.plan.question_len)
        prompt = f"{self._history} {question}".strip()
        msgs = tuple(self._chat + [{"role": "user", "content": question}])
        n_in = len(prompt.split())
        spec = RequestSpec(f"{self.session_id}-t{self.turn:03d}", prompt, n_in, self.plan.output_len,
                           messages=msgs,
                           meta={"workload": self.plan.kind, "session": self.session_id, "turn": self.turn,
                                 "context_tokens": n_in})
        self._pending = spec
        return spec

    def answered(self, text: Optional[str], ok: bool) -> None:
        """Feed turn ``turn``'s outcome back: its answer text grows the history; a failed turn
        ends the session (the next prompt would need the answer)."""
        spec = self._pending
        if spec is None:
            raise RuntimeError(f"session {self.session_id}: no turn in flight")
        self._pending = None
        if not ok:
            self.aborted = True
            return
        answer = (text or "").strip()
        self._history = f"{spec.prompt} {answer}".strip()
        assert spec.messages is not None
        self._chat = list(spec.messages) + [{"role": "assistant", "content": answer}]

    def think_s(self) -> float:
        """Seconds the user thinks before the next turn (drawn from the session's generator)."""
        t = self.plan.think_time_s
        if t <= 0:
            return 0.0
        return t if self.plan.think_dist == "fixed" else self.rng.expovariate(1.0 / t)


SESSION_PARAMS: dict[str, Any] = {
    # name: (type, default for 'sessions', default for 'agent')
    "num_sessions": (int, 8, 8),
    "num_turns": (int, 4, 12),
    "shared_prefix_len": (int, 0, 4096),
    "context_len": (int, 256, 0),
    "question_len": (int, 64, 24),
    "output_len": (int, 64, 24),
    "think_time_s": (float, 1.0, 0.2),
    "think_dist": (str, "exponential", "exponential"),
    "max_context": (int, 0, 0),
}

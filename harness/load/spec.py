"""One request to send: what the workloads build and the client sends."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Optional


@dataclass(frozen=True)
class RequestSpec:
    """A request of a workload.

    ``prompt`` is used by the completions API; ``messages`` (when set) by the chat API, otherwise
    the prompt becomes one user message. ``input_tokens`` is the client's count (words of the
    fixed vocabulary: exact for the KV emulator); the server's ``usage`` replaces it when given.
    ``meta`` holds the workload keys copied into the record (workload, group, user, round, doc,
    hit...). ``at_s`` is an arrival offset from a replayed trace (seconds from the start).
    """

    request_id: str
    prompt: str
    input_tokens: int
    max_tokens: int
    messages: Optional[tuple[dict[str, str], ...]] = None
    meta: dict[str, Any] = field(default_factory=dict)
    at_s: Optional[float] = None

    def with_id(self, request_id: str) -> RequestSpec:
        return replace(self, request_id=request_id)

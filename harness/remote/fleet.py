"""``Fleet``: one operation on many nodes in parallel, a result per node.

A bounded pool of daemon threads; a node that fails is recorded with its error, a node that hangs
past ``timeout`` is recorded as timed out (its connection is closed to unblock it) and never holds
up the others or the caller. ``FleetResult.raise_for_failures()`` raises one ``FleetError`` that
lists every failed node with its reason.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Generic, Optional, TypeVar, Union

from harness.errors import InfraError, InputError, KvgateError
from harness.progress import Progress
from harness.remote.base import Executor, RemoteError, RunResult

if TYPE_CHECKING:
    from harness.config.inventory import Inventory

T = TypeVar("T")


class NodeTimeout(RemoteError):
    """A node gave no result within the fleet operation's timeout."""


@dataclass(frozen=True)
class NodeOutcome(Generic[T]):
    """What one node did: ``value`` when ``ok``, else ``error``."""

    node: str
    ok: bool
    value: Optional[T] = None
    error: Optional[BaseException] = None
    duration_s: float = 0.0

    @property
    def reason(self) -> str:
        """One line saying why it failed ("" when it did not)."""
        if self.ok or self.error is None:
            return ""
        text = str(self.error).strip() or type(self.error).__name__
        first = text.splitlines()[0]
        prefix = f"{self.node}: "
        return first[len(prefix):] if first.startswith(prefix) else first


class FleetError(InfraError):
    """Some nodes failed; ``failures`` maps each to its outcome."""

    def __init__(self, failures: Sequence[NodeOutcome[object]], total: int) -> None:
        self.failures = {o.node: o for o in failures}
        lines = [f"{len(failures)} of {total} node(s) failed:"]
        for o in failures:
            lines.append(f"  {o.node}: {type(o.error).__name__}: {o.reason}")
        super().__init__("\n".join(lines))


@dataclass
class FleetResult(Generic[T]):
    """The outcome of every node, in the order the nodes were given."""

    outcomes: dict[str, NodeOutcome[T]] = field(default_factory=dict)
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outcomes.values())

    @property
    def failed(self) -> list[NodeOutcome[T]]:
        return [o for o in self.outcomes.values() if not o.ok]

    @property
    def succeeded(self) -> list[NodeOutcome[T]]:
        return [o for o in self.outcomes.values() if o.ok]

    def values(self) -> dict[str, T]:
        """Values of the nodes that succeeded."""
        return {n: o.value for n, o in self.outcomes.items() if o.ok}  # type: ignore[misc]

    def __getitem__(self, node: str) -> NodeOutcome[T]:
        return self.outcomes[node]

    def raise_for_failures(self) -> FleetResult[T]:
        """Raise one FleetError listing every failed node; return self when all succeeded."""
        failed = self.failed
        if failed:
            raise FleetError(failed, len(self.outcomes))  # type: ignore[arg-type]
        return self


ExecutorSource = Union[Mapping[str, Executor], Sequence[Executor], "Inventory"]


class Fleet:
    """Executors for a set of nodes. Built from executors (keyed by their node name) or from an
    inventory (executors made on first use with ``executor_for``, then kept and reused)."""

    def __init__(self, executors: ExecutorSource, *, accept_new_host_keys: bool = False) -> None:
        self._lock = threading.Lock()
        self._executors: dict[str, Executor] = {}
        self._inventory: Optional[Inventory] = None
        self.accept_new_host_keys = accept_new_host_keys
        if isinstance(executors, Mapping):
            self._executors = dict(executors)
            self._names = list(self._executors)
        elif isinstance(executors, Sequence):
            for ex in executors:
                if ex.node in self._executors:
                    raise InputError(f"two executors for node {ex.node!r}")
                self._executors[ex.node] = ex
            self._names = list(self._executors)
        else:
            self._inventory = executors
            self._names = [n.name for n in executors.nodes]

    @property
    def nodes(self) -> list[str]:
        return list(self._names)

    def executor(self, node: str) -> Executor:
        with self._lock:
            ex = self._executors.get(node)
            if ex is not None:
                return ex
            if self._inventory is None or node not in self._names:
                raise InputError(f"no node named {node!r} in this fleet; known: {', '.join(self._names)}")
        from harness.remote.connect import executor_for

        made = executor_for(self._inventory, node, accept_new_host_keys=self.accept_new_host_keys)
        with self._lock:
            return self._executors.setdefault(node, made)

    def map(self, fn: Callable[[Executor], T], nodes: Iterable[str] | None = None, *, max_workers: int = 16,
            timeout: float | None = None, progress: Progress | None = None) -> FleetResult[T]:
        """Call ``fn(executor)`` for each node (all by default) on at most ``max_workers`` threads.
        ``timeout`` bounds the whole call: nodes without a result by then get a NodeTimeout."""
        names = list(nodes) if nodes is not None else list(self._names)
        if len(set(names)) != len(names):
            raise InputError(f"a node is listed twice: {names}")
        unknown = [n for n in names if n not in self._names]
        if unknown:
            raise InputError(f"no node named {', '.join(map(repr, unknown))} in this fleet; "
                             f"known: {', '.join(self._names)}")
        start = time.monotonic()
        done: dict[str, NodeOutcome[T]] = {}
        started: dict[str, float] = {}
        todo: queue.Queue[str] = queue.Queue()
        for n in names:
            todo.put(n)
        finished = threading.Condition()

        def worker() -> None:
            while True:
                try:
                    node = todo.get_nowait()
                except queue.Empty:
                    return
                t0 = time.monotonic()
                with finished:
                    if node in done:
                        continue  # map gave up on it ("not started within"): it must not run after map returned
                    started[node] = t0
                try:
                    value = fn(self.executor(node))
                    outcome: NodeOutcome[T] = NodeOutcome(node, True, value, None, time.monotonic() - t0)
                except Exception as exc:  # noqa: BLE001 - recorded per node, never hides the others
                    outcome = NodeOutcome(node, False, None, exc, time.monotonic() - t0)
                # the progress line before map() can return (a line after it would land in the
                # caller's later output, or in a stream it closed), and none for a node map() gave up on
                with finished:
                    if node in done:
                        continue
                    done[node] = outcome
                    try:
                        if progress is not None:
                            progress.update(1, f"{node} {'ok' if outcome.ok else 'FAILED'}")
                    finally:
                        finished.notify_all()

        for _ in range(max(1, min(max_workers, len(names)))):
            threading.Thread(target=worker, daemon=True, name="kvgate-fleet").start()
        deadline = None if timeout is None else start + timeout
        with finished:
            while len(done) < len(names):
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    break
                finished.wait(left)
            late = [n for n in names if n not in done]
            now = time.monotonic()
            for node in late:
                began = started.get(node)
                why = (f"no result within {timeout:g} s" if began is not None
                       else f"not started within {timeout:g} s (all {max_workers} workers busy)")
                done[node] = NodeOutcome(node, False, None, NodeTimeout(why, host=node),
                                         now - began if began is not None else 0.0)
        for node in late:
            self._abandon(node)
        return FleetResult({n: done[n] for n in names}, time.monotonic() - start)

    def _abandon(self, node: str) -> None:
        # Closing the connection unblocks a thread stuck in it; the executor reconnects if reused.
        with self._lock:
            ex = self._executors.get(node)
        if ex is not None:
            try:
                ex.close()
            except (KvgateError, OSError):
                pass

    def run(self, argv: Sequence[str], *, nodes: Iterable[str] | None = None, max_workers: int = 16,
            timeout: float | None = None, **kwargs: object) -> FleetResult[RunResult]:
        """``run(argv, **kwargs)`` on every node (``check`` as given; default True)."""
        return self.map(lambda ex: ex.run(argv, **kwargs), nodes, max_workers=max_workers,  # type: ignore[arg-type]
                        timeout=timeout)

    def close(self) -> None:
        with self._lock:
            executors = list(self._executors.values())
        for ex in executors:
            try:
                ex.close()
            except (KvgateError, OSError):
                pass

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

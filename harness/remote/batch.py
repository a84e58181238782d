"""Several look-ups and commands on one node in one exchange: ``run_many``.

A batch is a list of tools to look up (``which``) and a list of commands, answered together. An
executor whose every exchange costs the controller a round trip of its own (Ray: one actor call
each, serialised and scheduled) says so with ``batches_commands = True`` and implements
``run_many(tools, commands)`` by running the batch on the node, in one call; any other executor
gets ``run_batch``, the same loop run from the controller, one exchange per item, as before.

Rules every implementation keeps (``run_batch`` is the reference; the Ray node actor calls it):
- the commands run in order, one at a time, each with its own timeout, never as a shell string;
- a command whose ``tool`` is not on the node's PATH is not run: its answer is None;
- a command that times out or floods its output (``CommandTimeout``, ``OutputTooLarge``, raised by
  the executor as for one command) has that error, carrying the output so far, as its answer: one
  command's failure never hides the others' answers;
- a node that cannot be reached (``Unreachable``, ``ConnectionLost``) fails the whole batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional, Union

from harness.remote.base import CommandTimeout, Executor, OutputTooLarge, RemoteError, RunResult

__all__ = ["BatchCommand", "BatchResult", "Answer", "batches", "run_batch", "run_many"]

# What one command of a batch came to: its result, the error that ended it, or None (tool missing).
Answer = Union[RunResult, RemoteError, None]
PER_COMMAND_ERRORS = (CommandTimeout, OutputTooLarge)


@dataclass(frozen=True)
class BatchCommand:
    """One command of a batch: run only when ``tool`` (if given) is on the node's PATH."""

    argv: tuple[str, ...]
    timeout: Optional[float] = None
    tool: Optional[str] = None


@dataclass(frozen=True)
class BatchResult:
    """``which``: every tool looked up (those asked for and each command's ``tool``), its path or
    None; ``answers``: one per command, in order."""

    which: dict[str, Optional[str]]
    answers: list[Answer]


def batches(executor: object) -> bool:
    """Does ``executor`` run a batch on the node in one exchange (worth batching for)?"""
    return bool(getattr(executor, "batches_commands", False))


def run_batch(executor: Executor, tools: Sequence[str], commands: Sequence[BatchCommand]) -> BatchResult:
    """The batch through ``executor``, one item at a time (the reference implementation)."""
    found: dict[str, Optional[str]] = {}

    def which(tool: str) -> Optional[str]:
        if tool not in found:
            found[tool] = executor.which(tool)
        return found[tool]

    for tool in tools:
        which(tool)
    answers: list[Answer] = []
    for cmd in commands:
        if cmd.tool is not None and which(cmd.tool) is None:
            answers.append(None)
            continue
        try:
            answers.append(executor.run(list(cmd.argv), check=False, timeout=cmd.timeout))
        except PER_COMMAND_ERRORS as exc:
            answers.append(exc)
    return BatchResult(found, answers)


def run_many(executor: Executor, tools: Sequence[str], commands: Sequence[BatchCommand]) -> BatchResult:
    """The batch in one exchange when ``executor`` can (``batches``), else item by item."""
    if batches(executor):
        result: BatchResult = getattr(executor, "run_many")(tools, commands)  # noqa: B009 - not in the protocol
        return result
    return run_batch(executor, tools, commands)

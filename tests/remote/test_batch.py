"""``run_many``/``run_batch`` (harness/remote/batch.py) on this machine: a batch is answered item by
item as one command at a time would be, a missing tool skips its command, one command's timeout is
its own answer, and the recording wrapper records a batch's items as it records single commands.
The batch through a real Ray node actor is tested in ray_checks.py."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from harness.remote.base import CommandTimeout, RunResult
from harness.remote.batch import BatchCommand, BatchResult, batches, run_batch, run_many
from harness.remote.local import LocalExecutor
from harness.remote.recording import RecordingExecutor


class BatchingLocal(LocalExecutor):
    """A LocalExecutor that takes batches (as the Ray executor does) and counts its exchanges: a
    batch is one, and so is every command or look-up asked outside a batch."""

    batches_commands = True

    def __init__(self, name: str = "n1") -> None:
        super().__init__(name)
        self.batches = 0
        self.singles = 0
        self._in_batch = False

    def run_many(self, tools: Sequence[str], commands: Sequence[BatchCommand]) -> BatchResult:
        self.batches += 1
        self._in_batch = True
        try:
            return run_batch(self, tools, commands)
        finally:
            self._in_batch = False

    def run(self, argv: Sequence[str], **kw: Any) -> RunResult:
        self.singles += 0 if self._in_batch else 1
        return super().run(argv, **kw)

    def which(self, tool: str) -> str | None:
        self.singles += 0 if self._in_batch else 1
        return super().which(tool)


def test_a_batch_answers_each_item_and_a_timeout_hides_nothing() -> None:
    ex = LocalExecutor("n1")
    started = time.monotonic()
    got = run_many(ex, ["sh", "kvgate-no-such-tool"], [
        BatchCommand(("sh", "-c", "echo one; echo err >&2; exit 3"), 10.0, "sh"),
        BatchCommand(("kvgate-no-such-tool", "--version"), 10.0, "kvgate-no-such-tool"),
        BatchCommand(("sh", "-c", "echo partial; sleep 30"), 0.5, "sh"),
        BatchCommand(("echo", "after"), 10.0),
    ])
    assert time.monotonic() - started < 20
    assert got.which["sh"] and got.which["kvgate-no-such-tool"] is None
    first, missing, slow, after = got.answers
    assert isinstance(first, RunResult) and (first.exit_code, first.stdout, first.stderr) == (3, "one\n", "err\n")
    assert missing is None  # its tool is not on the node: never run
    assert isinstance(slow, CommandTimeout) and slow.stdout == "partial\n"
    assert isinstance(after, RunResult) and after.stdout == "after\n"  # the timeout hid nothing after it


def test_only_an_executor_that_says_so_is_batched_and_recording_follows_its_inner() -> None:
    plain, batching = LocalExecutor("n1"), BatchingLocal()
    assert not batches(plain) and batches(batching)
    records: list[tuple[Any, ...]] = []
    rec = RecordingExecutor(batching, lambda node, argv, result=None, *, error=None: records.append(
        (tuple(argv), result.exit_code if result else None, error)))
    assert batches(rec) and not batches(RecordingExecutor(plain, lambda *a, **k: None))
    got = run_many(rec, [], [BatchCommand(("true",), 10.0, "true"),
                             BatchCommand(("kvgate-no-such-tool",), 10.0, "kvgate-no-such-tool"),
                             BatchCommand(("sh", "-c", "sleep 30"), 0.3, "sh")])
    assert batching.batches == 1 and batching.singles == 0
    assert isinstance(got.answers[0], RunResult) and got.answers[1] is None
    # each look-up and each command that ran is recorded, as one at a time would record it
    assert ("kvgate-which", "kvgate-no-such-tool") in [r[0] for r in records]
    assert (("true",), 0, None) in records
    timed_out = next(r for r in records if r[0] == ("sh", "-c", "sleep 30"))
    assert timed_out[2] is not None and timed_out[2].startswith("CommandTimeout")
    assert ("kvgate-no-such-tool",) not in [r[0] for r in records]  # never ran

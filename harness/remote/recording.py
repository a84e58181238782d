"""Every command a gate runs on a node, recorded: an Executor that wraps another and reports each
``run`` (argv with secrets masked, exit code, duration, output tails) and each file transfer and
detached start to a callback (``GateDir.record_command`` writes them to ``commands.jsonl``).

Polls of a detached process and log tails are status reads, not commands: they are not recorded
(a readiness wait polls many times a second). Environment values passed to ``run`` are recorded
masked when their name is a secret (``harness.redact``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Optional

from harness.redact import redact_argv
from harness.remote.base import (
    DetachedHandle,
    Executor,
    LineCallback,
    ProcessState,
    RemoteError,
    RunResult,
)
from harness.remote.batch import BatchCommand, BatchResult, batches, run_many

Recorder = Callable[..., Any]  # (node, argv, result=None, *, error=None)


class RecordingExecutor:
    """``Executor`` that records what it runs; everything else is delegated unchanged."""

    def __init__(self, inner: Executor, record: Recorder) -> None:
        self.inner = inner
        self._record = record

    @property
    def node(self) -> str:
        return self.inner.node

    def _note(self, argv: Sequence[str], result: Optional[RunResult], error: Optional[BaseException],
              started: float) -> None:
        try:
            if result is None:
                code = getattr(error, "exit_code", None)
                fake = RunResult(self.node, tuple(argv), code if isinstance(code, int) else -1, "", "",
                                 time.monotonic() - started)
                self._record(self.node, redact_argv(argv), fake,
                             error=f"{type(error).__name__}: {error}" if error else None)
            else:
                self._record(self.node, redact_argv(argv), result)
        except Exception:  # noqa: BLE001 - recording must never break the command itself
            pass

    def run(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None,
            timeout: float | None = None, check: bool = True, on_line: LineCallback | None = None,
            stdin: bytes | None = None) -> RunResult:
        shown = [*(f"{k}={v}" for k, v in (env or {}).items()), *argv] if env else list(argv)
        if env:
            shown = ["env", *shown]
        started = time.monotonic()
        try:
            res = self.inner.run(argv, env=env, cwd=cwd, timeout=timeout, check=check, on_line=on_line,
                                 stdin=stdin)
        except RemoteError as exc:
            result = getattr(exc, "result", None)
            self._note(shown, result if isinstance(result, RunResult) else None, exc, started)
            raise
        self._note(shown, res, None, started)
        return res

    def _timed(self, argv: list[str], fn: Callable[[], Any]) -> Any:
        started = time.monotonic()
        try:
            out = fn()
        except RemoteError as exc:
            self._note(argv, None, exc, started)
            raise
        self._note(argv, RunResult(self.node, tuple(argv), 0, "", "", time.monotonic() - started), None, started)
        return out

    @property
    def batches_commands(self) -> bool:
        return batches(self.inner)

    def run_many(self, tools: Sequence[str], commands: Sequence[BatchCommand]) -> BatchResult:
        """The inner executor's batch, recorded as its items would be one by one: each look-up, and
        each command that ran (a command whose tool was missing never ran)."""
        started = time.monotonic()
        try:
            result = run_many(self.inner, tools, commands)
        except RemoteError as exc:
            self._note(["kvgate-batch", f"{len(commands)} commands"], None, exc, started)
            raise
        for tool in result.which:
            self._note(["kvgate-which", tool], RunResult(self.node, ("kvgate-which", tool), 0, "", "", 0.0),
                       None, started)
        for cmd, answer in zip(commands, result.answers):
            if isinstance(answer, RunResult):
                self._note(cmd.argv, answer, None, started)
            elif answer is not None:
                self._note(cmd.argv, None, answer, started)
        return result

    def put(self, local_path: str, remote_path: str, *, mode: int | None = None) -> None:
        self._timed(["kvgate-put", local_path, remote_path],
                    lambda: self.inner.put(local_path, remote_path, mode=mode))

    def get(self, remote_path: str, local_path: str) -> None:
        self._timed(["kvgate-get", remote_path, local_path], lambda: self.inner.get(remote_path, local_path))

    def read_file(self, remote_path: str, *, max_bytes: int = 16 * 1024 * 1024) -> bytes:
        data: bytes = self._timed(["kvgate-read", remote_path],
                                  lambda: self.inner.read_file(remote_path, max_bytes=max_bytes))
        return data

    def write_file(self, remote_path: str, data: bytes, *, mode: int | None = None) -> None:
        self._timed(["kvgate-write", remote_path], lambda: self.inner.write_file(remote_path, data, mode=mode))

    def which(self, tool: str) -> str | None:
        found: str | None = self._timed(["kvgate-which", tool], lambda: self.inner.which(tool))
        return found

    def start_detached(self, argv: Sequence[str], *, workdir: str, name: str,
                       env: Mapping[str, str] | None = None, cwd: str | None = None) -> DetachedHandle:
        shown = ["kvgate-detached", *(f"{k}={v}" for k, v in (env or {}).items()), *argv]
        handle: DetachedHandle = self._timed(
            shown, lambda: self.inner.start_detached(argv, workdir=workdir, name=name, env=env, cwd=cwd))
        return handle

    def poll(self, handle: DetachedHandle) -> ProcessState:
        return self.inner.poll(handle)

    def stop(self, handle: DetachedHandle, *, grace: float = 10.0) -> ProcessState:
        state: ProcessState = self._timed(["kvgate-stop", str(handle.pid), *handle.command[:1]],
                                          lambda: self.inner.stop(handle, grace=grace))
        return state

    def tail_log(self, handle: DetachedHandle, *, stream: str = "stderr", lines: int = 50) -> str:
        return self.inner.tail_log(handle, stream=stream, lines=lines)

    def close(self) -> None:
        self.inner.close()

    def __enter__(self) -> RecordingExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:  # executor-specific extras (e.g. SSH details)
        return getattr(self.inner, name)

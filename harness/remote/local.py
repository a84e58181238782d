"""``LocalExecutor``: the Executor protocol on this machine, with subprocess (no shell, ever)."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import IO, Optional

from harness.deletion import remove_file
from harness.remote import detached
from harness.remote.base import (
    MAX_CALLBACK_LINE,
    MAX_OUTPUT_BYTES,
    CommandTimeout,
    LineCallback,
    OutputTooLarge,
    RemoteError,
    RemoteFileNotFound,
    RunResult,
    TransferError,
    checked,
)
from harness.remote.commands import check_argv, check_env

KILL_GRACE_S = 2.0  # after SIGTERM on timeout, before SIGKILL
DRAIN_AFTER_EXIT_S = 5.0  # a daemonised grandchild may keep our pipes open: stop waiting for it


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


class _Drain(threading.Thread):
    """Reads one pipe to the end, line by line, so neither pipe can fill up and block the child."""

    def __init__(self, pipe: IO[bytes], stream: str, on_line: Optional[LineCallback],
                 on_overflow: Optional[Callable[[], None]] = None) -> None:
        super().__init__(daemon=True, name=f"kvgate-drain-{stream}")
        self.pipe = pipe
        self.stream = stream
        self.on_line = on_line
        self.on_overflow = on_overflow
        self.chunks: list[bytes] = []
        self.size = 0
        self.overflow = False
        self.callback_error: Optional[BaseException] = None

    def run(self) -> None:
        try:
            for raw in iter(lambda: self.pipe.readline(MAX_CALLBACK_LINE), b""):
                self.size += len(raw)
                if self.size > MAX_OUTPUT_BYTES:
                    if not self.overflow and self.on_overflow is not None:
                        self.on_overflow()
                    self.overflow = True
                    continue  # drained, not kept
                self.chunks.append(raw)
                if self.on_line is not None and self.callback_error is None:
                    try:
                        self.on_line(self.stream, raw.decode("utf-8", "replace").rstrip("\r\n"))
                    except BaseException as exc:  # noqa: BLE001 - reported after the command ends
                        self.callback_error = exc
        except (OSError, ValueError):
            pass  # pipe closed under us after a timeout kill
        finally:
            try:
                self.pipe.close()
            except OSError:
                pass

    def text(self) -> str:
        return b"".join(self.chunks).decode("utf-8", "replace")


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the command's process group, SIGKILL it after a short grace."""
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout=wait)
            # The leader is gone but members of its group may linger: make sure of them too.
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            return
        except subprocess.TimeoutExpired:
            continue


class LocalExecutor(detached.DetachedByRun):
    """Runs commands on this machine. Each command gets its own process group (so a timeout kills
    everything it started) and inherits this process's environment plus ``env``."""

    def __init__(self, node_name: str = "local", *, default_timeout: float | None = None) -> None:
        self._node = node_name
        self.default_timeout = default_timeout

    def __repr__(self) -> str:
        return f"LocalExecutor(node_name={self._node!r})"

    @property
    def node(self) -> str:
        return self._node

    def run(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None,
            timeout: float | None = None, check: bool = True, on_line: LineCallback | None = None,
            stdin: bytes | None = None) -> RunResult:
        args = check_argv(argv)
        extra = check_env(env)
        timeout = timeout if timeout is not None else self.default_timeout
        full_env = {**os.environ, **extra} if extra else None
        start = time.monotonic()
        try:
            proc = subprocess.Popen(  # noqa: S603 - an argument list, no shell
                list(args), env=full_env, cwd=cwd, start_new_session=True,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )
        except FileNotFoundError as exc:
            # Same outcome as a shell on a remote node: exit 127 (or 2 for a bad cwd), not an exception.
            missing_cwd = cwd is not None and not os.path.isdir(cwd)
            msg = f"cd: {cwd}: No such file or directory" if missing_cwd else f"{args[0]}: command not found"
            return self._finish(args, 2 if missing_cwd else 127, "", msg + "\n", start, check, exc)
        except (PermissionError, NotADirectoryError) as exc:
            return self._finish(args, 126, "", f"{args[0]}: {exc.strerror}\n", start, check, exc)
        assert proc.stdout is not None and proc.stderr is not None
        drains = [_Drain(proc.stdout, "stdout", on_line, lambda: _kill_group(proc)),
                  _Drain(proc.stderr, "stderr", on_line, lambda: _kill_group(proc))]
        for d in drains:
            d.start()
        feeder: Optional[threading.Thread] = None
        if stdin is not None:
            feeder = threading.Thread(target=self._feed, args=(proc, stdin), daemon=True)
            feeder.start()
        timed_out = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill_group(proc)
        except BaseException:
            _kill_group(proc)  # Ctrl-C: never leave the command behind
            raise
        for d in drains:
            d.join(DRAIN_AFTER_EXIT_S)
        out, err = drains[0].text(), drains[1].text()
        duration = time.monotonic() - start
        for d in drains:
            if d.overflow:
                raise OutputTooLarge(f"the command wrote more than the {MAX_OUTPUT_BYTES} byte limit on {d.stream} "
                                     "(process group killed)", host=self._node, command=args,
                                     stdout=out[-2000:], stderr=err[-2000:])
        if timed_out:
            raise CommandTimeout(f"command timed out after {timeout:g} s (process group killed)",
                                 host=self._node, command=args, stdout=out, stderr=err)
        for d in drains:
            if d.callback_error is not None:
                raise d.callback_error
        # A death by signal N is 128+N, as a shell (and so SSHExecutor) reports it.
        code = proc.returncode if proc.returncode >= 0 else 128 - proc.returncode
        return checked(RunResult(host=self._node, command=args, exit_code=code, stdout=out,
                                 stderr=err, duration_s=duration), check)

    @staticmethod
    def _feed(proc: subprocess.Popen[bytes], data: bytes) -> None:
        assert proc.stdin is not None
        try:
            proc.stdin.write(data)
        except (BrokenPipeError, OSError):
            pass
        finally:
            try:
                proc.stdin.close()
            except OSError:
                pass

    def _finish(self, args: tuple[str, ...], code: int, out: str, err: str, start: float, check: bool,
                cause: BaseException) -> RunResult:
        return checked(RunResult(host=self._node, command=args, exit_code=code, stdout=out, stderr=err,
                                 duration_s=time.monotonic() - start), check, cause)

    # -- files -------------------------------------------------------------------------------

    def _copy_verified(self, src: str, dest: str, mode: int | None, what: str) -> None:
        try:
            want = sha256_file(src)
            self._atomic_write_from(dest, src, mode)
            got = sha256_file(dest)
        except FileNotFoundError as exc:
            missing = src if not os.path.exists(src) else dest
            raise RemoteFileNotFound(f"{what}: no such file or directory: {missing}",
                                     host=self._node) from exc
        except OSError as exc:
            raise TransferError(f"{what} {src} -> {dest} failed: {exc}", host=self._node) from exc
        if got != want:
            raise TransferError(f"{what} {src} -> {dest}: checksum mismatch (sha256 {want} vs {got})",
                                host=self._node)

    @staticmethod
    def _atomic_write_from(dest: str, src: str | None, mode: int | None, data: bytes | None = None) -> None:
        directory = os.path.dirname(os.path.abspath(dest))
        fd, tmp = tempfile.mkstemp(prefix=".kvgate-", dir=directory)
        try:
            with os.fdopen(fd, "wb") as out:
                if src is not None:
                    with open(src, "rb") as fh:
                        shutil.copyfileobj(fh, out, 1 << 20)
                elif data is not None:
                    out.write(data)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(tmp, mode if mode is not None else 0o644)
            os.replace(tmp, dest)
        except BaseException:
            try:
                remove_file(tmp, within=directory, marker=".kvgate-")
            except OSError:
                pass
            raise

    def put(self, local_path: str, remote_path: str, *, mode: int | None = None) -> None:
        self._copy_verified(local_path, remote_path, mode, "put")

    def get(self, remote_path: str, local_path: str) -> None:
        self._copy_verified(remote_path, local_path, None, "get")

    def read_file(self, remote_path: str, *, max_bytes: int = 16 * 1024 * 1024) -> bytes:
        try:
            with open(remote_path, "rb") as fh:
                data = fh.read(max_bytes + 1)
        except FileNotFoundError as exc:
            raise RemoteFileNotFound(f"no such file: {remote_path}", host=self._node) from exc
        except OSError as exc:
            raise TransferError(f"cannot read {remote_path}: {exc.strerror}", host=self._node) from exc
        if len(data) > max_bytes:
            raise TransferError(f"{remote_path} is larger than {max_bytes} bytes", host=self._node)
        return data

    def write_file(self, remote_path: str, data: bytes, *, mode: int | None = None) -> None:
        try:
            self._atomic_write_from(remote_path, None, mode, data)
        except OSError as exc:
            raise TransferError(f"cannot write {remote_path}: {exc.strerror}", host=self._node) from exc

    def which(self, tool: str) -> str | None:
        if not tool or "/" in tool or "\0" in tool:
            return None
        found = shutil.which(tool)
        return os.path.abspath(found) if found else None

    # detached processes: start_detached, poll, stop, tail_log from detached.DetachedByRun

    def close(self) -> None:
        pass

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

__all__ = ["LocalExecutor", "RemoteError", "sha256_file"]


def runs_on_this_machine(executor: object) -> bool:
    """True when ``executor`` (or the executor a recording wrapper delegates to) is a LocalExecutor:
    its node's loopback is this process's loopback."""
    seen = 0
    while not isinstance(executor, LocalExecutor) and hasattr(executor, "inner") and seen < 8:
        executor, seen = executor.inner, seen + 1
    return isinstance(executor, LocalExecutor)

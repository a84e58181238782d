"""The executor protocol: the small vocabulary every layer uses to act on a node.

Commands are argument lists, never shell strings: an executor quotes them for the node's shell
(``shlex.join``) itself, so no node name, path, model name or extra argument can inject a command.

Implementations: ``LocalExecutor`` (subprocess, this machine) and ``SSHExecutor`` (paramiko).
The parts marked *contract* are what other layers rely on; the remote layer owns the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Optional, Protocol, runtime_checkable

from harness.errors import InfraError

LineCallback = Callable[[str, str], None]  # (stream name "stdout"/"stderr", line without newline)


def tail(text: str, lines: int = 20) -> str:
    """The last ``lines`` lines of ``text`` (for error messages)."""
    parts = text.rstrip("\n").splitlines()
    return "\n".join(parts[-lines:])


@dataclass(frozen=True)
class RunResult:
    """What one command did on one node (contract)."""

    host: str
    command: tuple[str, ...]
    exit_code: int
    stdout: str
    stderr: str
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


@dataclass
class DetachedHandle:
    """A process started detached on a node; JSON-serialisable so a new controller can reattach
    (contract). ``marker`` is a unique token in the process environment/command line that tells
    our process apart from an unrelated one that reused the pid."""

    node: str
    pid: int
    pgid: int
    start_time: float  # the node's clock, seconds since the epoch
    marker: str
    workdir: str
    stdout_path: str
    stderr_path: str
    pid_path: str
    exit_path: str
    command: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, object]:
        d = asdict(self)
        d["command"] = list(self.command)
        return d

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> DetachedHandle:
        d = dict(data)
        d["command"] = tuple(d.get("command") or ())  # type: ignore[arg-type]
        return cls(**d)  # type: ignore[arg-type]


@dataclass(frozen=True)
class ProcessState:
    """Result of polling a detached process (contract)."""

    running: bool
    exit_code: Optional[int] = None  # set when it exited and its exit code was recorded
    reason: str = ""  # e.g. "pid reused by another process", "killed by signal 9"


class RemoteError(InfraError):
    """A failure on or towards a node; carries the host, the command and the tail of the output."""

    def __init__(self, message: str, *, host: str, command: Sequence[str] | None = None,
                 exit_code: int | None = None, stdout: str = "", stderr: str = "") -> None:
        self.host = host
        self.command = tuple(command) if command else None
        self.exit_code = exit_code
        self.stdout = stdout
        self.stderr = stderr
        text = f"{host}: {message}"
        if self.command:
            import shlex

            text += f"\n  command: {shlex.join(self.command)}"
        if exit_code is not None:
            text += f"\n  exit code: {exit_code}"
        for name, out in (("stdout", stdout), ("stderr", stderr)):
            if out.strip():
                text += f"\n  last lines of {name}:\n    " + tail(out, 10).replace("\n", "\n    ")
        super().__init__(text)


class CommandFailed(RemoteError):
    """A command exited non-zero and ``check`` was set."""


def checked(result: RunResult, check: bool, cause: BaseException | None = None) -> RunResult:
    """``result``, or with ``check`` and a non-zero exit code, :class:`CommandFailed` carrying it
    (every executor ends a command here, so "check" means one thing)."""
    if check and result.exit_code != 0:
        raise CommandFailed("command failed", host=result.host, command=result.command,
                            exit_code=result.exit_code, stdout=result.stdout, stderr=result.stderr) from cause
    return result


class CommandTimeout(RemoteError):
    """A command ran past its timeout (it was killed)."""


class OutputTooLarge(RemoteError):
    """A command wrote more than MAX_OUTPUT_BYTES on one stream; it was killed."""


# What one command may print on one stream before it is killed (the controller holds it in memory),
# and the longest line handed to a line callback (a longer one is passed on in pieces).
MAX_OUTPUT_BYTES = 256 << 20
MAX_CALLBACK_LINE = 1 << 20


class Unreachable(RemoteError):
    """The node could not be reached (connect, banner or authentication failed)."""


class ConnectionLost(RemoteError):
    """The connection died while a command was running (server gone, link cut)."""


class HostKeyError(RemoteError):
    """The node's host key is unknown (and trust-on-first-use was not asked for) or has changed."""


class TransferError(RemoteError):
    """A file transfer failed or its checksum did not match."""


class RemoteFileNotFound(TransferError):
    """A file to read or fetch does not exist on the node."""


@runtime_checkable
class Executor(Protocol):
    """Runs commands and moves files on one node (contract)."""

    @property
    def node(self) -> str:
        """The node name (used in every result and error)."""

    def run(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None,
            timeout: float | None = None, check: bool = True, on_line: LineCallback | None = None,
            stdin: bytes | None = None) -> RunResult:
        """Run ``argv``; raise CommandFailed when ``check`` and the exit code is not 0."""

    def put(self, local_path: str, remote_path: str, *, mode: int | None = None) -> None:
        """Copy a file to the node and verify its checksum."""

    def get(self, remote_path: str, local_path: str) -> None:
        """Copy a file from the node and verify its checksum."""

    def read_file(self, remote_path: str, *, max_bytes: int = 16 * 1024 * 1024) -> bytes:
        """Read a small file."""

    def write_file(self, remote_path: str, data: bytes, *, mode: int | None = None) -> None:
        """Write a small file atomically (write to a temp name, then rename)."""

    def which(self, tool: str) -> str | None:
        """Absolute path of ``tool`` on the node's PATH, or None."""

    def start_detached(self, argv: Sequence[str], *, workdir: str, name: str,
                       env: Mapping[str, str] | None = None, cwd: str | None = None) -> DetachedHandle:
        """Start ``argv`` so that it survives this connection and this controller."""

    def poll(self, handle: DetachedHandle) -> ProcessState:
        """Is the detached process still running; if not, its exit code."""

    def stop(self, handle: DetachedHandle, *, grace: float = 10.0) -> ProcessState:
        """SIGTERM its process group, SIGKILL after ``grace`` seconds."""

    def tail_log(self, handle: DetachedHandle, *, stream: str = "stderr", lines: int = 50) -> str:
        """The last lines of a detached process's log."""

    def close(self) -> None:
        """Release the connection."""

"""Remote execution: the Executor protocol, local and SSH executors, and parallel fan-out."""

from harness.remote.base import (
    CommandFailed,
    CommandTimeout,
    ConnectionLost,
    DetachedHandle,
    Executor,
    HostKeyError,
    ProcessState,
    RemoteError,
    RemoteFileNotFound,
    RunResult,
    TransferError,
    Unreachable,
)

__all__ = [
    "CommandFailed", "CommandTimeout", "ConnectionLost", "DetachedHandle", "Executor", "HostKeyError",
    "ProcessState", "RemoteError", "RemoteFileNotFound", "RunResult", "TransferError", "Unreachable",
]

"""Run a node's commands inside a cgroup: an Executor that wraps another and starts every command
(``run`` and ``start_detached``) through a fixed script that first moves itself into the cgroup,
then execs the command, so the command and every process it starts are in it from the start.

    sh -c JOIN kvgate-cgroup <cgroup.procs file> argv...

The script is a constant; the procs file and the command are positional parameters, never part of
a shell string. A command that cannot join exits 95 with the reason on stderr: it never runs outside
the cgroup it was meant for (its figures would be the raw device's). Everything else (polls, file
transfers, log tails) is delegated unchanged. Used by ``harness.remote.connect.executor_for`` when
a run enforces provisioned storage rates (``harness.probes.blkthrottle``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from harness.remote.base import DetachedHandle, Executor, LineCallback, ProcessState, RunResult, checked
from harness.remote.commands import check_argv

JOIN_EXIT = 95
JOIN = r"""procs=$1
shift
echo $$ > "$procs" || { echo "kvgate: cannot join cgroup ($procs)" >&2; exit 95; }
exec "$@"
"""


def in_cgroup(procs_file: str, argv: Sequence[str]) -> list[str]:
    """``argv`` started inside the cgroup whose ``cgroup.procs`` file is ``procs_file``."""
    check_argv(argv)  # a string is refused here, as every executor refuses it, not split into letters
    return ["sh", "-c", JOIN, "kvgate-cgroup", procs_file, *argv]


class CgroupExecutor:
    """``Executor`` whose commands run in one cgroup; see the module docstring."""

    def __init__(self, inner: Executor, procs_file: str) -> None:
        self.inner = inner
        self.procs_file = procs_file

    @property
    def node(self) -> str:
        return self.inner.node

    def run(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None,
            timeout: float | None = None, check: bool = True, on_line: LineCallback | None = None,
            stdin: bytes | None = None) -> RunResult:
        res = self.inner.run(in_cgroup(self.procs_file, argv), env=env, cwd=cwd, timeout=timeout, check=False,
                             on_line=on_line, stdin=stdin)
        return checked(dataclasses.replace(res, command=tuple(argv)), check)  # the caller's command, as it ran

    def start_detached(self, argv: Sequence[str], *, workdir: str, name: str,
                       env: Mapping[str, str] | None = None, cwd: str | None = None) -> DetachedHandle:
        return self.inner.start_detached(in_cgroup(self.procs_file, argv), workdir=workdir, name=name, env=env,
                                         cwd=cwd)

    def put(self, local_path: str, remote_path: str, *, mode: int | None = None) -> None:
        self.inner.put(local_path, remote_path, mode=mode)

    def get(self, remote_path: str, local_path: str) -> None:
        self.inner.get(remote_path, local_path)

    def read_file(self, remote_path: str, *, max_bytes: int = 16 * 1024 * 1024) -> bytes:
        return self.inner.read_file(remote_path, max_bytes=max_bytes)

    def write_file(self, remote_path: str, data: bytes, *, mode: int | None = None) -> None:
        self.inner.write_file(remote_path, data, mode=mode)

    def which(self, tool: str) -> str | None:
        return self.inner.which(tool)

    def poll(self, handle: DetachedHandle) -> ProcessState:
        return self.inner.poll(handle)

    def stop(self, handle: DetachedHandle, *, grace: float = 10.0) -> ProcessState:
        return self.inner.stop(handle, grace=grace)

    def tail_log(self, handle: DetachedHandle, *, stream: str = "stderr", lines: int = 50) -> str:
        return self.inner.tail_log(handle, stream=stream, lines=lines)

    def close(self) -> None:
        self.inner.close()

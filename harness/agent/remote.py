"""Run the load generator on a node through the agent, and bring its records home.

Controller side (imported by the pipelines, never inside the zipapp). The flow::

    run = start_load(executor, agent, ["--endpoint", url, ...], workdir=w, local_dir=d)
    summary = wait_load(executor, run)          # polls, pulls records as they are written
    # after a disconnect or a controller restart, with a new executor:
    run = AgentLoad.load(d / HANDLE_FILE); summary = wait_load(new_executor, run)

Records are pulled by byte offset: the local ``records.jsonl`` is kept an exact byte-for-byte
prefix of the node's file (only complete lines are appended, then fsync'd), so the next offset is
simply the local file's size. Nothing is lost or duplicated across polls, disconnects or restarts,
and no offset has to be saved separately. The handle file holds no secret (the API key is read
on the node from the environment variable named in the arguments).
"""

from __future__ import annotations

import json
import os
import posixpath
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Optional, TypeVar

from harness.load.records import split_complete_lines
from harness.load.summary import Summary
from harness.remote.base import DetachedHandle, Executor, ProcessState, RemoteError

HANDLE_FILE = "agent-load.json"
RECORDS = "records.jsonl"
SUMMARY = "summary.json"
_NOT_YET = 3  # read-range exit code: the file does not exist yet


class AgentLoadError(RemoteError):
    """The load generator on the node failed, or stopped without its summary."""


_Run = TypeVar("_Run", bound="AgentLoad")


@dataclass
class AgentLoad:
    """A load run on a node: enough to reattach to it from a new controller. Subclasses (the
    soak's handle) keep the same fields and name their own handle file in ``handle_file``;
    ``from_json`` and ``load`` return the subclass they are called on."""

    handle_file: ClassVar[str] = HANDLE_FILE

    node: str
    python: str
    agent: str
    remote_out: str
    local_dir: str
    handle: DetachedHandle

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "python": self.python, "agent": self.agent, "remote_out": self.remote_out,
                "local_dir": self.local_dir, "handle": self.handle.to_json()}

    @classmethod
    def from_json(cls: type[_Run], data: dict[str, Any]) -> _Run:
        return cls(node=data["node"], python=data["python"], agent=data["agent"], remote_out=data["remote_out"],
                   local_dir=data["local_dir"], handle=DetachedHandle.from_json(data["handle"]))

    def save(self) -> Path:
        """Write the handle to ``local_dir/handle_file`` atomically (aside, then renamed)."""
        path = Path(self.local_dir) / self.handle_file
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(self.to_json(), indent=2) + "\n")
            fh.flush()
            os.fsync(fh.fileno())  # the reattach point: it must survive a crash right after the start
        tmp.replace(path)
        return path

    @classmethod
    def load(cls: type[_Run], path: Path) -> _Run:
        """The handle saved at ``path`` (a file), or in the directory ``path`` under ``handle_file``."""
        path = Path(path)
        if path.is_dir():
            path = path / cls.handle_file
        return cls.from_json(json.loads(path.read_text(encoding="utf-8")))

    def remote(self, name: str) -> str:
        """``name`` inside the run's output directory on the node."""
        return posixpath.join(self.remote_out, name)

    @property
    def local_records(self) -> Path:
        return Path(self.local_dir) / RECORDS


def start_load(executor: Executor, agent: str, load_args: Sequence[str], *, workdir: str, local_dir: Path,
               name: str = "load", python: str = "python3") -> AgentLoad:
    """Start ``python3 -I -S AGENT load run LOAD_ARGS --out <workdir>/<name>-out`` detached on the node
    and save its handle in ``local_dir/agent-load.json``."""
    if "--out" in load_args:
        raise ValueError("load_args must not contain --out: start_load chooses the remote directory")
    remote_out = posixpath.join(workdir, f"{name}-out")
    executor.run(["mkdir", "-p", "--", remote_out], timeout=60)
    argv = [python, "-I", "-S", agent, "load", "run", *load_args, "--out", remote_out, "-q"]
    handle = executor.start_detached(argv, workdir=workdir, name=name)
    run = AgentLoad(executor.node, python, agent, remote_out, str(local_dir), handle)
    run.save()
    return run


def _local_offset(path: Path) -> int:
    """Size of the local copy, cut back to its last complete line (a crash mid-append)."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return 0
    if size == 0:
        return 0
    with open(path, "rb+") as fh:
        fh.seek(max(0, size - 1))
        if fh.read(1) == b"\n":
            return size
        fh.seek(0)
        keep = fh.read().rfind(b"\n") + 1
        fh.truncate(keep)
        return keep


# The longest JSON line pulled from a node (a record, a window summary); a longer one is refused.
MAX_PULL_LINE = 64 << 20


def pull_lines(executor: Executor, python: str, agent: str, remote: str, local: Path, *,
               chunk: int = 4 << 20) -> list[dict[str, Any]]:
    """Append the new complete JSON lines of the node's file ``remote`` to ``local`` (kept an exact
    byte prefix of it, fsync'd); return them. A file not written yet reads as empty."""
    local.parent.mkdir(parents=True, exist_ok=True)
    offset = _local_offset(local)
    new: list[dict[str, Any]] = []
    while True:
        argv = [python, "-I", "-S", agent, "read-range", remote, str(offset), str(chunk)]
        res = executor.run(argv, check=False, timeout=120)
        if res.exit_code == _NOT_YET:
            break
        if res.exit_code != 0:
            raise AgentLoadError(f"cannot read {remote} on the node", host=executor.node, command=argv,
                                 exit_code=res.exit_code, stdout=res.stdout[-2000:], stderr=res.stderr)
        data = res.stdout.encode("utf-8")
        if len(data) != len(res.stdout):
            raise AgentLoadError(f"{remote} is not ASCII JSON: byte offsets would drift", host=executor.node,
                                 command=argv)
        if not data:
            break
        recs, consumed = split_complete_lines(data)
        if consumed == 0:
            if len(data) >= chunk:
                if chunk >= MAX_PULL_LINE:
                    raise AgentLoadError(f"{remote} on {executor.node} has a line longer than the "
                                         f"{MAX_PULL_LINE} byte limit at offset {offset}", host=executor.node,
                                         command=argv)
                chunk = min(chunk * 2, MAX_PULL_LINE)  # one line longer than a chunk: read more at once
                continue
            break
        with open(local, "ab") as fh:
            fh.write(data[:consumed])
            fh.flush()
            os.fsync(fh.fileno())
        offset += consumed
        new.extend(recs)
        if len(data) < chunk:
            break
    return new


def pull_records(executor: Executor, run: AgentLoad, *, chunk: int = 4 << 20) -> list[dict[str, Any]]:
    """Append the node's new complete record lines to the local copy; return them."""
    return pull_lines(executor, run.python, run.agent, posixpath.join(run.remote_out, RECORDS), run.local_records,
                      chunk=chunk)


def poll_load(executor: Executor, run: AgentLoad) -> tuple[ProcessState, list[dict[str, Any]]]:
    """Is it still running (checked first, so a finished run's pull is complete), and its new records."""
    state = executor.poll(run.handle)
    return state, pull_records(executor, run)


def finish_load(executor: Executor, run: AgentLoad, state: Optional[ProcessState] = None) -> Summary:
    """Pull what is left and the summary; an error with the log tail when there is no summary."""
    pull_records(executor, run)
    remote = posixpath.join(run.remote_out, SUMMARY)
    try:
        data = executor.read_file(remote)
    except RemoteError:
        st = state or executor.poll(run.handle)
        raise AgentLoadError(f"the load generator left no summary ({st.reason or 'no reason recorded'})",
                             host=executor.node, command=run.handle.command, exit_code=st.exit_code,
                             stderr=executor.tail_log(run.handle)) from None
    local = Path(run.local_dir) / SUMMARY
    local.write_bytes(data)
    return Summary.load(local)


def wait_load(executor: Executor, run: AgentLoad, *, poll_s: float = 0.5, timeout_s: Optional[float] = None,
              on_records: Optional[Callable[[list[dict[str, Any]]], None]] = None) -> Summary:
    """Poll until the run ends, pulling records as they come; then its summary. On timeout the
    run is stopped (SIGTERM: it writes its summary with what it has) and an error is raised."""
    deadline = time.monotonic() + timeout_s if timeout_s else None
    while True:
        state, recs = poll_load(executor, run)
        if recs and on_records is not None:
            on_records(recs)
        if not state.running:
            return finish_load(executor, run, state)
        if deadline is not None and time.monotonic() > deadline:
            executor.stop(run.handle, grace=10.0)
            pull_records(executor, run)
            raise AgentLoadError(f"the load run did not finish within {timeout_s:g} s; stopped",
                                 host=executor.node, command=run.handle.command)
        time.sleep(poll_s)


def stop_load(executor: Executor, run: AgentLoad, *, grace: float = 10.0) -> Summary:
    """Stop the run cleanly (SIGTERM, then SIGKILL after ``grace``) and bring home what it took."""
    state = executor.stop(run.handle, grace=grace)
    return finish_load(executor, run, state)

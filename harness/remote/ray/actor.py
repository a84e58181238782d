"""``NodeAgent``: what runs on a node for the Ray executor, one actor per inventory node.

It does what ``LocalExecutor`` does on that node (the same code: process groups, 128+N for a
signal, 127 for a missing program, atomic writes) and hands the outcome back as JSON bytes
(``replies.encode``; a file's chunk as its raw bytes), never as an exception or another Python
object: the controller takes nothing from an actor but bytes it decodes itself (``replies``), and
Ray would print an exception's traceback to the cluster's logs, with whatever the command's output
held. The controller rebuilds the typed error (``executor._raise``). A command whose lines the
controller follows is started (``run_open``) and polled (``run_next``), not a Ray streaming
generator: the end of such a stream is read with ``ray.get``, which would unpickle.

Secrets: a command's environment reaches the process through ``Popen(env=...)``, never its argument
list; nothing here prints or logs a command, its environment or its output (so nothing of them lands
in Ray's worker logs, which the dashboard serves).
"""

from __future__ import annotations

import base64
import os
import queue
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Optional

from harness.deletion import remove_file
from harness.remote.base import RemoteError, RunResult
from harness.remote.batch import BatchCommand, run_batch
from harness.remote.local import LocalExecutor, sha256_file
from harness.remote.ray.replies import encode

Outcome = dict[str, Any]  # {"ok": value} or {"error": class name, "message", "exit_code", "stdout", "stderr"}
CHUNK = 4 * 1024 * 1024  # bytes of a file per call (Ray moves each as one object)
LINES_PER_REPLY = 20000  # of a followed command, per run_next
_END = object()


def _error(exc: RemoteError, node: str) -> Outcome:
    message = str(exc).split("\n  ", 1)[0]  # the first line; command and output travel as fields
    prefix = f"{node}: "
    return {"error": type(exc).__name__, "message": message[len(prefix):] if message.startswith(prefix) else message,
            "exit_code": exc.exit_code, "stdout": exc.stdout, "stderr": exc.stderr}


def _result(res: RunResult) -> Outcome:
    return {"ok": {"exit_code": res.exit_code, "stdout": res.stdout, "stderr": res.stderr,
                   "duration_s": res.duration_s}}


class NodeAgent:
    """One inventory node's agent (a Ray actor with threads: several commands at once)."""

    def __init__(self, node: str, default_timeout: Optional[float] = None) -> None:
        self.node = node
        self._ex = LocalExecutor(node, default_timeout=default_timeout)
        self._uploads: dict[str, str] = {}  # upload id -> temp file
        self._followed: dict[str, tuple[queue.Queue[Any], list[Outcome]]] = {}  # run_open's commands
        self._lock = threading.Lock()

    def where(self) -> bytes:
        """Which machine and Ray node this actor runs on (ping, and the placement check)."""
        import importlib

        ray: Any = importlib.import_module("ray")  # the actor runs inside Ray
        ctx = ray.get_runtime_context()
        return encode({"node_id": ctx.get_node_id(), "actor_id": ctx.get_actor_id(),
                       "hostname": socket.gethostname(), "pid": os.getpid(),
                       "ip": ray.util.get_node_ip_address(), "time": time.time()})

    # -- commands ------------------------------------------------------------------------------

    def run(self, argv: Sequence[str], env: Optional[Mapping[str, str]], cwd: Optional[str],
            timeout: Optional[float], stdin: Optional[bytes]) -> bytes:
        return encode(self._run(argv, env, cwd, timeout, stdin, None))

    def run_open(self, argv: Sequence[str], env: Optional[Mapping[str, str]], cwd: Optional[str],
                 timeout: Optional[float], stdin: Optional[bytes]) -> bytes:
        """Start a command whose lines the controller follows (``run_next``); its id."""
        lines: queue.Queue[Any] = queue.Queue()
        box: list[Outcome] = []

        def work() -> None:
            try:
                box.append(self._run(argv, env, cwd, timeout, stdin, lambda s, line: lines.put((s, line))))
            finally:
                lines.put(_END)

        run_id = uuid.uuid4().hex
        with self._lock:
            self._followed[run_id] = (lines, box)
        threading.Thread(target=work, daemon=True, name="kvgate-run").start()
        return encode({"ok": run_id})

    def run_next(self, run_id: str, wait_s: float) -> bytes:
        """The lines of a followed command since the last call (waiting up to ``wait_s`` for the
        first), and its outcome once it ended: ``{"ok": {"lines": [[stream, line]...], "outcome"}}``."""
        with self._lock:
            lines, box = self._followed[run_id]
        got: list[Any] = []
        outcome: Optional[Outcome] = None
        try:
            item = lines.get(timeout=wait_s)
            while True:
                if item is _END:
                    outcome = box[0] if box else {"error": "RemoteError", "message": "the command's runner died",
                                                  "exit_code": None, "stdout": "", "stderr": ""}
                    with self._lock:
                        self._followed.pop(run_id, None)
                    break
                got.append(list(item))
                if len(got) >= LINES_PER_REPLY:
                    break
                item = lines.get_nowait()
        except queue.Empty:
            pass
        return encode({"ok": {"lines": got, "outcome": outcome}})

    def _run(self, argv: Sequence[str], env: Optional[Mapping[str, str]], cwd: Optional[str],
             timeout: Optional[float], stdin: Optional[bytes], on_line: Any) -> Outcome:
        try:
            res = self._ex.run(argv, env=env, cwd=cwd, timeout=timeout, check=False, stdin=stdin, on_line=on_line)
        except RemoteError as exc:  # CommandTimeout, with the output so far
            return _error(exc, self.node)
        return _result(res)

    def run_many(self, tools: Sequence[str], commands: Sequence[Mapping[str, Any]]) -> bytes:
        """A batch (``harness.remote.batch``) in one call: ``which`` of each tool, then each command
        ``{"argv", "timeout", "tool"}`` in order; every command's outcome as ``run`` gives it, None
        for one whose tool is missing."""
        try:
            batch = run_batch(self._ex, list(tools), [BatchCommand(tuple(c["argv"]), c.get("timeout"), c.get("tool"))
                                                      for c in commands])
        except RemoteError as exc:
            return encode(_error(exc, self.node))
        answers = [None if a is None else _error(a, self.node) if isinstance(a, RemoteError) else _result(a)
                   for a in batch.answers]
        return encode({"ok": {"which": batch.which, "answers": answers}})

    # -- files ---------------------------------------------------------------------------------

    def call(self, method: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> bytes:
        """``read_file`` (its bytes in base64), ``write_file`` or ``which`` of the node's LocalExecutor."""
        if method not in ("read_file", "write_file", "which"):
            return encode({"error": "RemoteError", "message": f"not a node file method: {method}",
                           "exit_code": None, "stdout": "", "stderr": ""})
        try:
            value = getattr(self._ex, method)(*args, **kwargs)
        except RemoteError as exc:
            return encode(_error(exc, self.node))
        return encode({"ok": base64.b64encode(value).decode() if method == "read_file" else value})

    def upload_open(self, dest: str) -> bytes:
        return encode(self._upload_open(dest))

    def _upload_open(self, dest: str) -> Outcome:
        """A temp file beside ``dest`` (so the final rename is atomic); returns its upload id."""
        try:
            fd, tmp = tempfile.mkstemp(prefix=".kvgate-", dir=os.path.dirname(os.path.abspath(dest)))
            os.close(fd)
        except FileNotFoundError:
            return {"error": "RemoteFileNotFound", "message": f"put: no such directory: {os.path.dirname(dest)}",
                    "exit_code": None, "stdout": "", "stderr": ""}
        except OSError as exc:
            return {"error": "TransferError", "message": f"put {dest}: {exc.strerror}", "exit_code": None,
                    "stdout": "", "stderr": ""}
        with self._lock:
            self._uploads[tmp] = dest
        return {"ok": tmp}

    def upload_chunk(self, upload: str, data: bytes) -> bytes:
        if not self._known(upload):
            return encode({"error": "TransferError", "message": "put: unknown upload", "exit_code": None,
                           "stdout": "", "stderr": ""})
        with open(upload, "ab") as fh:
            fh.write(data)
        return encode({"ok": None})

    def upload_close(self, upload: str, mode: Optional[int], want: str) -> bytes:
        """fsync, check the sha256 against ``want``, chmod and rename into place; the temp file is
        removed on any failure."""
        if not self._known(upload):
            return encode({"error": "TransferError", "message": "put: unknown upload", "exit_code": None,
                           "stdout": "", "stderr": ""})
        return encode(self._upload_close(upload, mode, want))

    def _upload_close(self, tmp: str, mode: Optional[int], want: str) -> Outcome:
        with self._lock:
            dest = self._uploads.pop(tmp)
        try:
            with open(tmp, "rb+") as fh:
                os.fsync(fh.fileno())
            got = sha256_file(tmp)
            if got != want:
                return {"error": "TransferError", "message": f"put {dest}: checksum mismatch (sha256 {want} sent, "
                        f"{got} received)", "exit_code": None, "stdout": "", "stderr": ""}
            os.chmod(tmp, mode if mode is not None else 0o644)
            os.replace(tmp, dest)
            return {"ok": got}
        except OSError as exc:
            return {"error": "TransferError", "message": f"put {dest}: {exc.strerror}", "exit_code": None,
                    "stdout": "", "stderr": ""}
        finally:
            remove_file(tmp, within=os.path.dirname(os.path.abspath(tmp)), marker=".kvgate-")

    def _known(self, upload: str) -> bool:
        with self._lock:
            return upload in self._uploads

    def download_stat(self, path: str) -> bytes:
        return encode(self._download_stat(path))

    def _download_stat(self, path: str) -> Outcome:
        """(size, sha256) of a file to fetch."""
        try:
            return {"ok": [os.path.getsize(path), sha256_file(path)]}
        except FileNotFoundError:
            return {"error": "RemoteFileNotFound", "message": f"get: no such file: {path}", "exit_code": None,
                    "stdout": "", "stderr": ""}
        except OSError as exc:
            return {"error": "TransferError", "message": f"get {path}: {exc.strerror}", "exit_code": None,
                    "stdout": "", "stderr": ""}

    def download_chunk(self, path: str, offset: int, size: int) -> bytes:
        """Raw bytes (the one reply that is not JSON: the controller checks its size and the sha256)."""
        with open(path, "rb") as fh:
            fh.seek(offset)
            return fh.read(size)

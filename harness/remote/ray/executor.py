"""``RayExecutor``: the Executor protocol over a node actor (``actor.NodeAgent``).

Commands are argument lists checked here (``commands.check_argv``/``check_env``) and again by the
node's LocalExecutor; they never become a shell string. A command's timeout is kept on the node
(its process group is killed there, as locally); the controller waits that long plus a margin, so
an actor that dies or a node that vanishes surfaces as ``ConnectionLost``, never as a hang.
Every reply is bytes the controller decodes itself (``replies``), its shape checked here: a reply
that is not a kvgate reply is ``MalformedReply`` (exit 4, the node named). Files move in chunks
of ``actor.CHUNK`` bytes, checked by sha256 on both sides. Detached processes use the same
scripts as SSH (``detached``), run through this executor.
"""

from __future__ import annotations

import base64
import os
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Optional

from harness.deletion import remove_file
from harness.errors import InputError
from harness.remote import base, detached
from harness.remote.base import (
    ConnectionLost,
    LineCallback,
    RemoteError,
    RunResult,
    TransferError,
    checked,
)
from harness.remote.batch import Answer, BatchCommand, BatchResult
from harness.remote.commands import check_argv, check_env
from harness.remote.local import sha256_file
from harness.remote.ray import replies
from harness.remote.ray.actor import CHUNK, Outcome
from harness.remote.ray.replies import need

if TYPE_CHECKING:
    from harness.config.inventory import Inventory
    from harness.remote.ray.actorbook import ActorBook

REPLY_MARGIN_S = 30.0  # beyond a command's own timeout, before the actor counts as lost
CALL_TIMEOUT_S = 120.0  # a file chunk, a which, a read
FOLLOW_WAIT_S = 5.0  # a followed command's run_next waits this long for a line
_ERRORS = {"RemoteError", "CommandFailed", "CommandTimeout", "Unreachable", "ConnectionLost", "TransferError",
           "RemoteFileNotFound", "OutputTooLarge"}


def _raise(node: str, outcome: Any, command: Optional[Sequence[str]] = None, what: str = "a call") -> Any:
    """The value of an outcome, or its error rebuilt as the typed kvgate error (of the remote
    errors only: the name comes from the node)."""
    need(isinstance(outcome, dict) and ("ok" in outcome or isinstance(outcome.get("error"), str)),
         node=node, what=what, expected='an object with "ok" or "error"', command=command)
    if "ok" in outcome:
        return outcome["ok"]
    name = str(outcome["error"])
    cls = getattr(base, name, None) if name in _ERRORS else None
    if not (isinstance(cls, type) and issubclass(cls, RemoteError)):
        cls = RemoteError
    code = outcome.get("exit_code")
    raise cls(str(outcome.get("message")), host=node, command=command,
              exit_code=code if isinstance(code, int) and not isinstance(code, bool) else None,
              stdout=_text(outcome.get("stdout")), stderr=_text(outcome.get("stderr")))


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class RayExecutor(detached.DetachedByRun):
    """Runs commands and moves files on one node through its Ray node actor (started lazily)."""

    batches_commands = True  # every call is an actor call: run_many takes a batch in one (harness.remote.batch)

    def __init__(self, node_name: str, actor_source: Any, *, command_timeout: float | None = 600.0) -> None:
        self._node = node_name
        self._source = actor_source  # an actor handle, or a callable that returns one
        self._actor: Any = None
        self.command_timeout = command_timeout

    @classmethod
    def from_inventory(cls, inventory: Inventory, node_name: str, *, book: ActorBook | None = None) -> RayExecutor:
        """``book``: where the actors kvgate creates are recorded (a gate run's own; default the controller's)."""
        from harness.remote.ray import cluster

        try:
            node = inventory.node(node_name)
        except KeyError as exc:
            raise InputError(str(exc.args[0])) from exc
        timeout = inventory.setting(node, "command_timeout")
        return cls(node.name, lambda: cluster.node_actor(inventory, node, book=book),
                   command_timeout=float(timeout) if timeout is not None else None)  # type: ignore[arg-type]

    def __repr__(self) -> str:
        return f"RayExecutor({self._node!r})"

    @property
    def node(self) -> str:
        return self._node

    def actor(self) -> Any:
        if self._actor is None:
            self._actor = self._source() if callable(self._source) else self._source
        return self._actor

    def _get(self, ref: Any, timeout: float | None, what: str, command: Sequence[str] | None = None) -> Any:
        """The decoded JSON reply to a call."""
        raw = self._fetch(ref, timeout, what, command)
        return replies.decode(raw, node=self._node, what=what, command=command)

    def _fetch(self, ref: Any, timeout: float | None, what: str, command: Sequence[str] | None = None) -> bytes:
        """The reply's bytes (``replies.fetch``: never unpickled)."""
        from harness.remote.ray.cluster import ray_module

        ray = ray_module()
        try:
            return replies.fetch(ref, timeout, node=self._node, what=what, command=command)
        except ray.exceptions.GetTimeoutError as exc:
            raise ConnectionLost(f"no answer from the node actor within {timeout:g} s during {what}",
                                 host=self._node, command=command) from exc
        except ConnectionLost:
            self._actor = None  # the next call finds or starts it again
            raise

    # -- commands ------------------------------------------------------------------------------

    def run(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: str | None = None,
            timeout: float | None = None, check: bool = True, on_line: LineCallback | None = None,
            stdin: bytes | None = None) -> RunResult:
        args = check_argv(argv)
        extra = check_env(env) or None
        if cwd is not None and (not cwd or "\0" in cwd):
            raise InputError(f"invalid working directory {cwd!r}")
        timeout = timeout if timeout is not None else self.command_timeout
        wait = None if timeout is None else timeout + REPLY_MARGIN_S
        actor = self.actor()
        if on_line is None:
            outcome = self._get(actor.run.remote(list(args), extra, cwd, timeout, stdin), wait, "a command", args)
        else:
            outcome = self._follow(actor, args, extra, cwd, timeout, stdin, on_line, wait)
        return checked(self._result(args, _raise(self._node, outcome, args, "a command")), check)

    def run_many(self, tools: Sequence[str], commands: Sequence[BatchCommand]) -> BatchResult:
        """A batch in one actor call (``harness.remote.batch``); each command checked here as ``run``
        checks it. The controller waits for the sum of the commands' timeouts plus the margin."""
        items = [{"argv": list(check_argv(c.argv)), "tool": c.tool,
                  "timeout": c.timeout if c.timeout is not None else self.command_timeout} for c in commands]
        timeouts = [item["timeout"] for item in items]
        wait = None if None in timeouts else sum(timeouts) + REPLY_MARGIN_S  # type: ignore[arg-type]
        what = "a batch of commands"
        value = _raise(self._node, self._get(self.actor().run_many.remote(list(tools), items), wait, what),
                       what=what)
        need(isinstance(value, dict) and isinstance(value.get("which"), dict)
             and isinstance(value.get("answers"), list) and len(value["answers"]) == len(commands)
             and all(isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in value["which"].items()),
             node=self._node, what=what, expected=f'"which" (tool -> path or null) and {len(commands)} "answers"')
        answers: list[Answer] = []
        for cmd, got in zip(commands, value["answers"]):
            if got is None:
                answers.append(None)
                continue
            try:
                answers.append(self._result(tuple(cmd.argv), _raise(self._node, got, cmd.argv, what)))
            except replies.MalformedReply:
                raise
            except RemoteError as exc:  # this command's timeout (or flood), with its output so far
                answers.append(exc)
        return BatchResult(dict(value["which"]), answers)

    def _result(self, args: tuple[str, ...], value: Any) -> RunResult:
        need(isinstance(value, dict) and _is_int(value.get("exit_code")) and isinstance(value.get("stdout"), str)
             and isinstance(value.get("stderr"), str) and isinstance(value.get("duration_s"), (int, float))
             and not isinstance(value.get("duration_s"), bool),
             node=self._node, what="a command", command=args,
             expected='"exit_code" (integer), "stdout", "stderr" (strings) and "duration_s" (number)')
        return RunResult(host=self._node, command=args, exit_code=int(value["exit_code"]),
                         stdout=value["stdout"], stderr=value["stderr"], duration_s=float(value["duration_s"]))

    def _follow(self, actor: Any, args: tuple[str, ...], env: dict[str, str] | None, cwd: str | None,
                timeout: float | None, stdin: bytes | None, on_line: LineCallback, wait: float | None) -> Outcome:
        """A command whose lines go to ``on_line`` as they come (``run_open``, then ``run_next`` until
        its outcome); a callback's exception is raised once the command has ended."""
        import time

        what = "a command"
        run_id = _raise(self._node, self._get(actor.run_open.remote(list(args), env, cwd, timeout, stdin),
                                              CALL_TIMEOUT_S, what, args), args, what)
        need(isinstance(run_id, str), node=self._node, what=what, expected="a run id", command=args)
        deadline = None if wait is None else time.monotonic() + wait
        callback_error: Optional[BaseException] = None
        while True:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            step = _raise(self._node, self._get(actor.run_next.remote(run_id, FOLLOW_WAIT_S),
                                                 CALL_TIMEOUT_S if left is None else min(left, FOLLOW_WAIT_S) + 30,
                                                 what, args), args, what)
            need(isinstance(step, dict) and isinstance(step.get("lines"), list)
                 and all(isinstance(x, list) and len(x) == 2 and x[0] in ("stdout", "stderr")
                         and isinstance(x[1], str) for x in step["lines"])
                 and (step.get("outcome") is None or isinstance(step["outcome"], dict)),
                 node=self._node, what=what, expected='"lines" ([stream, line] pairs) and "outcome"', command=args)
            for stream, line in step["lines"]:
                if callback_error is None:
                    try:
                        on_line(stream, line)
                    except BaseException as exc:  # noqa: BLE001 - reported after the command ends
                        callback_error = exc
            if step["outcome"] is not None:
                break
            if left is not None and left <= 0:
                raise ConnectionLost(f"no end of {what} from the node actor within {wait:g} s", host=self._node,
                                     command=args)
        if callback_error is not None:
            raise callback_error
        return dict(step["outcome"])

    # -- files ---------------------------------------------------------------------------------

    def put(self, local_path: str, remote_path: str, *, mode: int | None = None) -> None:
        try:
            want = sha256_file(local_path)
        except OSError as exc:
            raise TransferError(f"put {local_path}: {exc.strerror}", host=self._node) from exc
        actor = self.actor()
        upload = _raise(self._node, self._get(actor.upload_open.remote(remote_path), CALL_TIMEOUT_S, "put"), what="put")
        need(isinstance(upload, str), node=self._node, what="put", expected="an upload id")
        with open(local_path, "rb") as fh:
            for block in iter(lambda: fh.read(CHUNK), b""):
                _raise(self._node, self._get(actor.upload_chunk.remote(upload, block), CALL_TIMEOUT_S, "put"),
                       what="put")
        _raise(self._node, self._get(actor.upload_close.remote(upload, mode, want), CALL_TIMEOUT_S, "put"), what="put")

    def get(self, remote_path: str, local_path: str) -> None:
        actor = self.actor()
        stat = _raise(self._node, self._get(actor.download_stat.remote(remote_path), CALL_TIMEOUT_S, "get"), what="get")
        need(isinstance(stat, list) and len(stat) == 2 and _is_int(stat[0]) and stat[0] >= 0
             and isinstance(stat[1], str), node=self._node, what="get", expected="[size, sha256]")
        size, want = stat
        tmp = f"{local_path}.kvgate-{uuid.uuid4().hex[:12]}.tmp"
        try:
            with open(tmp, "wb") as out:
                for offset in range(0, max(int(size), 1), CHUNK):
                    out.write(self._fetch(actor.download_chunk.remote(remote_path, offset, CHUNK),
                                          CALL_TIMEOUT_S, "get"))  # raw bytes, at most a chunk
                    if out.tell() > size:
                        raise TransferError(f"get {remote_path}: the node sent more than its {size} bytes",
                                            host=self._node)
            got = sha256_file(tmp)
            if got != want:
                raise TransferError(f"get {remote_path} -> {local_path}: checksum mismatch (sha256 {want} on "
                                    f"the node, {got} received)", host=self._node)
            os.replace(tmp, local_path)
        finally:
            remove_file(tmp, within=os.path.dirname(os.path.abspath(tmp)), marker=".kvgate-")

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        ref = self.actor().call.remote(method, list(args), kwargs)
        return _raise(self._node, self._get(ref, CALL_TIMEOUT_S, method), what=method)

    def read_file(self, remote_path: str, *, max_bytes: int = 16 * 1024 * 1024) -> bytes:
        encoded = self._call("read_file", remote_path, max_bytes=max_bytes)
        need(isinstance(encoded, str), node=self._node, what="read_file", expected="base64 text")
        try:
            data = base64.b64decode(encoded, validate=True)
        except ValueError:
            data = None
        need(data is not None and len(data) <= max_bytes, node=self._node, what="read_file",
             expected=f"base64 of at most {max_bytes} bytes")
        return bytes(data or b"")

    def write_file(self, remote_path: str, data: bytes, *, mode: int | None = None) -> None:
        self._call("write_file", remote_path, data, mode=mode)

    def which(self, tool: str) -> str | None:
        if not tool or "/" in tool or "\0" in tool:
            return None
        found = self._call("which", tool)
        need(found is None or isinstance(found, str), node=self._node, what="which", expected="a path or null")
        return str(found) if found else None

    # detached processes: start_detached, poll, stop, tail_log from detached.DetachedByRun

    def actor_id(self) -> str:
        """The id of the node actor serving this node now (a new id: the old actor was replaced): the
        id of the handle kvgate holds (created, or checked against its record), once the actor
        answered (a dead one is ConnectionLost, and the next call starts another)."""
        actor = self.actor()
        self._get(actor.where.remote(), CALL_TIMEOUT_S, "a look at the node actor")
        return str(actor._actor_id.hex())

    def close(self) -> None:
        self._actor = None  # the actor stays (detached): the next controller reattaches to it

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _ray_executor(executor: object) -> Optional[RayExecutor]:
    """The RayExecutor behind ``executor`` (through recording wrappers, which keep theirs as
    ``inner``), None for an executor that is not Ray's."""
    seen = 0
    while not isinstance(executor, RayExecutor) and hasattr(executor, "inner") and seen < 8:
        executor, seen = executor.inner, seen + 1
    return executor if isinstance(executor, RayExecutor) else None


def actor_identity(executor: object) -> Optional[str]:
    """The id of the Ray node actor behind ``executor``, None for an executor that is not Ray's."""
    ray_ex = _ray_executor(executor)
    return ray_ex.actor_id() if ray_ex is not None else None


def retire_actor(executor: object) -> None:
    """End the node actor behind ``executor`` if it started or found one (a run that is over: its
    detached processes do not need it, and an idle actor holds a worker process on the node)."""
    ray_ex = _ray_executor(executor)
    if ray_ex is None or ray_ex._actor is None:
        return
    from harness.remote.ray.cluster import ray_module

    actor, ray_ex._actor = ray_ex._actor, None
    try:
        ray_module().kill(actor, no_restart=True)
    except Exception:  # noqa: BLE001, S110 - a dead or unreachable actor is already what we want
        pass


__all__ = ["RayExecutor", "actor_identity", "retire_actor"]

"""``RayExecutor``: the Executor protocol over a node actor (``actor.NodeAgent``).

Commands are argument lists checked here (``commands.check_argv``/``check_env``) and again by the
node's LocalExecutor; they never become a shell string. A command's timeout is kept on the node
(its process group is killed there, as locally); the controller waits that long plus a margin, so
an actor that dies or a node that vanishes surfaces as ``ConnectionLost``, never as a hang.
Files move in chunks of ``actor.CHUNK`` bytes, checked by sha256 on both sides. Detached
processes use the same scripts as SSH (``detached``), run through this executor.
"""

from __future__ import annotations

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
from harness.remote.ray.actor import CHUNK, Outcome

if TYPE_CHECKING:
    from harness.config.inventory import Inventory

REPLY_MARGIN_S = 30.0  # beyond a command's own timeout, before the actor counts as lost
CALL_TIMEOUT_S = 120.0  # a file chunk, a which, a read


def _raise(node: str, outcome: Outcome, command: Optional[Sequence[str]] = None) -> Any:
    """The value of an outcome, or its error rebuilt as the typed kvgate error."""
    if "ok" in outcome:
        return outcome["ok"]
    cls = getattr(base, str(outcome.get("error")), None)
    if not (isinstance(cls, type) and issubclass(cls, RemoteError)):
        cls = RemoteError
    raise cls(str(outcome.get("message")), host=node, command=command, exit_code=outcome.get("exit_code"),
              stdout=outcome.get("stdout") or "", stderr=outcome.get("stderr") or "")


class RayExecutor(detached.DetachedByRun):
    """Runs commands and moves files on one node through its Ray node actor (started lazily)."""

    batches_commands = True  # every call is an actor call: run_many takes a batch in one (harness.remote.batch)

    def __init__(self, node_name: str, actor_source: Any, *, command_timeout: float | None = 600.0) -> None:
        self._node = node_name
        self._source = actor_source  # an actor handle, or a callable that returns one
        self._actor: Any = None
        self.command_timeout = command_timeout

    @classmethod
    def from_inventory(cls, inventory: Inventory, node_name: str) -> RayExecutor:
        from harness.remote.ray import cluster

        try:
            node = inventory.node(node_name)
        except KeyError as exc:
            raise InputError(str(exc.args[0])) from exc
        timeout = inventory.setting(node, "command_timeout")
        return cls(node.name, lambda: cluster.node_actor(inventory, node),
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
        from harness.remote.ray.cluster import ray_module

        ray = ray_module()
        try:
            return ray.get(ref, timeout=timeout)
        except ray.exceptions.GetTimeoutError as exc:
            raise ConnectionLost(f"no answer from the node actor within {timeout:g} s during {what}",
                                 host=self._node, command=command) from exc
        except ray.exceptions.RayActorError as exc:
            self._actor = None  # the next call finds or starts it again
            raise ConnectionLost(f"the node actor died during {what}: {str(exc).splitlines()[0]}",
                                 host=self._node, command=command) from exc

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
            outcome = self._stream(actor, args, extra, cwd, timeout, stdin, on_line, wait)
        return checked(self._result(args, _raise(self._node, outcome, args)), check)

    def run_many(self, tools: Sequence[str], commands: Sequence[BatchCommand]) -> BatchResult:
        """A batch in one actor call (``harness.remote.batch``); each command checked here as ``run``
        checks it. The controller waits for the sum of the commands' timeouts plus the margin."""
        items = [{"argv": list(check_argv(c.argv)), "tool": c.tool,
                  "timeout": c.timeout if c.timeout is not None else self.command_timeout} for c in commands]
        timeouts = [item["timeout"] for item in items]
        wait = None if None in timeouts else sum(timeouts) + REPLY_MARGIN_S  # type: ignore[arg-type]
        outcome = self._get(self.actor().run_many.remote(list(tools), items), wait, "a batch of commands")
        value = _raise(self._node, outcome)
        answers: list[Answer] = []
        for cmd, got in zip(commands, value["answers"]):
            if got is None:
                answers.append(None)
                continue
            try:
                answers.append(self._result(tuple(cmd.argv), _raise(self._node, got, cmd.argv)))
            except RemoteError as exc:  # this command's timeout (or flood), with its output so far
                answers.append(exc)
        return BatchResult(dict(value["which"]), answers)

    def _result(self, args: tuple[str, ...], value: dict[str, Any]) -> RunResult:
        return RunResult(host=self._node, command=args, exit_code=int(value["exit_code"]),
                         stdout=value["stdout"], stderr=value["stderr"], duration_s=float(value["duration_s"]))

    def _stream(self, actor: Any, args: tuple[str, ...], env: dict[str, str] | None, cwd: str | None,
                timeout: float | None, stdin: bytes | None, on_line: LineCallback, wait: float | None) -> Outcome:
        gen = actor.run_streaming.options(num_returns="streaming").remote(list(args), env, cwd, timeout, stdin)
        callback_error: Optional[BaseException] = None
        outcome: Outcome = {}
        for ref in gen:
            item = self._get(ref, wait, "a command", args)
            if isinstance(item, dict):
                outcome = item
            elif callback_error is None:
                try:
                    on_line(item[0], item[1])
                except BaseException as exc:  # noqa: BLE001 - reported after the command ends
                    callback_error = exc
        if callback_error is not None:
            raise callback_error
        return outcome

    # -- files ---------------------------------------------------------------------------------

    def put(self, local_path: str, remote_path: str, *, mode: int | None = None) -> None:
        try:
            want = sha256_file(local_path)
        except OSError as exc:
            raise TransferError(f"put {local_path}: {exc.strerror}", host=self._node) from exc
        actor = self.actor()
        upload = _raise(self._node, self._get(actor.upload_open.remote(remote_path), CALL_TIMEOUT_S, "put"))
        with open(local_path, "rb") as fh:
            for block in iter(lambda: fh.read(CHUNK), b""):
                self._get(actor.upload_chunk.remote(upload, block), CALL_TIMEOUT_S, "put")
        _raise(self._node, self._get(actor.upload_close.remote(upload, mode, want), CALL_TIMEOUT_S, "put"))

    def get(self, remote_path: str, local_path: str) -> None:
        actor = self.actor()
        size, want = _raise(self._node, self._get(actor.download_stat.remote(remote_path), CALL_TIMEOUT_S, "get"))
        tmp = f"{local_path}.kvgate-{uuid.uuid4().hex[:12]}.tmp"
        try:
            with open(tmp, "wb") as out:
                for offset in range(0, max(int(size), 1), CHUNK):
                    out.write(self._get(actor.download_chunk.remote(remote_path, offset, CHUNK),
                                        CALL_TIMEOUT_S, "get"))
            got = sha256_file(tmp)
            if got != want:
                raise TransferError(f"get {remote_path} -> {local_path}: checksum mismatch (sha256 {want} on "
                                    f"the node, {got} received)", host=self._node)
            os.replace(tmp, local_path)
        finally:
            remove_file(tmp, within=os.path.dirname(os.path.abspath(tmp)), marker=".kvgate-")

    def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        ref = self.actor().call.remote(method, list(args), kwargs)
        return _raise(self._node, self._get(ref, CALL_TIMEOUT_S, method))

    def read_file(self, remote_path: str, *, max_bytes: int = 16 * 1024 * 1024) -> bytes:
        return bytes(self._call("read_file", remote_path, max_bytes=max_bytes))

    def write_file(self, remote_path: str, data: bytes, *, mode: int | None = None) -> None:
        self._call("write_file", remote_path, data, mode=mode)

    def which(self, tool: str) -> str | None:
        if not tool or "/" in tool or "\0" in tool:
            return None
        found = self._call("which", tool)
        return str(found) if found else None

    # detached processes: start_detached, poll, stop, tail_log from detached.DetachedByRun

    def actor_id(self) -> str:
        """The id of the node actor serving this node now (a new id: the old actor was replaced)."""
        where = self._get(self.actor().where.remote(), CALL_TIMEOUT_S, "a look at the node actor")
        return str(where["actor_id"])

    def close(self) -> None:
        self._actor = None  # the actor stays (detached): the next controller reattaches to it

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def actor_identity(executor: object) -> Optional[str]:
    """The id of the Ray node actor behind ``executor`` (through recording wrappers, which keep
    theirs as ``inner``), None for an executor that is not Ray's."""
    seen = 0
    while not isinstance(executor, RayExecutor) and hasattr(executor, "inner") and seen < 8:
        executor, seen = executor.inner, seen + 1
    return executor.actor_id() if isinstance(executor, RayExecutor) else None


__all__ = ["RayExecutor", "actor_identity"]

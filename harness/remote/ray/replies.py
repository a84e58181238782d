"""What the controller takes from a node actor: bytes, decoded by kvgate, never an object Ray unpickles.

``ray.get`` decodes a returned value by the *sender's* metadata: ``PYTHON`` is cloudpickle (an
object whose ``__reduce__`` runs code on the controller), an error is a pickled exception, and only
``RAW`` (a ``bytes`` return value) is handed over as it is. The controller cannot choose the
decoder through ``ray.get``, so it does not use it for replies: :func:`fetch` reads the stored
object's buffer and metadata from Ray's core worker (``get_objects``, what ``ray.get`` calls before
it deserializes), accepts ``RAW`` only, bounded in size, and maps Ray's own error codes (a dead
actor, a dead node) to ``ConnectionLost`` by their number, without reading their payload. Every
reply is JSON (:func:`encode` on the node, :func:`decode` here), its shape checked where it is used
(``executor``): a reply of the wrong kind or shape is :class:`MalformedReply` (exit 4, node named).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Optional

from harness.remote.base import ConnectionLost, RemoteError

# A command's two streams at the executors' cap (2 x MAX_OUTPUT_BYTES, 256 MiB each) as JSON
# (UTF-8, ordinary text not escaped), with room for a batch's other answers; a file chunk is 4 MiB
MAX_REPLY_BYTES = 1024 * 1024 * 1024
RAW = b"RAW"
# Ray's ErrorType names (its common.proto; looked up by name, the numbers are Ray's) that mean the
# actor, its worker or its node is gone: the caller's next call starts or finds the actor again
_GONE = {"WORKER_DIED": "its worker died", "ACTOR_DIED": "the actor died", "LOCAL_RAYLET_DIED": "the raylet died",
         "NODE_DIED": "its node died", "ACTOR_UNAVAILABLE": "the actor is unavailable",
         "OUT_OF_MEMORY": "its worker was killed for memory"}


class MalformedReply(RemoteError):
    """A node actor answered something that is not a kvgate reply (wrong kind, size or shape)."""


def encode(value: Any) -> bytes:
    """A reply as the node actor returns it (JSON bytes: Ray stores ``bytes`` raw)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def fetch(ref: Any, timeout: Optional[float], *, node: str, what: str,
          command: Optional[Sequence[str]] = None, max_bytes: int = MAX_REPLY_BYTES) -> bytes:
    """The bytes of one reply, or the typed error; raises ``GetTimeoutError`` as ``ray.get`` does."""
    import ray  # the controller's side only (the node actor imports this module for encode)

    worker: Any = ray._private.worker.global_worker
    timeout_ms = -1 if timeout is None else max(int(timeout * 1000), 0)
    [stored] = worker.core_worker.get_objects([ref], timeout_ms)
    data, metadata = stored[0], stored[1]  # Ray 2.60 adds a third field (the transport)
    kind = bytes(metadata or b"").split(b",")[0]
    if kind == RAW:
        size = 0 if data is None else memoryview(data).nbytes
        if size > max_bytes:
            raise MalformedReply(f"the node actor's answer to {what} is {size} bytes (at most {max_bytes}); "
                                 "refused unread", host=node, command=command)
        return b"" if data is None else bytes(memoryview(data))
    error = _error_name(kind)
    if error in _GONE:
        raise ConnectionLost(f"the node actor died during {what}: {_GONE[error]}", host=node, command=command)
    if error == "TASK_EXECUTION_EXCEPTION":
        raise MalformedReply(f"the node actor raised an exception during {what} (kvgate's actor answers "
                             "errors as data; the exception was not unpickled)", host=node, command=command)
    shown = kind.decode("ascii", "replace")[:20] or "none"
    raise MalformedReply(f"the node actor answered {what} with a Ray object of kind {shown}, not bytes "
                         "(refused unread: decoding it would unpickle what the actor chose)",
                         host=node, command=command)


def _error_name(kind: bytes) -> Optional[str]:
    if not kind.isdigit():
        return None
    from ray.core.generated.common_pb2 import ErrorType  # type: ignore[attr-defined]

    try:
        return str(ErrorType.Name(int(kind)))
    except ValueError:
        return None


def decode(raw: bytes, *, node: str, what: str, command: Optional[Sequence[str]] = None) -> Any:
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise MalformedReply(f"the node actor's answer to {what} is not JSON ({exc})", host=node,
                             command=command) from None


def need(cond: bool, *, node: str, what: str, expected: str, command: Optional[Sequence[str]] = None) -> None:
    """A shape check of a decoded reply: :class:`MalformedReply` naming what was expected."""
    if not cond:
        raise MalformedReply(f"malformed answer from the node actor to {what}: expected {expected}",
                             host=node, command=command)

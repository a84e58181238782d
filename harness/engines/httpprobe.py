"""One HTTP request to an engine, made on the engine's node, whose own loopback reaches it.

Stdlib only: on a remote node this file's source runs as ``python3 -c SOURCE URL METHOD TIMEOUT``
(the POST body on stdin) and prints one JSON line; on the controller's own machine
``harness.engines.lifecycle.http_call`` calls :func:`probe` in-process instead of starting a Python
per request (a verified cold restore makes several such requests per repetition)."""

from __future__ import annotations

import base64
import http.client
import json
import socket
import sys
import threading
import urllib.parse
from typing import Any, Optional

# The largest answer read (a vLLM /metrics page is a few hundred KB): an engine that sends more is
# cut off with an error naming it and the limit, never held in memory.
MAX_BODY_BYTES = 32 << 20


def probe(url: str, method: str, data: Optional[bytes], timeout: float, *,
          max_bytes: int = MAX_BODY_BYTES) -> dict[str, Any]:
    """``{"status": int, "body": base64}`` for any HTTP answer, ``{"error": text}`` when none came.
    ``timeout`` is an overall deadline for connecting, sending and reading the whole answer (a
    server dripping a byte at a time is cut off at it); a body over ``max_bytes`` is an error."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return {"error": f"not an http(s) URL: {url!r}"}
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    where = f"{host}:{parts.port or (443 if parts.scheme == 'https' else 80)}"
    # http.client uses no proxy: the engine is on this node's loopback, a proxy would hide it
    cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = cls(parts.hostname, parts.port, timeout=timeout)
    cut = threading.Event()
    socks: list[socket.socket] = []
    timer = threading.Timer(timeout, _cut_off, (socks, cut))
    timer.daemon = True
    timer.start()
    try:
        conn.connect()
        # kept here: http.client drops conn.sock once a response that closes the connection starts
        socks.append(conn.sock)
        if cut.is_set():
            raise TimeoutError
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        conn.request(method, target, body=data, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        body = bytearray()
        while True:
            chunk = resp.read1(65536)
            if not chunk:
                break
            body += chunk
            if len(body) > max_bytes:
                return {"error": f"the answer from {where} is larger than the {max_bytes} byte limit"}
        if cut.is_set():
            raise TimeoutError
        return {"status": resp.status, "body": base64.b64encode(bytes(body)).decode("ascii")}
    except Exception as e:  # noqa: BLE001 - any failure to get an answer is reported, not raised
        if cut.is_set():
            return {"error": f"no complete answer from {where} within the {timeout:g} s deadline"}
        return {"error": f"{type(e).__name__}: {e}"}
    finally:
        timer.cancel()
        conn.close()


def _cut_off(socks: list[socket.socket], cut: threading.Event) -> None:
    """At the deadline: wake a read blocked on the socket (shutdown, unlike close, does)."""
    cut.set()
    for sock in socks:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def main(argv: list[str]) -> None:
    url, method, timeout = argv[0], argv[1], float(argv[2])
    data = sys.stdin.buffer.read() if method == "POST" else None
    print(json.dumps(probe(url, method, data, timeout)))


if __name__ == "__main__":
    main(sys.argv[1:])

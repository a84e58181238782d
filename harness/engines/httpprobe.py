"""One HTTP request to an engine, made on the engine's node, whose own loopback reaches it.

Stdlib only: on a remote node this file's source runs as ``python3 -c SOURCE URL METHOD TIMEOUT``
(the POST body on stdin) and prints one JSON line; on the controller's own machine
``harness.engines.lifecycle.http_call`` calls :func:`probe` in-process instead of starting a Python
per request (a verified cold restore makes several such requests per repetition)."""

from __future__ import annotations

import base64
import json
import sys
import urllib.error
import urllib.request
from typing import Any, Optional


def probe(url: str, method: str, data: Optional[bytes], timeout: float) -> dict[str, Any]:
    """``{"status": int, "body": base64}`` for any HTTP answer, ``{"error": text}`` when none came."""
    # no proxy: the engine is on this node's loopback, and a proxy from the environment would hide it
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with opener.open(req, timeout=timeout) as r:
            status, body = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, body = e.code, e.read()
    except Exception as e:  # noqa: BLE001 - any failure to get an answer is reported, not raised
        return {"error": f"{type(e).__name__}: {e}"}
    return {"status": status, "body": base64.b64encode(body).decode("ascii")}


def main(argv: list[str]) -> None:
    url, method, timeout = argv[0], argv[1], float(argv[2])
    data = sys.stdin.buffer.read() if method == "POST" else None
    print(json.dumps(probe(url, method, data, timeout)))


if __name__ == "__main__":
    main(sys.argv[1:])

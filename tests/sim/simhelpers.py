"""Helpers for tests that run the real KV emulator as a process and talk HTTP to it."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from harness.ports import free_port

REPO = Path(__file__).resolve().parents[2]


def read_until_closed(s: socket.socket, timeout: float = 5.0) -> bytes:
    """Everything a server sends on ``s`` until it closes the connection (or ``timeout`` passes
    without a byte)."""
    s.settimeout(timeout)
    out = b""
    try:
        while chunk := s.recv(65536):
            out += chunk
    except TimeoutError:
        pass
    return out


def port_is_free(port: int) -> bool:
    """Could a server listen on ``port`` now (SO_REUSEADDR, as servers do: TIME_WAIT is fine)?"""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def words(n: int, tag: str) -> str:
    """A prompt of ``n`` tokens (one word = one token in the emulator)."""
    return " ".join(f"{tag}{i}" for i in range(n))


def lmcache_yaml(path: Path, **keys: Any) -> Path:
    lines = []
    for k, v in keys.items():
        if isinstance(v, dict):
            lines.append(f"{k}:")
            lines += [f"  {kk}: {json.dumps(vv)}" for kk, vv in v.items()]
        else:
            lines.append(f"{k}: {json.dumps(v)}")
    path.write_text("\n".join(lines) + "\n")
    return path


CONNECTOR = '{"kv_connector":"LMCacheConnectorV1","kv_role":"kv_both"}'


@dataclass
class SimProc:
    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path
    host: str = "127.0.0.1"
    extra: dict[str, Any] = field(default_factory=dict)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_log(self, text: str, timeout: float = 5.0) -> str:
        """The log once it contains ``text`` (the server logs a request after its last byte is sent)."""
        deadline = time.monotonic() + timeout
        while text not in (log := self.log()):
            assert time.monotonic() < deadline, f"{text!r} not in the log:\n{log}"
            time.sleep(0.02)
        return log

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return int(self.proc.returncode)

    def request(
        self,
        method: str,
        path: str,
        body: Optional[object] = None,
        *,
        raw: Optional[bytes] = None,
        headers: Optional[Mapping[str, str]] = None,
    ) -> tuple[int, bytes, dict[str, str]]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
            hdrs = {"content-type": "application/json", **(headers or {})}
            conn.request(method, path, body=data, headers=hdrs)
            resp = conn.getresponse()
            return resp.status, resp.read(), {k.lower(): v for k, v in resp.getheaders()}
        finally:
            conn.close()

    def metrics(self) -> str:
        status, body, _ = self.request("GET", "/metrics")
        assert status == 200
        return body.decode()

    def metric(self, sample: str) -> float:
        """The value of one exposed sample line, by its full name and labels prefix."""
        total = 0.0
        found = False
        for line in self.metrics().splitlines():
            if line.startswith(sample + "{") or line.startswith(sample + " "):
                total += float(line.rsplit(" ", 1)[1])
                found = True
        assert found, f"no sample {sample} in /metrics"
        return total

    def ttft(self, prompt: str, *, max_tokens: int = 2, chat: bool = False, request_id: Optional[str] = None) -> float:
        """Seconds from sending a streaming request to the first content token (stdlib client)."""
        conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        try:
            if chat:
                path = "/v1/chat/completions"
                body: dict[str, Any] = {"messages": [{"role": "user", "content": prompt}]}
            else:
                path = "/v1/completions"
                body = {"prompt": prompt}
            body.update(max_tokens=max_tokens, stream=True, stream_options={"include_usage": True})
            hdrs = {"content-type": "application/json"}
            if request_id:
                hdrs["x-request-id"] = request_id
            data = json.dumps(body).encode()
            start = time.perf_counter()
            conn.request("POST", path, body=data, headers=hdrs)
            resp = conn.getresponse()
            assert resp.status == 200, resp.read()
            first: Optional[float] = None
            usage = None
            while True:
                line = resp.readline()
                if not line:
                    break
                if not line.startswith(b"data: "):
                    continue
                payload = line[6:].strip()
                if payload == b"[DONE]":
                    break
                obj = json.loads(payload)
                if obj.get("usage"):
                    usage = obj["usage"]
                for ch in obj.get("choices", []):
                    text = ch.get("text") if not chat else ch.get("delta", {}).get("content")
                    if text and first is None:
                        first = time.perf_counter() - start
            assert first is not None, "no token received"
            assert usage is not None and usage["completion_tokens"] == max_tokens
            return first
        finally:
            conn.close()


def start_sim(
    tmp: Path,
    *,
    args: Sequence[str] = (),
    env: Optional[Mapping[str, str]] = None,
    name: str = "sim",
    port: Optional[int] = None,
    timeout: float = 15.0,
    python: str = sys.executable,
) -> SimProc:
    port = port or free_port()
    log_path = tmp / f"{name}-{port}.log"
    cmd = [
        python,
        "-m",
        "harness.sim.cli",
        "serve",
        "test/model",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *args,
    ]
    full_env = dict(os.environ)
    full_env.pop("LMCACHE_CONFIG_FILE", None)
    # as kvgate's plan does for in-process LMCache, so LMCache's metrics are exposed
    full_env["PROMETHEUS_MULTIPROC_DIR"] = str(tmp / "prometheus-multiproc")
    full_env.update(env or {})
    full_env["PYTHONPATH"] = str(REPO)
    with open(log_path, "wb") as logf:
        proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=full_env, cwd=str(REPO))  # noqa: S603 - fixed argv, test code
    sim = SimProc(proc, port, log_path)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"emulator exited with {proc.returncode}:\n{sim.log()}")
        try:
            status, _, _ = sim.request("GET", "/health")
            if status == 200:
                return sim
        except OSError:
            time.sleep(0.05)
    sim.stop()
    raise AssertionError(f"emulator not ready in {timeout}s:\n{sim.log()}")

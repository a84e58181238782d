"""Start, wait until ready, scrape, collect logs and stop an engine instance on its node,
through the node's executor (so it works the same on localhost and over SSH, whether or not the
controller can reach the engine's port)."""

from __future__ import annotations

import base64
import json
import logging
import os
import posixpath
import secrets
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from harness.engines import httpprobe
from harness.engines.base import (
    EngineError,
    EngineInstance,
    EnginePlan,
    EngineStartError,
    EngineStopError,
    EvictResult,
)
from harness.engines.cleanenv import clean_argv
from harness.engines.l2count import count_l2_at_start
from harness.engines.planning import PROMETHEUS_SUBDIR
from harness.engines.prometheus import MetricsSnapshot
from harness.engines.ray import start_ray_cluster, stop_ray_cluster
from harness.engines.secretargs import plan_secrets
from harness.engines.tierreadback import check_tier_dirs
from harness.redact import mask_values, redact_data
from harness.remote.base import DetachedHandle, Executor, ProcessState, RemoteError
from harness.remote.detached import ensure_workdir
from harness.remote.local import runs_on_this_machine
from harness.remote.scratch import ENGINE_OWNER, create_owned_dir, remove_owned_dir

if TYPE_CHECKING:
    from harness.engines.base import Engine

log = logging.getLogger("kvgate.engines")

# Runs on the node with its python3 (>= 3.9): one HTTP request to the engine, the answer as JSON.
# Fixed code (the module's own source); the URL, method and timeout are argv, the body is stdin.
HTTP_PROBE = Path(httpprobe.__file__).read_text(encoding="utf-8")

# Prints "free" when a server could listen on host:port now (SO_REUSEADDR, as servers bind).
PORT_CHECK = r"""
import socket, sys
host, port = sys.argv[1], int(sys.argv[2])
s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind((host, port))
    print("free")
except OSError as e:
    print("busy %s" % e.errno)
finally:
    s.close()
"""

DROP_CACHES = "sync && echo 3 > /proc/sys/vm/drop_caches"


class EngineUnreachable(EngineError):
    """The engine's HTTP port did not answer (not listening yet, or gone)."""


def http_call(
    executor: Executor,
    url: str,
    *,
    node: str,
    python: str = "python3",
    method: str = "GET",
    body: Optional[bytes] = None,
    timeout: float = 10.0,
) -> tuple[int, bytes]:
    """One HTTP request made on ``node`` (its own loopback reaches the engine); (status, body)."""
    if runs_on_this_machine(executor):  # no Python started per request on the controller's own node
        answer = httpprobe.probe(url, method, body if method == "POST" else None, timeout)
        if "error" in answer:
            raise EngineUnreachable(f"{method} {url}: {answer['error']}", node=node)
        return int(answer["status"]), base64.b64decode(answer["body"])
    res = executor.run(
        [python, "-I", "-S", "-c", HTTP_PROBE, url, method, str(timeout)],  # stdlib only: no site start-up
        stdin=body if method == "POST" else None,
        timeout=timeout + 30.0,
        check=False,
    )
    try:
        answer = json.loads(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise EngineError(
            f"HTTP probe of {url} failed (exit {res.exit_code})",
            node=node,
            log_tail=res.stdout + res.stderr,
        ) from None
    if "error" in answer:
        raise EngineUnreachable(f"{method} {url}: {answer['error']}", node=node)
    return int(answer["status"]), base64.b64decode(answer["body"])


def http_request(
    instance: EngineInstance,
    path: str,
    *,
    method: str = "GET",
    body: Optional[bytes] = None,
    timeout: float = 10.0,
) -> tuple[int, bytes]:
    """One HTTP request to the engine, made on its node; returns (status, body)."""
    plan = instance.plan
    return http_call(instance.executor, plan.endpoint_url + path, node=plan.node, python=plan.python,
                     method=method, body=body, timeout=timeout)


def sidecar_request(instance: EngineInstance, path: str, *, port_kind: str = "http", method: str = "GET",
                    body: Optional[bytes] = None, timeout: float = 30.0) -> tuple[int, bytes]:
    """One HTTP request to the instance's LMCache server (its HTTP API or its /metrics port)."""
    side = instance.plan.sidecar
    if side is None:
        raise EngineError("this instance has no LMCache server", node=instance.node)
    port = side.http_port if port_kind == "http" else side.metrics_port
    return http_call(instance.executor, f"http://{side.host}:{port}{path}", node=instance.node,
                     python=instance.plan.python, method=method, body=body, timeout=timeout)


def port_free(executor: Executor, host: str, port: int, *, python: str = "python3") -> bool:
    res = executor.run([python, "-I", "-S", "-c", PORT_CHECK, host or "0.0.0.0", str(port)], timeout=30.0,
                       check=False)
    return res.stdout.strip() == "free"


def log_tail(instance: EngineInstance, lines: int = 40) -> str:
    parts = []
    for stream in ("stdout", "stderr"):
        try:
            text = instance.executor.tail_log(instance.handle, stream=stream, lines=lines)
        except RemoteError as exc:
            text = f"(could not read {stream}: {exc.message.splitlines()[0]})"
        if text.strip():
            parts.append(f"[{stream}]\n{text.rstrip()}")
    return "\n".join(parts)


def drop_page_cache(executor: Executor) -> bool:
    """Drop the node's page cache (``echo 3 > /proc/sys/vm/drop_caches``) when root; returns
    whether it happened (record it with the measurement)."""
    uid = executor.run(["id", "-u"], timeout=30.0, check=False)
    if uid.stdout.strip() != "0":
        log.info("%s: not root, page cache not dropped", executor.node)
        return False
    res = executor.run(["sh", "-c", DROP_CACHES], timeout=300.0, check=False)
    if res.exit_code != 0:
        log.warning("%s: dropping the page cache failed: %s", executor.node, res.stderr.strip())
        return False
    return True


def _mask_file(path: Path, secrets: list[str]) -> None:
    if not secrets:
        return
    text = path.read_bytes().decode("utf-8", "replace")
    masked = mask_values(text, secrets)
    if masked != text:
        path.write_text(masked)


def _fresh_prometheus_dir(executor: Executor, plan: EnginePlan, prom: str) -> None:
    """prometheus_client's multi-process mode needs an empty directory at start. Only the one kvgate
    planned (``<instance>/prometheus-multiproc``) is emptied, and only through the containment-checked
    removal (marked by kvgate, no link on the way): any other value is refused, never deleted."""
    expected = posixpath.join(plan.instance_dir, PROMETHEUS_SUBDIR)
    if prom != expected:
        raise EngineStartError(
            f"PROMETHEUS_MULTIPROC_DIR is {prom!r}, not the directory kvgate manages ({expected}): "
            "refusing to empty it", node=plan.node, command=plan.argv)
    removal = remove_owned_dir(executor, prom, ENGINE_OWNER)
    if removal.outcome not in ("removed", "absent"):
        raise EngineStartError(
            f"cannot empty the Prometheus directory: {removal.describe()} (remove it by hand if it is stale)",
            node=plan.node, command=plan.argv)
    create_owned_dir(executor, prom, ENGINE_OWNER)


def _preflight(executor: Executor, plan: EnginePlan) -> None:
    """Refuse to start on a port in use or with a program the node does not have."""
    if not port_free(executor, plan.host, plan.port, python=plan.python):
        raise EngineStartError(
            f"port {plan.port} on {plan.host} is already in use (another engine still running?)",
            node=plan.node,
            command=plan.argv,
        )
    exe = plan.argv[0]
    if not exe.startswith("/") and executor.which(exe) is None:
        raise EngineStartError(
            f"{exe!r} is not on the PATH of node {plan.node}", node=plan.node, command=plan.argv
        )


def _prepare_head(executor: Executor, plan: EnginePlan, prom: Optional[str]) -> None:
    """The instance directory, KV directories, a fresh Prometheus directory, the plan's files and plan.json."""
    ensure_workdir(executor, plan.instance_dir)  # 0700, ours: refused when another user owns it
    for d in plan.kv_dirs:
        # created and marked (unless it exists), so that only what kvgate made is ever removed
        create_owned_dir(executor, d, ENGINE_OWNER)
    if prom:
        _fresh_prometheus_dir(executor, plan, prom)
    for path, content in plan.files.items():
        executor.write_file(path, content.encode(), mode=0o600)
    executor.write_file(plan.instance_dir + "/plan.json",
                        json.dumps(redact_data(plan.to_json()), indent=2).encode(), mode=0o600)


def _prepare_peer(peer: str, ex: Executor, plan: EnginePlan, prom: Optional[str]) -> None:
    """vLLM forwards LMCACHE_* to its Ray workers: the file and directories they name must exist on
    every node, not only on the head."""
    ensure_workdir(ex, plan.instance_dir)
    for d in plan.kv_dirs:
        create_owned_dir(ex, d, ENGINE_OWNER)
    if prom and plan.ray is not None and "PROMETHEUS_MULTIPROC_DIR" in plan.ray.env_for(peer):
        _fresh_prometheus_dir(ex, plan, prom)  # the workers there write their metrics into it
    for path, content in plan.files.items():
        ex.write_file(path, content.encode(), mode=0o600)
    log.info("%s: wrote %d file(s) and KV directories for the Ray worker", peer, len(plan.files))


class EngineLifecycle:
    """Start / wait / scrape / logs / stop, shared by every engine kind; kinds add ``plan`` and
    ``evict``."""

    kind = "base"

    def start(
        self, executor: Executor, plan: EnginePlan, *, peer_executors: Optional[Mapping[str, Executor]] = None
    ) -> EngineInstance:
        """Write the plan's files and start the engine detached; does not wait for readiness."""
        peers = dict(peer_executors or {})
        _preflight(executor, plan)
        prom = plan.env.get("PROMETHEUS_MULTIPROC_DIR")
        _prepare_head(executor, plan, prom)
        # the server gets what its L2 directory leaves of the planned capacity; the instance keeps the
        # plan as planned, so a restart counts again from the declared size
        counted, l2_at_start = count_l2_at_start(executor, plan)
        for peer, ex in peers.items():
            _prepare_peer(peer, ex, plan, prom)
        side_handle = self._start_sidecar(executor, counted) if plan.sidecar is not None else None
        if plan.ray is not None:
            start_ray_cluster(plan.ray, {plan.node: executor, **peers})
        try:
            handle = executor.start_detached(  # inherited engine variables removed: only the plan's reach it
                clean_argv(plan.argv, plan.env), workdir=plan.instance_dir, name=plan.name, env=dict(plan.env)
            )
        except RemoteError as exc:
            if plan.ray is not None:
                stop_ray_cluster(plan.ray, {plan.node: executor, **peers})
            if side_handle is not None:
                executor.stop(side_handle, grace=10.0)
            raise EngineStartError(
                f"could not start the engine: {exc.message}", node=plan.node, command=plan.argv
            ) from exc
        log.info(
            "%s: started %s engine %s (pid %d): %s",
            plan.node,
            plan.kind,
            plan.name,
            handle.pid,
            plan.command_line(),
        )
        return EngineInstance(
            plan=plan, handle=handle, executor=executor, peer_executors=peers, started_at=time.time(),
            sidecar_handle=side_handle, l2_at_start=l2_at_start,
        )

    def _start_sidecar(self, executor: Executor, plan: EnginePlan, timeout: float = 120.0) -> DetachedHandle:
        """Start the instance's LMCache server and wait until its request port listens."""
        side = plan.sidecar
        assert side is not None
        for port in sorted({side.port, side.http_port, side.metrics_port}):
            if not port_free(executor, side.host, port, python=plan.python):
                raise EngineStartError(f"LMCache server port {port} on {side.host} is already in use",
                                       node=plan.node, command=side.argv)
        exe = side.argv[0]
        if not exe.startswith("/") and executor.which(exe) is None:
            raise EngineStartError(f"{exe!r} is not on the PATH of node {plan.node}", node=plan.node,
                                   command=side.argv)
        handle = executor.start_detached(clean_argv(side.argv, side.env), workdir=plan.instance_dir,
                                         name=side.name, env=dict(side.env))
        deadline = time.monotonic() + timeout
        while port_free(executor, side.host, side.http_port, python=plan.python):
            state = executor.poll(handle)
            if not state.running or time.monotonic() > deadline:
                executor.stop(handle, grace=5.0)
                tail_text = executor.tail_log(handle, stream="stderr", lines=30)
                raise EngineStartError(
                    f"LMCache server {'exited' if not state.running else 'did not listen in time'} "
                    f"({state.reason or 'timeout'})", node=plan.node, command=side.argv, log_tail=tail_text)
            time.sleep(0.5)
        log.info("%s: started LMCache server %s (pid %d)", plan.node, side.name, handle.pid)
        return handle

    def wait_ready(self, instance: EngineInstance, timeout: Optional[float] = None) -> float:
        """Poll ``/health`` then ``/v1/models`` (the served name listed) until ready; returns the
        seconds it took. Raises EngineStartError with the log tail when the process exits or the
        timeout passes."""
        plan = instance.plan
        limit = plan.ready_timeout if timeout is None else timeout
        start = time.monotonic()
        delay = 0.05
        last = "no answer yet"
        while True:
            state = instance.executor.poll(instance.handle)
            if not state.running:
                raise EngineStartError(
                    f"engine exited before it was ready ({state.reason})",
                    node=plan.node,
                    command=plan.argv,
                    log_tail=log_tail(instance),
                )
            try:
                status, _ = http_request(instance, "/health", timeout=5.0)
                if status == 200:
                    status, body = http_request(instance, "/v1/models", timeout=5.0)
                    ids = [m.get("id") for m in json.loads(body).get("data", [])] if status == 200 else []
                    if plan.served_model_name in ids:
                        instance.ready_at = time.time()
                        # ready means configured as planned: a moved disk tier stops here
                        instance.tier_readback = check_tier_dirs(self, instance)  # type: ignore[arg-type]
                        return time.monotonic() - start
                    last = f"/v1/models answered {status} without {plan.served_model_name!r} (has {ids})"
                else:
                    last = f"/health answered {status}"
            except EngineUnreachable as exc:
                last = exc.message.split(": ", 1)[-1]
            except ValueError:
                last = "/v1/models did not answer JSON"
            if time.monotonic() - start >= limit:
                raise EngineStartError(
                    f"engine not ready after {limit:g} s (last: {last})",
                    node=plan.node,
                    command=plan.argv,
                    log_tail=log_tail(instance),
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 2.0)

    def scrape_metrics(self, instance: EngineInstance) -> MetricsSnapshot:
        taken = time.time()
        status, body = http_request(instance, "/metrics", timeout=30.0)
        if status != 200:
            raise EngineError(
                f"/metrics answered {status}",
                node=instance.node,
                log_tail=body[:500].decode("utf-8", "replace"),
            )
        snap = MetricsSnapshot.from_text(
            body.decode("utf-8", "replace"),
            taken_at=taken,
            source=f"{instance.node}:{instance.plan.port}/metrics",
        )
        side = instance.plan.sidecar
        if side is None:
            return snap
        status, body = sidecar_request(instance, "/metrics", port_kind="metrics")
        if status != 200:
            raise EngineError(f"the LMCache server's /metrics answered {status}", node=instance.node)
        return snap.merged(MetricsSnapshot.from_text(
            body.decode("utf-8", "replace"), taken_at=taken, source=f"{instance.node}:{side.metrics_port}/metrics"))

    def collect_logs(self, instance: EngineInstance, dest_dir: Path) -> list[Path]:
        """Copy the engine's logs and the plan's files to ``dest_dir`` (evidence); returns the paths."""
        plan = instance.plan
        dest_dir.mkdir(parents=True, exist_ok=True)
        out: list[Path] = []
        base = f"{plan.node}-{plan.name}"
        secrets = plan_secrets(dict(plan.env), plan.argv)  # engines echo their arguments in logs
        for remote, suffix in (
            (instance.handle.stdout_path, "stdout.log"),
            (instance.handle.stderr_path, "stderr.log"),
        ):
            local = dest_dir / f"{base}.{suffix}"
            try:
                instance.executor.get(remote, str(local))
                _mask_file(local, secrets)
                out.append(local)
            except RemoteError as exc:
                log.warning("%s: could not collect %s: %s", plan.node, remote, exc.message.splitlines()[0])
        plan_path = dest_dir / f"{base}.plan.json"
        plan_path.write_text(json.dumps(redact_data(instance.to_json()), indent=2))
        out.append(plan_path)
        for remote_path, content in plan.files.items():
            local = dest_dir / f"{base}.{os.path.basename(remote_path)}"
            local.write_text(mask_values(content, secrets))
            out.append(local)
        return out

    def stop(
        self, instance: EngineInstance, *, remove_kv_files: bool = False, grace: float = 30.0
    ) -> ProcessState:
        """SIGTERM, SIGKILL after ``grace``; then check the port is free (else EngineStopError). Stops
        the Ray cluster of a multi-node engine. Removes the arm's kvgate-owned LMCache directories
        only when ``remove_kv_files``."""
        plan = instance.plan
        ex = instance.executor
        state = ex.stop(instance.handle, grace=grace)
        if plan.ray is not None:
            stop_ray_cluster(plan.ray, {plan.node: ex, **instance.peer_executors})
        ports = [(plan.host, plan.port)]
        if instance.sidecar_handle is not None and plan.sidecar is not None:
            ex.stop(instance.sidecar_handle, grace=grace)
            side = plan.sidecar
            ports += [(side.host, p) for p in sorted({side.port, side.http_port, side.metrics_port})]
        for host, port in ports:
            self._wait_port_free(instance, host, port, state)
        if remove_kv_files:
            for d in plan.kv_dirs:
                # Containment, not a name pattern: only a directory kvgate created and marked.
                removal = remove_owned_dir(ex, d, None)
                if removal.outcome == "refused":
                    log.info("%s: keeping %s (%s)", plan.node, d, removal.reason)
                elif removal.outcome == "failed":
                    raise EngineStopError(
                        f"could not remove LMCache files in {d}: {removal.reason}",
                        node=plan.node,
                        command=removal.argv,
                    )
        log.info("%s: stopped %s (%s)", plan.node, plan.name, state.reason or "stopped")
        return state


    def _wait_port_free(self, instance: EngineInstance, host: str, port: int, state: ProcessState) -> None:
        plan = instance.plan
        deadline = time.monotonic() + 10.0
        while not port_free(instance.executor, host, port, python=plan.python):
            if time.monotonic() > deadline:
                raise EngineStopError(
                    f"port {port} is still in use after the engine stopped ({state.reason})",
                    node=plan.node,
                    command=plan.argv,
                )
            time.sleep(0.1)


def restart(engine: Engine, instance: EngineInstance) -> EngineInstance:
    """Stop the instance (keeping its KV files), start it again from the same plan, wait ready."""
    engine.stop(instance)
    new = engine.start(instance.executor, instance.plan, peer_executors=instance.peer_executors)
    engine.wait_ready(new)
    return new


def verified_reset(engine: Engine, instance: EngineInstance, path: str) -> tuple[bool, dict[str, object]]:
    """Empty the engine's prefix cache through ``POST path`` and prove it: a probe prompt sent
    before the reset is sent again after it, and its second pass must find 0 prefix-cache hits
    (a 200 alone proves nothing). Returns (verified, the step with the counters)."""
    probe = _probe_prompt()
    _complete(instance, probe)
    first = engine.scrape_metrics(instance)
    _complete(instance, probe)  # cached now: this pass must hit, or the probe proves nothing
    before = engine.scrape_metrics(instance)
    cached = _counter_delta(first, before, "vllm:prefix_cache_hits")
    status, body = http_request(instance, path, method="POST", body=b"{}", timeout=120.0)
    if status != 200:
        raise EngineError(f"POST {path} answered {status} (VLLM_SERVER_DEV_MODE=1 not in effect?): "
                          f"{body[:200]!r}", node=instance.node)
    mid = engine.scrape_metrics(instance)
    _complete(instance, probe)
    after = engine.scrape_metrics(instance)
    hits = _counter_delta(mid, after, "vllm:prefix_cache_hits")
    queried = _counter_delta(mid, after, "vllm:prefix_cache_queries")
    ok = bool(cached) and hits is not None and queried is not None and queried > 0 and hits == 0
    return ok, {"step": path.strip("/").replace("/", "_"), "status": status,
                "answer": body[:300].decode("utf-8", "replace"), "probe_prefix_hits_before": cached,
                "probe_prefix_hits_after": hits,
                "probe_tokens_queried_after": queried, "verified": ok,
                "counters_before": restore_figures(before), "counters_after": restore_figures(after)}


def _complete(instance: EngineInstance, prompt: str) -> None:
    body = json.dumps({"model": instance.plan.served_model_name, "prompt": prompt, "max_tokens": 1,
                       "temperature": 0.0}).encode()
    status, answer = http_request(instance, "/v1/completions", method="POST", body=body, timeout=120.0)
    if status != 200:
        raise EngineError(f"reset probe request answered {status}: {answer[:200]!r}", node=instance.node)


def _probe_prompt(words: int = 300) -> str:
    """A prompt no workload sends (random words): long enough to fill several KV blocks."""
    return " ".join(f"probe{secrets.token_hex(3)}" for _ in range(words))


def _counter_delta(before: MetricsSnapshot, after: MetricsSnapshot, name: str) -> Optional[float]:
    a, b = after.value(name), before.value(name)
    return None if a is None or b is None else a - b


def restore_figures(snap: MetricsSnapshot) -> dict[str, Optional[float]]:
    names = ("vllm:prefix_cache_queries", "vllm:prefix_cache_hits", "vllm:external_prefix_cache_hits",
             "lmcache_mp_lookup_hit_l1_tokens", "lmcache_mp_lookup_hit_l2_tokens")
    return {n: snap.value(n) for n in names}


def evict_like_vllm(engine: Engine, instance: EngineInstance) -> EvictResult:
    """Empty everything above the tier under test, keeping what it holds (see coldrestore).

    vLLM's prefix cache: ``POST /reset_prefix_cache`` when served (dev mode), verified by a probe
    prompt sent before the reset and again after it, whose second pass must find 0 prefix-cache
    hits; else a restart (only where the plan allowed one). LMCache multiprocess: then the
    server's L1 is cleared through its API (L2 files stay)."""
    plan = instance.plan
    steps: list[dict[str, object]] = []
    verified: Optional[bool] = None
    method = "restart"
    if plan.reset_endpoint and not plan.cpu_tier:
        verified, step = verified_reset(engine, instance, "/reset_prefix_cache")
        steps.append(step)
        method = "reset_prefix_cache"
        if not verified:
            raise EngineError(f"prefix-cache reset not effective: {step}", node=plan.node)
    else:
        instance = restart(engine, instance)
        steps.append({"step": "restart", "detail": "engine restarted: HBM prefix cache emptied",
                      "l2_at_start": dict(instance.l2_at_start) if instance.l2_at_start is not None else None})
    if plan.sidecar is not None:
        before = engine.scrape_metrics(instance)
        side = plan.sidecar
        status, body = sidecar_request(instance, side.l1_clear_path, method="POST", body=side.l1_clear_body.encode())
        if status != 200:
            raise EngineError(f"LMCache server POST {side.l1_clear_path} answered {status}: {body[:300]!r}",
                              node=plan.node, command=plan.sidecar.argv)
        after = engine.scrape_metrics(instance)
        steps.append({"step": "lmcache_l1_clear", "status": status,
                      "answer": body[:300].decode("utf-8", "replace"),
                      "counters_before": restore_figures(before), "counters_after": restore_figures(after)})
    detail = "; ".join(str(s["step"]) for s in steps) + ": storage tier kept"
    return EvictResult(instance, method, detail, tuple(steps), verified)

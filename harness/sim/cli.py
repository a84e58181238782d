"""``kvgate sim serve MODEL --port P [vLLM's flags] [emulator flags]``: run the KV emulator.

It accepts vLLM's command line (unknown vLLM flags are accepted and logged as ignored) and
LMCache's configuration (``LMCACHE_CONFIG_FILE``), so the vLLM adapter can launch it unchanged
through the ``vllm`` shim. Stdlib only: it runs on nodes from the agent zipapp.
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import json
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Optional

from harness.exitcodes import ExitCode  # stdlib only, bundled in the agent
from harness.sim.kvstore import KVStore, StoreSettings
from harness.sim.lmcache_config import LMCacheConfig, LMCacheConfigError, load_config
from harness.sim.metrics import SimMetrics
from harness.sim.mpserver import MPClient, MPServer, MPServerError, add_arguments, mp_address, settings_from_args
from harness.sim.server import ServerSettings, SimServer
from harness.sim.shimfile import write_vllm_shim

log = logging.getLogger("kvgate.sim")



class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _UsageError(message)


class _UsageError(Exception):
    pass


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="kvgate sim",
        description="The KV emulator: an OpenAI-compatible server with emulated "
        "compute and real storage I/O for LMCache's tiers. Accepts vLLM's command line.",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    _serve_parser(sub)
    lm = sub.add_parser(
        "lmcache-server",
        help="the emulated LMCache multiprocess server (takes `lmcache server`'s command line)",
        description="Stand-in for `lmcache server` (LMCache multiprocess mode): L1 in memory, L2 fs_native "
        "chunk files that survive restarts, POST /cache/clear and /metrics on the HTTP port. It is NOT LMCache.",
    )
    add_arguments(lm)
    lm.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    sh = sub.add_parser(
        "shim",
        help="install a `vllm` script that runs this emulator (rehearse the vLLM launcher without a GPU)",
        description="Write an executable `vllm` into DIR that runs `kvgate sim serve` with vLLM's command line. "
        "Put DIR first on PATH, or set the profile's engine.command to DIR/vllm. It is NOT vLLM.",
    )
    sh.add_argument("directory", metavar="DIR", help="directory to write the `vllm` script into")
    sh.add_argument("--python", default=sys.executable, help="interpreter the script runs (default: this one)")
    return p


def _serve_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """`serve`: vLLM's command line (the flags it acts on, the ones it only records) and its own."""
    s = sub.add_parser(
        "serve",
        help="serve MODEL like `vllm serve`",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument("model", nargs="?", help="model name or path (as for vllm serve)")
    s.add_argument("--model", dest="model_opt", help=argparse.SUPPRESS)
    v = s.add_argument_group("vLLM flags the emulator acts on")
    v.add_argument("--host", default="127.0.0.1", help="listen address (default 127.0.0.1)")
    v.add_argument("--port", type=int, default=8000, help="listen port (default 8000)")
    v.add_argument("--served-model-name", nargs="+", default=None, help="names the API answers to")
    v.add_argument("--max-model-len", type=int, default=131072, help="context limit (default 131072)")
    v.add_argument(
        "--kv-transfer-config",
        default=None,
        help="JSON; a kv_connector naming LMCache enables the LMCACHE_CONFIG_FILE tiers",
    )
    v.add_argument("--enable-prefix-caching", dest="prefix_caching", action="store_true", default=True)
    v.add_argument(
        "--no-enable-prefix-caching",
        dest="prefix_caching",
        action="store_false",
        help="disable reuse of the emulated HBM prefix cache",
    )
    g = s.add_argument_group("vLLM flags accepted and recorded (no effect on the emulation)")
    g.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    g.add_argument("--pipeline-parallel-size", "-pp", type=int, default=1)
    g.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    g.add_argument("--distributed-executor-backend", default=None)
    g.add_argument("--dtype", default=None)
    g.add_argument("--trust-remote-code", action="store_true")
    g.add_argument("--disable-log-requests", action="store_true")
    g.add_argument("--enable-request-id-headers", action="store_true")
    e = s.add_argument_group("emulator flags")
    e.add_argument("--prefill-tokens-per-s", type=float, default=20000.0, help="emulated prefill rate per request")
    e.add_argument("--decode-tokens-per-s", type=float, default=50.0, help="emulated decode rate per request")
    e.add_argument("--max-batch", type=int, default=16, help="requests served at once; the rest wait")
    e.add_argument("--hbm-tokens", type=int, default=8192, help="tokens of KV the emulated HBM holds (LRU)")
    e.add_argument(
        "--kv-bytes-per-token",
        type=int,
        default=2048,
        help="KV bytes per token from the model geometry (2 x layers x kv_heads x head_dim x dtype)",
    )
    e.add_argument(
        "--kv-scale",
        type=float,
        default=1.0,
        help="fraction of those bytes really written and read per chunk (fits small disks)",
    )
    e.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])


def _connector_enabled(kv_transfer_config: Optional[str]) -> tuple[bool, str]:
    if not kv_transfer_config:
        return False, ""
    try:
        cfg = json.loads(kv_transfer_config)
    except ValueError as exc:
        raise _UsageError(f"--kv-transfer-config is not valid JSON: {exc}") from None
    if not isinstance(cfg, dict) or not isinstance(cfg.get("kv_connector"), str):
        raise _UsageError("--kv-transfer-config must be a JSON object with a 'kv_connector' string")
    name = str(cfg["kv_connector"])
    return "lmcache" in name.lower(), name


def _check(args: argparse.Namespace) -> None:
    for name in ("prefill_tokens_per_s", "decode_tokens_per_s", "kv_scale"):
        if getattr(args, name) <= 0:
            raise _UsageError(f"--{name.replace('_', '-')} must be > 0")
    if args.kv_scale > 1:
        raise _UsageError("--kv-scale must be <= 1")
    for name in ("max_batch", "kv_bytes_per_token", "max_model_len"):
        if getattr(args, name) < 1:
            raise _UsageError(f"--{name.replace('_', '-')} must be >= 1")
    if args.hbm_tokens < 0:
        raise _UsageError("--hbm-tokens must be >= 0")
    if not 0 <= args.port <= 65535:
        raise _UsageError("--port must be in 0-65535")


def main(argv: Optional[Sequence[str]] = None, environ: Optional[Mapping[str, str]] = None) -> int:
    """Run the emulator until SIGTERM/SIGINT; returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    env = os.environ if environ is None else environ
    parser = build_parser()
    try:
        args, unknown = parser.parse_known_args(argv)
    except _UsageError as exc:
        print(f"kvgate sim: error: {exc}", file=sys.stderr)
        return int(ExitCode.USAGE_ERROR)
    except SystemExit as exc:  # --help
        return int(exc.code) if isinstance(exc.code, int) else int(ExitCode.USAGE_ERROR)
    if args.command == "shim":
        return _shim(args)
    if args.command == "lmcache-server":
        return _lmcache_server(args, env)
    if args.command != "serve":
        parser.print_help(sys.stderr)
        return int(ExitCode.USAGE_ERROR)
    return _serve_command(args, unknown, env)


def _shim(args: argparse.Namespace) -> int:
    try:
        path = write_vllm_shim(args.directory, args.python)
    except OSError as exc:
        print(f"kvgate sim: error: cannot write the shim into {args.directory}: {exc.strerror}", file=sys.stderr)
        return int(ExitCode.USAGE_ERROR)
    print(path)
    return int(ExitCode.OK)


class _ServerNotUp(Exception):
    """The LMCache multiprocess server the engine is pointed at does not answer."""


def _tiers(args: argparse.Namespace, env: Mapping[str, str]) -> tuple[bool, str, LMCacheConfig, Optional[MPClient]]:
    """The KV connector (is it LMCache's, its name), the LMCache settings and, in multiprocess mode,
    the client of its server (whose settings they are)."""
    connector, connector_name = _connector_enabled(args.kv_transfer_config)
    if connector_name != MP_CONNECTOR:
        lmcache = per_instance(load_config(env), args.tensor_parallel_size) if connector else LMCacheConfig()
        return connector, connector_name, lmcache, None
    # LMCache multiprocess mode: no LMCACHE_CONFIG_FILE; the tiers are the server's
    try:
        mp = MPClient(*mp_address(json.loads(args.kv_transfer_config)))
    except ValueError as exc:
        raise _UsageError(f"--kv-transfer-config: {exc}") from None
    try:
        info = mp.wait_info()
    except MPServerError as exc:
        raise _ServerNotUp(str(exc)) from exc
    return connector, connector_name, LMCacheConfig(chunk_size=int(info["chunk_size"])), mp


def _serve_command(args: argparse.Namespace, unknown: Sequence[str], env: Mapping[str, str]) -> int:
    logging.basicConfig(
        level=getattr(logging, args.log_level),
        stream=sys.stderr,
        format="%(levelname)s %(asctime)s %(name)s: %(message)s",
    )
    model = args.model or args.model_opt
    try:
        if not model:
            raise _UsageError("MODEL is required (kvgate sim serve MODEL ...)")
        _check(args)
        connector, connector_name, lmcache, mp = _tiers(args, env)
        args.tier_read_delay_s = _read_delay(env)
        args.tier_write_delay_s = _read_delay(env, WRITE_DELAY_ENV)
        args.memory_restore_bps = _memory_restore_bps(env)
    except _ServerNotUp as exc:
        print(f"kvgate sim: error: {exc} (start the LMCache server first)", file=sys.stderr)
        return int(ExitCode.INFRA_FAULT)
    except (_UsageError, LMCacheConfigError) as exc:
        print(f"kvgate sim: error: {exc}", file=sys.stderr)
        return int(ExitCode.USAGE_ERROR)
    if args.tier_read_delay_s:
        log.warning("%s is set: every directory-tier chunk read is delayed by %g ms (injected fault)",
                    READ_DELAY_ENV, args.tier_read_delay_s * 1000)
    if args.memory_restore_bps:
        log.warning("%s is set: directory-tier restores are served from memory, reported as tier hits and "
                    "timed at %g B/s (injected fault)", MEMORY_RESTORE_ENV, args.memory_restore_bps)
    if unknown:
        log.info("ignoring vLLM arguments the emulator does not model: %s", " ".join(unknown))
    if not connector and env.get("LMCACHE_CONFIG_FILE"):
        log.info("LMCACHE_CONFIG_FILE is set but no LMCache kv_connector was given: no external KV tiers")
    served = args.served_model_name or [model]
    log.info(
        "kvgate KV emulator: model=%s served=%s tp=%d connector=%s chunk_size=%d local_cpu=%s "
        "local_disk=%s max_local_disk_size=%sGB remote=%s kv_bytes_per_token=%d kv_scale=%g",
        model, ",".join(served), args.tensor_parallel_size, connector_name or "none", lmcache.chunk_size,
        lmcache.local_cpu, lmcache.local_disk, lmcache.max_local_disk_size, lmcache.remote_url,
        args.kv_bytes_per_token, args.kv_scale,
    )
    try:
        # like vLLM v1, LMCache's in-process metrics reach /metrics only with multi-process Prometheus
        # (multiprocess mode: LMCache counts in its server, on the server's own /metrics)
        lmcache_metrics = bool(env.get("PROMETHEUS_MULTIPROC_DIR")) and mp is None
        return asyncio.run(_serve(args, model, served, connector, lmcache, env.get("VLLM_SERVER_DEV_MODE") == "1",
                                  lmcache_metrics, mp))
    except OSError as exc:
        if exc.errno in (errno.EADDRINUSE, errno.EACCES, errno.EADDRNOTAVAIL):
            log.error("cannot listen on %s:%d: %s", args.host, args.port, exc.strerror)
            print(
                f"kvgate sim: error: cannot listen on {args.host}:{args.port}: {exc.strerror}",
                file=sys.stderr,
            )
            return int(ExitCode.INFRA_FAULT)
        log.error("storage tier unusable: %s", exc)
        print(f"kvgate sim: error: {exc}", file=sys.stderr)
        return int(ExitCode.INFRA_FAULT)
    except KeyboardInterrupt:
        return int(ExitCode.OK)


READ_DELAY_ENV = "KVGATE_SIM_TIER_READ_DELAY_MS"
WRITE_DELAY_ENV = "KVGATE_SIM_TIER_WRITE_DELAY_MS"
MEMORY_RESTORE_ENV = "KVGATE_SIM_MEMORY_RESTORE_BPS"


def _memory_restore_bps(environ: Mapping[str, str]) -> float:
    """The memory-serving fault mode's timed rate in bytes/s (kvstore.StoreSettings); 0 when unset."""
    raw = environ.get(MEMORY_RESTORE_ENV, "").strip()
    try:
        bps = float(raw) if raw else 0.0
    except ValueError:
        raise _UsageError(f"{MEMORY_RESTORE_ENV}={raw!r} is not a number of bytes per second") from None
    if not 0 <= bps < float("inf"):
        raise _UsageError(f"{MEMORY_RESTORE_ENV}={raw!r} must be a finite number of bytes per second, >= 0 (0: off)")
    return bps


def per_instance(cfg: LMCacheConfig, tp: int) -> LMCacheConfig:
    """In-process LMCache runs one backend per TP rank, each holding its rank's share of every
    chunk within its own ``max_local_*_size``; the emulator is one process holding whole chunks, so
    its tiers hold ``tp`` times the per-rank sizes (what the instance really has, no more). An MLA
    model's KV is stored by the first rank alone (``save_only_first_rank``, which kvgate writes for
    MLA): the instance then holds the sizes once."""
    if tp > 1 and cfg.extra.get("extra_config.save_only_first_rank") is not True:
        cfg.max_local_cpu_size *= tp
        cfg.max_local_disk_size *= tp
    return cfg
MP_CONNECTOR = "LMCacheMPConnector"


def _lmcache_server(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    logging.basicConfig(level=getattr(logging, args.log_level), stream=sys.stderr,
                        format="%(levelname)s %(asctime)s %(name)s: %(message)s")
    try:
        settings = settings_from_args(args, _read_delay(env), _read_delay(env, WRITE_DELAY_ENV))
    except (ValueError, _UsageError) as exc:
        print(f"kvgate sim lmcache-server: error: {exc}", file=sys.stderr)
        return int(ExitCode.USAGE_ERROR)
    try:
        asyncio.run(MPServer(settings).serve_until_signalled())
    except OSError as exc:
        print(f"kvgate sim lmcache-server: error: {exc}", file=sys.stderr)
        return int(ExitCode.INFRA_FAULT)
    except KeyboardInterrupt:
        pass
    return int(ExitCode.OK)


def _read_delay(environ: Mapping[str, str], name: str = READ_DELAY_ENV) -> float:
    """Seconds added to every chunk read from a directory tier (or, with ``WRITE_DELAY_ENV``,
    written to one: a slow disk's write backlog); fault injection, 0 when unset."""
    raw = environ.get(name, "").strip()
    if not raw:
        return 0.0
    try:
        ms = float(raw)
    except ValueError:
        raise _UsageError(f"{name}={raw!r} is not a number of milliseconds") from None
    if not 0 <= ms <= 60000:
        raise _UsageError(f"{name}={raw!r} must be between 0 and 60000 ms")
    return ms / 1000.0


async def _serve(
    args: argparse.Namespace,
    model: str,
    served: list[str],
    connector: bool,
    lmcache: LMCacheConfig,
    dev_mode: bool = False,
    lmcache_metrics: bool = True,
    mp: Optional[MPClient] = None,
) -> int:
    metrics = SimMetrics(served[0], lmcache_visible=lmcache_metrics)
    store = KVStore(
        StoreSettings(
            model=model,
            prefill_tokens_per_s=args.prefill_tokens_per_s,
            hbm_tokens=args.hbm_tokens,
            kv_bytes_per_token=args.kv_bytes_per_token,
            kv_scale=args.kv_scale,
            prefix_caching=args.prefix_caching,
            connector=connector,
            lmcache=lmcache,
            tier_read_delay_s=args.tier_read_delay_s,
            memory_restore_bps=args.memory_restore_bps,
            tier_write_delay_s=args.tier_write_delay_s,
            mp=mp,
        ),
        metrics,
    )
    server = SimServer(
        ServerSettings(
            model=model,
            served_names=served,
            host=args.host,
            port=args.port,
            max_model_len=args.max_model_len,
            decode_tokens_per_s=args.decode_tokens_per_s,
            max_batch=args.max_batch,
            dev_mode=dev_mode,
        ),
        store,
        metrics,
    )
    try:
        await server.serve_until_signalled()
    finally:
        store.close()
    return int(ExitCode.OK)


if __name__ == "__main__":
    sys.exit(main())

"""The agent's soak mode: sustained load on a node, detached from the controller, for hours or days.

``kvgate-agent.pyz soak --out DIR --endpoint URL --model M --trace FILE --duration S --window S ...``

Everything is written under ``DIR`` so a controller can come and go (stdlib only):

* ``soak.json``: the configuration and start time (written once, first).
* ``windows/wNNNNNN.jsonl``: the records of the open window (one line per request, flushed per
  line, fsync'd every second); when the window closes it is compressed to ``wNNNNNN.jsonl.gz``
  (written aside, fsync'd, renamed) and the plain file removed.
* ``windows.jsonl``: one summary line per closed window (``soakwindow.WindowAccumulator``),
  appended and fsync'd after its ``.gz`` exists: the controller pulls this file by byte offset.
* ``events.jsonl``: the watchdog's events: the engine's identity (pid + start time) at the
  start, ``/health`` going bad and back, the engine process gone or replaced (``restart``,
  always counted), the soak's start and end.
* ``health.jsonl``: node health samples: kernel log lines that appeared since the previous
  sample (raw: the controller classifies them), ``nvme smart-log`` JSON per drive, ``/proc/mdstat``,
  free space on the KV target, available memory, and the accelerator tools asked for with
  ``--accel-tool`` (``amd-smi metric --ecc --json``, ``npu-smi info``: raw output under
  ``accel``). A tool that cannot be read is recorded as such.
* ``probe-start.json`` / ``probe-end.json``: the greedy probe set's outputs at the start and end,
  from every engine instance (each answer names its ``instance``).
* ``done.json``: why and when it ended (``duration``, ``stopped``, ``signal``).

A file ``STOP`` in ``DIR`` (``kvgate soak stop``) or SIGTERM ends the soak early; in-flight
requests are cancelled and recorded, the open window is closed like any other.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from time import perf_counter_ns
from typing import Any, Optional
from urllib import error as urlerror
from urllib import request as urlrequest

from harness.deletion import remove_file
from harness.load.client import ClientOptions, RequestResult, StreamClient, load_api_key
from harness.load.records import RecordWriter, make_record
from harness.load.soakwindow import WindowAccumulator
from harness.load.spec import RequestSpec
from harness.load.workloads import build_workload

WINDOWS_DIR = "windows"
WINDOWS_INDEX = "windows.jsonl"
EVENTS = "events.jsonl"
HEALTH = "health.jsonl"
CONFIG = "soak.json"
DONE = "done.json"
STOP = "STOP"
# Counters scraped from /metrics at each window's end (summed over label sets); the controller
# turns consecutive totals into per-window hit rates.
COUNTERS = ("vllm:prefix_cache_queries", "vllm:prefix_cache_hits", "vllm:external_prefix_cache_queries",
            "vllm:external_prefix_cache_hits", "lmcache:num_requested_tokens", "lmcache:num_hit_tokens",
            "vllm:prompt_tokens", "vllm:generation_tokens",
            # KV chunk writes and reads that failed (the emulator's; a full or failing KV target)
            "kvgate_sim:store_errors", "kvgate_sim:read_errors")
# The accelerators' own fault counters, per vendor tool (the controller parses the raw output:
# harness.facts.parsers.health).
ACCEL_TOOLS = {"amd-smi": ["amd-smi", "metric", "--ecc", "--json"], "npu-smi": ["npu-smi", "info"]}
FAILURE_PAUSE_S = 0.5  # a closed-loop worker's pause after a failed request
_KERNEL_KEEP = 5000  # lines of the previous kernel log output kept to tell new lines apart


@dataclass
class SoakConfig:
    out: str
    endpoint: str
    model: str
    trace: str
    duration_s: float
    window_s: float
    concurrency: int = 1
    request_rate: Optional[float] = None
    api: str = "completions"
    timeout_s: float = 600.0
    api_key_env: Optional[str] = None
    engine_pid: Optional[int] = None
    engine_start: Optional[float] = None
    health_url: Optional[str] = None
    # Further engine instances of the same soak (instance 1, 2, ...): requests go round-robin to
    # ``endpoint`` and these; each one's process and /health are watched like instance 0's.
    extra_endpoints: list[str] = field(default_factory=list)
    extra_health_urls: list[str] = field(default_factory=list)
    extra_engines: list[list[float]] = field(default_factory=list)  # [pid, start time] per instance
    watchdog_s: float = 5.0
    sample_s: float = 60.0
    target_path: Optional[str] = None
    nvme: list[str] = field(default_factory=list)
    accel_tools: list[str] = field(default_factory=list)  # keys of ACCEL_TOOLS
    probe_trace: Optional[str] = None
    probe_tokens: int = 16
    # Per engine instance (instance i at index i): ``{"argv": [...], "env": {...}}`` to relaunch it
    # with when it dies, or ``{}``: that instance is not relaunched (its end is counted either way).
    restart: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class WatchSpec:
    """What a :class:`Watchdog` watches: per engine instance its process identity (the pid kvgate
    started and its start time; None: not watched, only its ``/health``), its ``/health`` URL and
    how to relaunch it (``{}``: never). Made from a soak's configuration (the engine on the soak's
    node) or by the engine node's own watcher (``harness.load.soakwatch``)."""

    engines: list[tuple[int, Optional[float]]]
    health_urls: list[str]
    restart: list[dict[str, Any]] = field(default_factory=list)
    interval_s: float = 5.0

    @classmethod
    def from_soak(cls, cfg: SoakConfig) -> WatchSpec:
        engines: list[tuple[int, Optional[float]]] = []
        if cfg.engine_pid is not None:
            engines.append((cfg.engine_pid, cfg.engine_start))
            engines += [(int(p), float(t)) for p, t in cfg.extra_engines]
        return cls(engines=engines, health_urls=[u for u in [cfg.health_url, *cfg.extra_health_urls] if u],
                   restart=list(cfg.restart), interval_s=cfg.watchdog_s)


def restart_specs(data: Any) -> list[dict[str, Any]]:
    """The relaunch commands of a ``--restart-json`` file: ``{"instances": [{"argv", "env"} | {}, ...]}``
    (one per instance) or, for one instance, ``{"argv": [...], "env": {...}}``."""
    items: list[Any] = list(data["instances"]) if isinstance(data, dict) and "instances" in data else [data]
    out: list[dict[str, Any]] = []
    for spec in items:
        if not spec:
            out.append({})
            continue
        out.append({"argv": [str(x) for x in spec["argv"]],
                    "env": {str(k): str(v) for k, v in (spec.get("env") or {}).items()}})
    return out


def public_restart(restart: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Relaunch commands as written to a file the controller copies into the evidence: a
    command's environment is the engine plan's and may hold a secret, so only its variable names
    are kept."""
    return [{"argv": r.get("argv"), "env": sorted(r.get("env") or {})} if r else {} for r in restart]


def public_config(cfg: SoakConfig) -> dict[str, Any]:
    """The configuration as written to ``soak.json`` (relaunch environments reduced to their
    variable names, :func:`public_restart`)."""
    d = asdict(cfg)
    d["restart"] = public_restart(cfg.restart)
    return d


def _append_line(path: Path, obj: dict[str, Any]) -> None:
    """Append one JSON line and fsync it (small, rare writes: events, health, window index)."""
    with open(path, "ab") as fh:
        fh.write((json.dumps(obj, separators=(",", ":"), default=str) + "\n").encode("ascii", "backslashreplace"))
        fh.flush()
        os.fsync(fh.fileno())


def _write_json(path: Path, obj: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=2, default=str)
        fh.write("\n")
        fh.flush()
        os.fsync(fh.fileno())
    tmp.replace(path)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def compress_window(plain: Path) -> Path:
    """``wN.jsonl`` -> ``wN.jsonl.gz`` durably (aside, fsync, rename, fsync dir), then drop the plain file."""
    gz = plain.with_name(plain.name + ".gz")
    tmp = gz.with_name(gz.name + ".tmp")
    with open(plain, "rb") as src, open(tmp, "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        raw.flush()
        os.fsync(raw.fileno())
    tmp.replace(gz)
    _fsync_dir(gz.parent)
    remove_file(plain, within=plain.parent, marker=".jsonl", missing_ok=False)
    return gz


# -- process identity and health ---------------------------------------------------------------

def process_start_time(pid: int) -> Optional[float]:
    """Start time of ``pid`` (seconds since the epoch, from /proc), None when it does not exist."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            stat = fh.read()
        ticks = int(stat[stat.rindex(")") + 2:].split()[19])
        with open("/proc/stat", encoding="ascii") as fh:
            btime = next(int(line.split()[1]) for line in fh if line.startswith("btime "))
        return btime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def child_pids(pid: int) -> list[int]:
    """Direct children of ``pid`` (``/proc/PID/task/*/children``, else a scan of ``/proc/*/stat``)."""
    out: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as fh:
                out += [int(x) for x in fh.read().split()]
        return out
    except (OSError, ValueError):
        pass
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", encoding="ascii", errors="replace") as fh:
                stat = fh.read()
            if int(stat[stat.rindex(")") + 2:].split()[1]) == pid:
                out.append(int(name))
        except (OSError, ValueError, IndexError):
            continue
    return out


def http_ok(url: str, timeout: float = 3.0) -> tuple[bool, str]:
    try:
        with urlrequest.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - the engine's own URL
            return 200 <= resp.status < 300, f"HTTP {resp.status}"
    except urlerror.HTTPError as exc:
        return False, f"HTTP {exc.code}"
    except (OSError, ValueError) as exc:
        return False, f"{type(exc).__name__}: {exc}"


def scrape_counters(url: str, names: Sequence[str] = COUNTERS, timeout: float = 5.0) -> Optional[dict[str, float]]:
    """Totals of the counters ``names`` (``_total`` samples summed over labels); None if unreachable."""
    try:
        with urlrequest.urlopen(url, timeout=timeout) as resp:  # noqa: S310
            text = resp.read().decode("utf-8", "replace")
    except (OSError, ValueError):
        return None
    out: dict[str, float] = {}
    wanted = {f"{n}_total": n for n in names}
    for line in text.splitlines():
        if not line or line[0] == "#":
            continue
        head, _, value = line.rpartition(" ")
        name = head.split("{", 1)[0]
        if name in wanted:
            try:
                out[wanted[name]] = out.get(wanted[name], 0.0) + float(value)
            except ValueError:
                continue
    return out


def scrape_all(urls: Sequence[str]) -> Optional[dict[str, float]]:
    """The counters of every instance summed; None when there is no URL or one did not answer
    (a partial sum would look like counters going backwards)."""
    if not urls:
        return None
    total: dict[str, float] = {}
    for url in urls:
        got = scrape_counters(url)
        if got is None:
            return None
        for k, v in got.items():
            total[k] = total.get(k, 0.0) + v
    return total


class Watchdog(threading.Thread):
    """Every ``interval_s``: ``/health`` and the engine process identity of every instance; an
    event on every change. Runs in the soak (engine on the soak's node) and in the engine node's
    own watcher (``harness.load.soakwatch``), with the same events in the same format."""

    def __init__(self, cfg: SoakConfig | WatchSpec, out: Path, stop: threading.Event) -> None:
        super().__init__(name="soak-watchdog", daemon=True)
        spec = cfg if isinstance(cfg, WatchSpec) else WatchSpec.from_soak(cfg)
        self.spec = spec
        self.out = out
        self.stop = stop
        self.restarts = 0
        self.relaunched: list[subprocess.Popen[bytes]] = []
        # Per engine instance: the process kvgate started is the detached wrapper and the engine
        # is its child. Both are watched by pid and start time (a reused pid is another process).
        self.groups: list[list[tuple[int, Optional[float]]]] = []
        self.alive: list[bool] = []
        for pid, start in spec.engines:
            self.groups.append([(pid, start)] + [(c, process_start_time(c)) for c in child_pids(pid)[:1]])
            self.alive.append(True)
        self.health_urls = list(spec.health_urls)
        self.healthy: list[Optional[bool]] = [None] * len(self.health_urls)
        self.health_failures = 0

    @property
    def watched(self) -> list[tuple[int, Optional[float]]]:
        """Every watched process, all instances (what ``soak_start`` records)."""
        return [w for g in self.groups for w in g]

    def event(self, kind: str, **data: Any) -> None:
        _append_line(self.out / EVENTS, {"t": round(time.time(), 3), "event": kind, **data})

    def check_once(self) -> None:
        many = len(self.groups) > 1 or len(self.health_urls) > 1
        for i, group in enumerate(self.groups):
            if not self.alive[i]:
                continue
            for pid, start in group:
                st = process_start_time(pid)
                if st is None or (start is not None and abs(st - start) >= 2.0):
                    # The engine (or its wrapper) is gone, or its pid was reused: a crash or a
                    # restart, counted either way.
                    self.alive[i] = False
                    self.restarts += 1
                    what = "engine process gone" if st is None else "pid reused by another process"
                    self.event("restart", pid=pid, instance=i, restarts=self.restarts,
                               detail=f"instance {i}: {what}" if many else what)
                    if i < len(self.spec.restart) and self.spec.restart[i]:
                        self.relaunch(i)
                    break
        for i, url in enumerate(self.health_urls):
            ok, detail = http_ok(url)
            if ok != self.healthy[i]:
                if not ok:
                    self.health_failures += 1
                self.event("health_ok" if ok else "health_bad", instance=i,
                           detail=f"instance {i}: {detail}" if many else detail)
                if ok and self.healthy[i] is False and i < len(self.alive) and not self.alive[i]:
                    self.event("engine_back", instance=i, detail="answers /health again after its process ended")
                self.healthy[i] = ok

    @property
    def engine_alive(self) -> bool:
        """Every watched instance still runs the process it started with (or was relaunched in)."""
        return bool(self.alive) and all(self.alive)

    def relaunch(self, i: int = 0) -> None:
        """Start instance ``i`` again (the profile allows it), in its own session, its output next
        to the soak's files; the new process is watched from now on and named in the events."""
        n = self.restarts
        spec = self.spec.restart[i]
        try:
            with open(self.out / f"engine-restart-{n}.out", "ab") as so, \
                    open(self.out / f"engine-restart-{n}.err", "ab") as se:
                proc = subprocess.Popen(spec["argv"], env={**os.environ, **spec.get("env", {})},  # noqa: S603
                                        stdin=subprocess.DEVNULL, stdout=so, stderr=se, start_new_session=True)
        except OSError as exc:
            self.event("restart_failed", instance=i, detail=f"instance {i}: {exc}")
            return
        self.relaunched.append(proc)
        start = process_start_time(proc.pid)
        self.groups[i] = [(proc.pid, start)]
        self.alive[i] = True
        self.event("engine_relaunched", instance=i, pid=proc.pid, start=start, log=f"engine-restart-{n}.err",
                   detail=f"instance {i} relaunched as pid {proc.pid} (restart {n})")

    def check_logged(self) -> None:
        """One look; an I/O error (a full disk) is recorded if it can be, never fatal to the watch."""
        try:
            self.check_once()
        except OSError as exc:
            try:
                self.event("watchdog_error", detail=str(exc))
            except OSError:
                pass

    def run(self) -> None:
        while not self.stop.wait(self.spec.interval_s):
            self.check_logged()


TOOLS_PATH_ENV = "KVGATE_NODE_TOOLS_PATH"


def _run_tool(argv: list[str], timeout: float = 20.0) -> tuple[Optional[str], Optional[str]]:
    """(stdout, None) or (None, why). The node's ``KVGATE_NODE_TOOLS_PATH`` (directories, ``:``
    separated), when set in its SSH environment, is searched before ``PATH`` (nodes whose dmesg,
    journalctl or nvme live elsewhere; the G4 tests put a fake dmesg there)."""
    extra = os.environ.get(TOOLS_PATH_ENV, "")
    search = os.pathsep.join(p for p in (extra, os.environ.get("PATH", os.defpath)) if p)
    exe = shutil.which(argv[0], path=search)
    if exe is None:
        return None, f"{argv[0]} not found"
    try:
        res = subprocess.run([exe, *argv[1:]], capture_output=True, text=True, timeout=timeout,  # noqa: S603
                             errors="replace", check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{argv[0]}: {exc}"
    if res.returncode != 0:
        return None, f"{argv[0]} exit {res.returncode}: {res.stderr.strip()[-300:]}"
    return res.stdout, None


class HealthSampler(threading.Thread):
    """Every ``sample_s`` (and once at the start and the end): kernel log, SMART, mdstat, space, memory."""

    def __init__(self, cfg: SoakConfig, out: Path, stop: threading.Event) -> None:
        super().__init__(name="soak-health", daemon=True)
        self.cfg = cfg
        self.out = out
        self.stop = stop
        self._seen: Optional[set[str]] = None
        self.samples = 0

    def _kernel(self) -> dict[str, Any]:
        text, why = _run_tool(["dmesg"])
        source = "dmesg"
        if text is None:
            text, why2 = _run_tool(["journalctl", "-k", "-b", "--no-pager", "-o", "short-iso", "-n", str(_KERNEL_KEEP)])
            source = "journalctl"
            if text is None:
                return {"error": f"{why}; {why2}"}
        lines = text.splitlines()[-_KERNEL_KEEP:]
        first = self._seen is None
        new = [] if first else [ln for ln in lines if ln not in (self._seen or set())]
        self._seen = set(lines)
        # The first sample is the baseline: lines logged before the soak are not its faults.
        return {"source": source, "baseline": first, "lines_total": len(lines), "new": new}

    def sample(self) -> dict[str, Any]:
        cfg = self.cfg
        s: dict[str, Any] = {"t": round(time.time(), 3), "kernel": self._kernel()}
        smart: dict[str, Any] = {}
        for dev in cfg.nvme:
            text, why = _run_tool(["nvme", "smart-log", dev, "-o", "json"])
            smart[dev] = {"json": text} if text is not None else {"error": why}
        s["smart"] = smart
        if cfg.accel_tools:
            accel: dict[str, Any] = {}
            for tool in cfg.accel_tools:
                text, why = _run_tool(list(ACCEL_TOOLS[tool]), timeout=60.0)
                accel[tool] = {"text": text} if text is not None else {"error": why}
            s["accel"] = accel
        try:
            s["mdstat"] = Path("/proc/mdstat").read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            s["mdstat_error"] = str(exc)
        if cfg.target_path:
            try:
                st = os.statvfs(cfg.target_path)
                s["target_free_bytes"] = st.f_bavail * st.f_frsize
                s["target_size_bytes"] = st.f_blocks * st.f_frsize
            except OSError as exc:
                s["target_error"] = str(exc)
        try:
            with open("/proc/meminfo", encoding="ascii") as fh:
                for line in fh:
                    if line.startswith("MemAvailable:"):
                        s["mem_available_bytes"] = int(line.split()[1]) * 1024
        except (OSError, ValueError):
            pass
        return s

    def sample_and_write(self) -> None:
        try:
            _append_line(self.out / HEALTH, self.sample())
            self.samples += 1
        except OSError:
            pass  # a full disk: the load's records say so; the next sample tries again

    def run(self) -> None:
        while not self.stop.wait(self.cfg.sample_s):
            self.sample_and_write()


# -- the load ---------------------------------------------------------------------------------

class Windows:
    """The open window's record file and accumulator; ``roll`` closes it and opens the next."""

    def __init__(self, out: Path, t0_unix: float, window_s: float, metrics_urls: Sequence[str]) -> None:
        self.out = out
        self.dir = out / WINDOWS_DIR
        self.dir.mkdir(parents=True, exist_ok=True)
        self.t0 = t0_unix
        self.window_s = window_s
        self.metrics_urls = list(metrics_urls)
        self.index = 0
        self.writer: Optional[RecordWriter] = None
        self.acc: Optional[WindowAccumulator] = None
        self.write_errors = 0
        self.open_next()

    def path(self, index: int) -> Path:
        return self.dir / f"w{index:06d}.jsonl"

    def open_next(self) -> None:
        self.index += 1
        self.acc = WindowAccumulator(self.index, time.time())
        self.writer = RecordWriter(self.path(self.index))

    def write(self, rec: dict[str, Any]) -> None:
        assert self.acc is not None and self.writer is not None
        self.acc.add(rec)
        try:
            self.writer.write(rec)
        except OSError:
            self.write_errors += 1  # counted in the window; the record's figures are in the summary

    def swap(self, *, last: bool = False) -> tuple[WindowAccumulator, RecordWriter, float]:
        """Detach the open window (on the event loop's thread, so no record is lost between two
        windows) and open the next one unless ``last``; ``finish`` it off the loop."""
        assert self.acc is not None and self.writer is not None
        old = (self.acc, self.writer, time.time())
        self.acc = None
        self.writer = None
        if not last:
            self.open_next()
        return old

    def finish(self, old: tuple[WindowAccumulator, RecordWriter, float], watchdog: Optional[Watchdog],
               last: bool = False) -> dict[str, Any]:
        acc, writer, ended = old
        try:
            writer.close()
        except OSError:
            self.write_errors += 1
        counters = scrape_all(self.metrics_urls)
        summary = acc.summary(ended, counters=counters, restarts_so_far=watchdog.restarts if watchdog else None,
                              record_write_errors=self.write_errors, last=last)
        self.write_errors = 0
        try:
            gz = compress_window(writer.path)
            summary["file"] = f"{WINDOWS_DIR}/{gz.name}"
        except OSError as exc:
            summary["file"] = f"{WINDOWS_DIR}/{writer.path.name}"
            summary["compress_error"] = str(exc)
        try:
            _append_line(self.out / WINDOWS_INDEX, summary)
        except OSError as exc:
            summary["index_error"] = str(exc)
        return summary


async def _probe_set(cfg: SoakConfig, path: Path) -> None:
    """The greedy probe set, sent to every engine instance in turn: each prompt once per instance,
    temperature 0, the texts recorded with the instance that gave them (``instances`` says how
    many were asked, so an instance missing from the file is seen as missing)."""
    if not cfg.probe_trace:
        return
    wl = build_workload("trace", {"path": cfg.probe_trace}, 0)
    opts = ClientOptions(model=cfg.model, api=cfg.api, timeout_s=cfg.timeout_s, ignore_eos=True, keep_text=True,
                         extra_body={"temperature": 0.0, "seed": 0},
                         api_key=load_api_key(cfg.api_key_env) if cfg.api_key_env else None)
    out: list[dict[str, Any]] = []
    endpoints = [cfg.endpoint, *cfg.extra_endpoints]
    for inst, endpoint in enumerate(endpoints):
        async with StreamClient(endpoint, opts, max_connections=1) as client:
            for spec in wl.measured:
                spec = RequestSpec(spec.request_id, spec.prompt, spec.input_tokens, cfg.probe_tokens, spec.messages,
                                   spec.meta)
                res = await client.request(spec)
                out.append({"instance": inst, "request_id": spec.request_id, "status": res.status,
                            "error": res.error, "text": res.text, "output_tokens": res.output_tokens})
    _write_json(path, {"t": round(time.time(), 3), "max_tokens": cfg.probe_tokens, "instances": len(endpoints),
                       "answers": out})


class _SoakRun:
    """One soak: the watchdog and health sampler threads, the request drivers (closed loop or open
    loop), the window roller, and the closing records. Split by phase so each reads at once."""

    def __init__(self, cfg: SoakConfig) -> None:
        self.cfg = cfg
        self.out = Path(cfg.out)
        self.stop = asyncio.Event()
        self.reason: list[str] = []
        self.inflight: set[asyncio.Task[Any]] = set()
        self.counter = 0
        self.route: dict[str, int] = {}  # request id -> engine instance (round-robin)
        self.specs: list[RequestSpec] = []
        self.tstop = threading.Event()
        self.started = 0.0
        self.t0 = self.deadline = 0

    def _on_signal(self, name: str) -> None:
        self.reason.append(f"signal {name}")
        self.stop.set()

    async def start(self) -> None:
        """Signals, the trace, config.json, the watchdog and health threads, the opening probe set."""
        cfg, out = self.cfg, self.out
        out.mkdir(parents=True, exist_ok=True)
        self.loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                self.loop.add_signal_handler(sig, self._on_signal, sig.name)
            except (NotImplementedError, RuntimeError):
                pass
        self.specs = list(build_workload("trace", {"path": cfg.trace}, 0).measured)
        self.started = time.time()
        _write_json(out / CONFIG, {"config": public_config(cfg), "started_unix": self.started, "pid": os.getpid()})
        self.watchdog = Watchdog(cfg, out, self.tstop)
        self.health = HealthSampler(cfg, out, self.tstop)
        self.watchdog.event("soak_start", engine_pid=cfg.engine_pid, engine_start=cfg.engine_start,
                            watched=[{"pid": p, "start": t} for p, t in self.watchdog.watched],
                            duration_s=cfg.duration_s, window_s=cfg.window_s)
        self.health.sample_and_write()  # the baseline sample
        self.watchdog.check_once()
        self.watchdog.start()
        self.health.start()
        try:
            await _probe_set(cfg, out / "probe-start.json")
        except (OSError, ValueError) as exc:
            self.watchdog.event("probe_error", phase="start", detail=str(exc))
        metrics_urls = [u.rsplit("/", 1)[0] + "/metrics" for u in [cfg.health_url, *cfg.extra_health_urls] if u]
        opts = ClientOptions(model=cfg.model, api=cfg.api, timeout_s=cfg.timeout_s,
                             api_key=load_api_key(cfg.api_key_env) if cfg.api_key_env else None)
        self.clients = [StreamClient(e, opts, max_connections=cfg.concurrency)
                        for e in [cfg.endpoint, *cfg.extra_endpoints]]
        # the first window opens as the load starts: time spent before it (the clients' set-up, slow
        # on a loaded node) would count as time with no request in flight (load_held)
        self.windows = Windows(out, self.started, cfg.window_s, metrics_urls)
        self.t0 = perf_counter_ns()
        self.deadline = self.t0 + int(cfg.duration_s * 1e9)

    def next_spec(self) -> RequestSpec:
        k = self.counter
        self.counter += 1
        base = self.specs[k % len(self.specs)]
        spec = base.with_id(f"{base.request_id}-s{k}")
        self.route[spec.request_id] = k % len(self.clients)
        return spec

    async def one(self, spec: RequestSpec, due: Optional[int]) -> bool:
        """Send one request, record it in the open window; False when it failed."""
        t_ready = perf_counter_ns()
        inst = self.route.pop(spec.request_id, 0)
        client = self.clients[inst]
        task = asyncio.ensure_future(client.request(spec))
        self.inflight.add(task)
        try:
            res = await task
        except asyncio.CancelledError:
            partial: Optional[RequestResult] = client.partial.pop(spec.request_id, None)
            res = partial or RequestResult(
                spec.request_id, "cancelled", t_ready, perf_counter_ns(), error_kind="cancelled",
                error="soak ended")
        finally:
            self.inflight.discard(task)
        ref = due if due is not None else t_ready
        rec = make_record(res, spec, phase="soak", queue_ms=max(0.0, (res.start_ns - ref) / 1e6), scheduled_ns=due)
        if len(self.clients) > 1:
            rec["instance"] = inst
        self.windows.write(rec)
        return res.status in ("ok", "cancelled")

    async def closed_worker(self) -> None:
        while not self.stop.is_set() and perf_counter_ns() < self.deadline:
            if not await self.one(self.next_spec(), None):
                # A failed request (engine down, refused): pause before the next one, so a dead
                # engine gives a bounded stream of failure records, not a busy loop.
                try:
                    await asyncio.wait_for(self.stop.wait(), FAILURE_PAUSE_S)
                except asyncio.TimeoutError:
                    pass
            if self.stop.is_set():
                return

    async def open_loop(self) -> None:
        import random

        rng = random.Random(0)
        sem = asyncio.Semaphore(self.cfg.concurrency)
        tasks: set[asyncio.Task[None]] = set()
        due = perf_counter_ns()

        async def limited(spec: RequestSpec, at: int) -> None:
            async with sem:
                if not self.stop.is_set():
                    await self.one(spec, at)

        while not self.stop.is_set():
            due += int(rng.expovariate(self.cfg.request_rate or 1.0) * 1e9)
            if due >= self.deadline:
                break
            try:
                await asyncio.wait_for(self.stop.wait(), max(0.0, (due - perf_counter_ns()) / 1e9))
                break
            except asyncio.TimeoutError:
                pass
            t = asyncio.ensure_future(limited(self.next_spec(), due))
            tasks.add(t)
            t.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*tasks)

    async def roller(self) -> None:
        """Close a window every ``window_s``; watch for STOP and the deadline."""
        window_ns = int(self.cfg.window_s * 1e9)
        next_close = self.t0 + window_ns
        stop_file = self.out / STOP
        while not self.stop.is_set():
            now = perf_counter_ns()
            if now >= self.deadline:
                self.reason.append("duration")
                self.stop.set()
                break
            if stop_file.exists():
                self.reason.append("stopped")
                self.stop.set()
                break
            if now >= next_close:
                old = self.windows.swap()
                # Sequential: window N's index line is appended before window N+1's.
                await self.loop.run_in_executor(None, self.windows.finish, old, self.watchdog)
                next_close += window_ns
            await asyncio.sleep(min(0.5, max(0.01, (min(next_close, self.deadline) - now) / 1e9)))

    def _cancel_all(self) -> None:
        for t in list(self.inflight):
            t.cancel()

    async def drive(self) -> None:
        """The load until the duration, STOP or a signal; in-flight requests are cancelled at stop."""
        stop_watch = asyncio.ensure_future(self.stop.wait())
        stop_watch.add_done_callback(lambda _f: self._cancel_all())
        roll_task = asyncio.ensure_future(self.roller())
        try:
            if self.cfg.request_rate:
                await self.open_loop()
            else:
                await asyncio.gather(*(self.closed_worker() for _ in range(self.cfg.concurrency)))
            if not self.stop.is_set():
                self.reason.append("duration")
                self.stop.set()
            await roll_task
        finally:
            stop_watch.cancel()
            for c in self.clients:
                await c.aclose()

    async def finish(self) -> dict[str, Any]:
        """The last window, the closing probe set and samples, done.json."""
        final = self.windows.swap(last=True)
        last = await self.loop.run_in_executor(None, lambda: self.windows.finish(final, self.watchdog, last=True))
        try:
            await _probe_set(self.cfg, self.out / "probe-end.json")
        except (OSError, ValueError) as exc:
            self.watchdog.event("probe_error", phase="end", detail=str(exc))
        self.tstop.set()
        self.watchdog.join(timeout=10)
        self.health.join(timeout=30)
        self.watchdog.check_once()
        self.health.sample_and_write()  # the closing sample
        ended = time.time()
        done = {"reason": self.reason[0] if self.reason else "duration", "started_unix": self.started,
                "ended_unix": ended, "elapsed_s": round(ended - self.started, 3), "windows": last["index"],
                "restarts": self.watchdog.restarts}
        self.watchdog.event("soak_end", **done)
        _write_json(self.out / DONE, done)
        return done


async def run_soak_async(cfg: SoakConfig) -> dict[str, Any]:
    soak = _SoakRun(cfg)
    await soak.start()
    await soak.drive()
    return await soak.finish()


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="kvgate-agent.pyz soak", description="Run a detached soak (see the module doc).")
    p.add_argument("--out", required=True)
    p.add_argument("--endpoint", required=True, action="append",
                   help="the engine's URL; repeated for each further instance (requests go round-robin)")
    p.add_argument("--model", required=True)
    p.add_argument("--trace", required=True, help="JSONL requests, cycled")
    p.add_argument("--duration", type=float, required=True, help="seconds")
    p.add_argument("--window", type=float, required=True, help="seconds")
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--request-rate", type=float, default=None)
    p.add_argument("--api", default="completions", choices=["completions", "chat"])
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument("--api-key-env", default=None)
    p.add_argument("--engine-pid", type=int, action="append", default=[], help="repeated: one per instance")
    p.add_argument("--engine-start", type=float, action="append", default=[], help="repeated: one per instance")
    p.add_argument("--health-url", action="append", default=[], help="repeated: one per instance")
    p.add_argument("--watchdog", type=float, default=5.0, help="seconds between /health checks")
    p.add_argument("--sample", type=float, default=60.0, help="seconds between node health samples")
    p.add_argument("--target-path", default=None)
    p.add_argument("--nvme", action="append", default=[])
    p.add_argument("--accel-tool", action="append", default=[], choices=sorted(ACCEL_TOOLS),
                   help="sample this accelerator tool's fault counters with the node health")
    p.add_argument("--probe-trace", default=None)
    p.add_argument("--probe-tokens", type=int, default=16)
    p.add_argument("--restart-json", default=None,
                   help='file with {"instances": [{"argv": [...], "env": {...}} or {}, ...]} (one per instance; '
                        'or one {"argv", "env"} for instance 0): relaunch an instance when it dies')
    a = p.parse_args(argv)
    if a.duration <= 0 or a.window <= 0 or a.concurrency < 1:
        print("kvgate-agent soak: --duration and --window must be > 0, --concurrency >= 1", flush=True)
        return 2
    if len(a.engine_pid) != len(a.engine_start) or len(a.engine_pid) > len(a.endpoint) \
            or len(a.health_url) > len(a.endpoint):
        print("kvgate-agent soak: one --engine-pid with one --engine-start, and at most one --health-url, "
              "per --endpoint", flush=True)
        return 2
    cfg = SoakConfig(out=a.out, endpoint=a.endpoint[0], model=a.model, trace=a.trace, duration_s=a.duration,
                     window_s=a.window, concurrency=a.concurrency, request_rate=a.request_rate, api=a.api,
                     timeout_s=a.timeout, api_key_env=a.api_key_env,
                     engine_pid=a.engine_pid[0] if a.engine_pid else None,
                     engine_start=a.engine_start[0] if a.engine_start else None,
                     health_url=a.health_url[0] if a.health_url else None, watchdog_s=a.watchdog,
                     extra_endpoints=list(a.endpoint[1:]), extra_health_urls=list(a.health_url[1:]),
                     extra_engines=[[float(p), t] for p, t in zip(a.engine_pid[1:], a.engine_start[1:])],
                     sample_s=a.sample, target_path=a.target_path, nvme=list(a.nvme),
                     accel_tools=list(a.accel_tool), probe_trace=a.probe_trace,
                     probe_tokens=a.probe_tokens)
    if a.restart_json:
        with open(a.restart_json, encoding="utf-8") as fh:
            cfg.restart = restart_specs(json.load(fh))
    asyncio.run(run_soak_async(cfg))
    return 0

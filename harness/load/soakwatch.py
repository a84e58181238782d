"""The engine node's own watchdog during a soak, for an engine that runs on another node than the
soak's load (stdlib only; agent command ``soak-watch``).

``kvgate-agent.pyz soak-watch --out DIR --engine-pid P --engine-start T --health-url U ... --until S``

The soak's own watchdog can only see processes on its node; an engine elsewhere killed and
restarted between two looks would otherwise go unseen. This process runs detached on the engine's
node, next to the engine, and watches every instance there with the soak's
:class:`harness.load.soak.Watchdog`: each instance's process identity (pid + start time, the
detached wrapper and its child) and its ``/health`` on the node's loopback; with
``--restart-json`` it relaunches a dead instance (counted all the same). Files under ``DIR``:

* ``watch.json``: the configuration (relaunch environments reduced to their variable names).
* ``events.jsonl``: the same events as the soak's (``restart``, ``health_bad``/``health_ok``,
  ``engine_back``, ``engine_relaunched``), between a ``watch_start`` and a ``watch_end`` event.
  The controller pulls the file by byte offset; only a file that reached ``watch_end`` vouches
  for the whole soak (a watcher killed or never pulled to its end leaves ``no_restarts`` NOT_RUN).
* ``health.jsonl``: with ``--sample``, this node's health samples exactly as the soak's (kernel
  log lines, ``nvme smart-log``, ``/proc/mdstat``, free space on ``--target-path``, memory,
  ``--accel-tool`` output): the KV target and the accelerators are on this node, not on the
  load's, so their checks read these samples.
* ``done.json``: why and when it ended.

It ends on ``STOP`` in ``DIR`` (the controller writes it once the soak has ended), on SIGTERM or
SIGINT, or at ``--until`` (seconds since the epoch: the soak's planned end plus a grace, so a
watcher whose controller never came back does not run for ever). ``watch_end`` names which.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Optional

from harness.load.soak import (
    ACCEL_TOOLS,
    DONE,
    STOP,
    HealthSampler,
    SoakConfig,
    Watchdog,
    WatchSpec,
    _write_json,
    public_restart,
    restart_specs,
)

WATCH_CONFIG = "watch.json"
START = "watch_start"
END = "watch_end"
# Engines the watcher relaunched outlive it on purpose (the controller stops them with the
# soak); their process objects are kept here rather than dropped while they run.
RELAUNCHED: list[subprocess.Popen[bytes]] = []


@dataclass
class WatchConfig:
    out: str
    engines: list[tuple[int, Optional[float]]]
    health_urls: list[str]
    until_unix: float
    interval_s: float = 5.0
    restart: list[dict[str, Any]] = field(default_factory=list)
    # node health, as the soak samples it (None: not sampled here)
    sample_s: Optional[float] = None
    target_path: Optional[str] = None
    nvme: list[str] = field(default_factory=list)
    accel_tools: list[str] = field(default_factory=list)


def run_watch(cfg: WatchConfig, stop: Optional[threading.Event] = None) -> dict[str, Any]:
    """Watch until ``STOP``, a signal (``stop`` set) or ``until_unix``; returns ``done.json``."""
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    stop = stop or threading.Event()
    reason: list[str] = []
    public = {**asdict(cfg), "restart": public_restart(cfg.restart)}
    started = time.time()
    _write_json(out / WATCH_CONFIG, {"config": public, "started_unix": started})
    wd = Watchdog(WatchSpec(engines=list(cfg.engines), health_urls=list(cfg.health_urls), restart=list(cfg.restart),
                            interval_s=cfg.interval_s), out, stop)
    wd.event(START, watched=[{"pid": p, "start": t} for p, t in wd.watched], instances=len(cfg.engines),
             until_unix=cfg.until_unix)
    health: Optional[HealthSampler] = None
    if cfg.sample_s is not None:
        health = HealthSampler(SoakConfig(out=cfg.out, endpoint="", model="", trace="", duration_s=1.0, window_s=1.0,
                                          sample_s=cfg.sample_s, target_path=cfg.target_path, nvme=list(cfg.nvme),
                                          accel_tools=list(cfg.accel_tools)), out, stop)
        health.sample_and_write()  # the baseline sample
        health.start()
    stop_file = out / STOP
    while True:
        # The reason to end is read before the look, so the last look is taken after it: a
        # restart just before the controller's STOP (written after the soak ended) is still seen.
        if stop.is_set():
            reason.append("signal")
        elif stop_file.exists():
            reason.append("stopped")
        elif time.time() >= cfg.until_unix:
            reason.append("until")
        wd.check_logged()  # a full disk must not end the watch
        if reason:
            break
        stop.wait(min(cfg.interval_s, max(0.05, cfg.until_unix - time.time())))
    if health is not None:
        stop.set()
        health.join(timeout=30)
        health.sample_and_write()  # the closing sample
    ended = time.time()
    done = {"reason": reason[0], "started_unix": started, "ended_unix": ended, "restarts": wd.restarts,
            "health_failures": wd.health_failures}
    wd.event(END, **done)
    _write_json(out / DONE, done)
    RELAUNCHED.extend(wd.relaunched)
    return done


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = argparse.ArgumentParser(prog="kvgate-agent.pyz soak-watch",
                                description="Watch this node's engine instances during a soak (see the module doc).")
    p.add_argument("--out", required=True)
    p.add_argument("--engine-pid", type=int, action="append", default=[], help="repeated: one per instance")
    p.add_argument("--engine-start", type=float, action="append", default=[], help="repeated: one per instance")
    p.add_argument("--health-url", action="append", default=[], help="repeated: one per instance")
    p.add_argument("--watchdog", type=float, default=5.0, help="seconds between looks")
    p.add_argument("--until", type=float, required=True, help="end at this time (seconds since the epoch)")
    p.add_argument("--restart-json", default=None, help="relaunch commands per instance (as the soak's)")
    p.add_argument("--sample", type=float, default=None, help="seconds between node health samples (none: not sampled)")
    p.add_argument("--target-path", default=None)
    p.add_argument("--nvme", action="append", default=[])
    p.add_argument("--accel-tool", action="append", default=[], choices=sorted(ACCEL_TOOLS))
    a = p.parse_args(argv)
    if not a.engine_pid or len(a.engine_pid) != len(a.engine_start) or len(a.health_url) > len(a.engine_pid) \
            or a.watchdog <= 0:
        print("kvgate-agent soak-watch: one --engine-start per --engine-pid (at least one), at most one "
              "--health-url per instance, --watchdog > 0", flush=True)
        return 2
    cfg = WatchConfig(out=a.out, engines=list(zip(a.engine_pid, a.engine_start)), health_urls=list(a.health_url),
                      until_unix=a.until, interval_s=a.watchdog, sample_s=a.sample, target_path=a.target_path,
                      nvme=list(a.nvme), accel_tools=list(a.accel_tool))
    if a.restart_json:
        with open(a.restart_json, encoding="utf-8") as fh:
            cfg.restart = restart_specs(json.load(fh))
    stop = threading.Event()

    def on_signal(_sig: int, _frame: Any) -> None:
        stop.set()

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    run_watch(cfg, stop)
    return 0

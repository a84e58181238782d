"""G4, the soak: the candidate arm under sustained load for the profile's ``soak.duration``.

Steps, each recorded in the gate's resumable state (``--resume`` repeats nothing):

1. ``soak/fio-before`` (and ``-2`` .. ``-N``): fio read bandwidth on the candidate's target, under
   the gates' protocol (``harness.probes.fio_rounds``: preconditioned, drained, rounds until steady
   state), ``soak.fio_runs`` independent runs.
2. ``soak/start``: the engine is started with the same launcher as G3 (candidate arm), then the
   node agent's soak mode, detached on the client node (``harness.load.soak``). When the engine
   runs on another node, that node first gets its own detached watchdog (``soak-watch``,
   ``harness.load.soakwatch``): every instance's process identity and ``/health``, watched where
   it runs. Their handles and the engine's are saved before anything else happens. Without
   ``wait`` the gate returns here (:class:`SoakDetached`): the soak lives on the nodes.
3. Follow: poll the soak, pull its windows, events and health samples by offset, print one
   status line per window. A dropped connection is retried until the soak's planned end plus a
   grace period; nothing pulled is ever lost (local files are exact prefixes of the node's).
4. ``soak/finished``: the engine node's watchdog is stopped (it takes a last look) and pulled to
   its end, the engine's logs are collected into evidence, the engine is stopped.
5. ``soak/fio-after`` (and ``-2`` .. ``-N``): the same runs on the same target under the same
   protocol, so each starts only once the soak's writes have drained: retention = after / before,
   decided on the interval over the runs (``soakdata.retention_leaf``).

The measured results come from ``soakdata.soak_measured``; every check is decided by the gate
evaluator from ``gates/G4.yaml``.
"""

from __future__ import annotations

import json
import shlex
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Optional

from harness.agent.deploy import ensure_agent
from harness.agent.remote import AgentLoad
from harness.config.inventory import Node, StorageTarget
from harness.config.profile import Profile
from harness.engines import EngineInstance, get_engine
from harness.errors import InfraError, InputError, KvgateError
from harness.load import RequestSpec
from harness.load.soak import ACCEL_TOOLS, WINDOWS_INDEX
from harness.pipelines.g4.reproduce import control_for_run
from harness.pipelines.g4.soakactors import note_node_actors, record_replacements
from harness.pipelines.g4.soakdata import side_leaf, soak_measured
from harness.pipelines.g4.soakrun import (
    WATCH_DIR,
    SoakHandle,
    WatchHandle,
    pull,
    pull_watch,
    read_local_jsonl,
    start_soak,
    start_watch,
    stop_watch,
)
from harness.pipelines.g4.soakverify import WindowCheck, verify_windows
from harness.pipelines.shared.context import GateRun
from harness.pipelines.shared.loadpoint import point_workload
from harness.pipelines.shared.sweep import _start_instances, _stop_instances
from harness.pipelines.shared.sweepdata import measurement
from harness.platforms import get_platform
from harness.probes.fio_rounds import run_fio_rounds
from harness.probes.measured import FIO_METRICS, fio_leaf
from harness.progress import Progress
from harness.remote.base import Executor, RemoteError

SOAK_DIR = "soak"
PROBE_SET = 4  # greedy probe requests answered at the start and the end


class SoakDetached(KvgateError):
    """Not an error: the soak was started (or is still running) and the gate returned without
    waiting for it. ``kvgate soak status`` looks in; ``kvgate gate G4 --resume`` finishes it."""

    def __init__(self, message: str, *, campaign: str, remaining_s: Optional[float]) -> None:
        super().__init__(message)
        self.campaign = campaign
        self.remaining_s = remaining_s


def soak_dir(run: GateRun) -> Path:
    return Path(run.gate_dir.evidence_path(SOAK_DIR))


def watch_dir(run: GateRun) -> Path:
    """The local copy of the engine node's watchdog (an engine on another node than the load)."""
    return soak_dir(run) / WATCH_DIR


def _trace(specs: list[RequestSpec]) -> bytes:
    return "".join(json.dumps({"request_id": s.request_id, "prompt": s.prompt, "output_len": s.max_tokens}) + "\n"
                   for s in specs).encode()


def _drives(target: StorageTarget) -> tuple[list[str], list[str]]:
    """NVMe devices to read SMART from and md arrays to watch, from the inventory's target."""
    devices: list[str] = []
    arrays: list[str] = []
    dev = target.device or ""
    if dev.startswith("/dev/md"):
        arrays.append(dev.rsplit("/", 1)[1])
    elif dev.startswith("/dev/nvme"):
        devices.append(dev)
    for m in target.raid_members:
        path = m if m.startswith("/dev/") else f"/dev/{m}"
        if path.startswith("/dev/nvme"):
            devices.append(path)
    if target.raid is not None and not arrays and dev:
        arrays.append(dev.rsplit("/", 1)[1])
    return devices, arrays


def _fio(run: GateRun, node: Node, target: StorageTarget, side: str) -> dict[str, Any]:
    """The profile's ``soak.fio_runs`` independent probes of ``target`` on one side of the soak, as one
    leaf (``soakdata.side_leaf``). One probe's rounds share its level, which wanders from run to run
    (docs/ARCHITECTURE.md "Retention (G4) is decided on runs"), so retention is decided on the runs,
    never on the rounds of one."""
    leaves: list[dict[str, Any]] = []
    for i in range(run.profile.soak.fio_runs):
        leaves.append(_fio_run(run, node, target, side, i))
        if leaves[-1].get("value") is None:
            break  # fio refused or failed (recorded as a fault): another run says nothing more
    return side_leaf(leaves)


def _fio_run(run: GateRun, node: Node, target: StorageTarget, side: str, i: int) -> dict[str, Any]:
    # the first run keeps the step and evidence names of a one-run side (resume of older campaigns)
    tag = side if i == 0 else f"{side}-{i + 1}"
    key = f"soak/fio-{tag}"
    done = run.gate_dir.step_done(key)
    if done is not None:
        return dict(done)
    out_dir = Path(run.gate_dir.evidence_path(f"fio/{tag}/{node.name}/{target.name}"))
    with Progress(f"G4 fio {tag} {node.name}/{target.name}", enabled=run.progress) as p:
        try:
            res = run_fio_rounds(run.executor(node.name), target, run.profile.probes.fio, out_dir,
                                 job_sets=["seq-read"], progress=p, owner=run.campaign.id)
        except (InfraError, InputError) as exc:  # a memory-backed target too: G3 refused it before (exit 2)
            run.fault(f"{node.name}: fio {side} the soak on target {target.name} failed", exc)
            return measurement(None, detail=f"fio did not run: {exc}")
    run.gate_dir.record_command(node.name, shlex.split(res.command))
    job_set, direction = FIO_METRICS["seq_read_bw"]
    leaf = fio_leaf(res, job_set, direction, run.path) or measurement(None, detail="fio ran no seq-read job")
    run.gate_dir.mark_step_done(key, leaf)
    return leaf


def _stop_stale_soak(run: GateRun) -> None:
    """A run killed between starting the soak and recording it left a soak behind: stop it
    (its files stay as evidence, renamed) before starting the one this run records."""
    local = soak_dir(run)
    stale = [(SoakHandle, local, "soak"), (WatchHandle, local / WATCH_DIR, "engine watchdog")]
    stale = [x for x in stale if (x[1] / x[0].handle_file).exists()]
    if not stale:
        return
    for cls, where, what in stale:
        try:
            old = cls.load(where)
            state = run.executor(old.node).stop(old.handle, grace=10.0)
            run.notes.append(f"stopped a {what} left by an interrupted start: {state.reason or state.exit_code}")
        except (RemoteError, InfraError, OSError, ValueError, KeyError) as exc:
            run.warn(f"could not stop a {what} left by an interrupted start", exc)
    n = 1
    while local.with_name(f"{local.name}.interrupted-{n}").exists():
        n += 1
    local.rename(local.with_name(f"{local.name}.interrupted-{n}"))


def _restart_specs(instances: list[EngineInstance]) -> bytes:
    """The relaunch command of every instance (profile ``soak.restart_engine``), for the agent
    that watches them (``--restart-json``): on the node where they run. The file is 0600 and
    removed with the soak's directory; the copy in ``soak.json`` keeps only variable names."""
    spec = {"instances": [{"argv": list(i.plan.argv), "env": dict(i.plan.env)} for i in instances]}
    return (json.dumps(spec) + "\n").encode()


def _watch_interval(window: float) -> float:
    return min(5.0, max(0.5, window / 4))


def _sample_interval(window: float) -> float:
    # the node health sample spawns several tools: every few seconds at most, even for a
    # compressed soak's short windows (its own load must not disturb the soak)
    return min(60.0, max(5.0, window / 2))


def _node_health(node: Node, target: Optional[StorageTarget], target_node: Optional[Node],
                 window: float) -> tuple[list[str], dict[str, Any]]:
    """The health sampler's arguments for ``node`` and what it samples there: the KV target (free
    space, its NVMe drives' SMART, its md arrays) when the target is on that node, and the
    accelerator tools of the node's platform."""
    args = ["--sample", repr(_sample_interval(window))]
    accel = [t for t in get_platform(node.platform).accelerator_tools if t in ACCEL_TOOLS]
    for tool in accel:
        args += ["--accel-tool", tool]
    devices: list[str] = []
    arrays: list[str] = []
    if target is not None and target_node is not None and target_node.name == node.name:
        args += ["--target-path", target.path]
        devices, arrays = _drives(target)
        for d in devices:
            args += ["--nvme", d]
    return args, {"nvme": devices, "md_arrays": arrays, "accel_tools": accel}


def _start_engine_watch(run: GateRun, server: Node, instances: list[EngineInstance], *,
                        until_unix: float, window: float, health_args: list[str]) -> dict[str, Any]:
    """The engine's node gets its own watchdog (the load runs elsewhere): every instance's
    process identity and ``/health`` watched where it runs, and relaunched there when the
    profile says so; and the node's health sampled there (the KV target and the accelerators
    are on it). A watchdog that could not be started is a recorded fault, and the restarts and
    node-health checks stay NOT_RUN (nothing vouches for the engine's node)."""
    ex = run.executor(server.name)
    try:
        workdir = str(run.inventory.setting(server, "workdir"))
        python = str(run.inventory.setting(server, "python"))
        agent = ensure_agent(ex, workdir)
        base = f"{workdir.rstrip('/')}/soak/{run.campaign.name}-watch-{uuid.uuid4().hex[:8]}"
        run.create_owned(ex, base)  # marked for this campaign: removed by containment at the end
        args = ["--watchdog", repr(_watch_interval(window)), "--until", repr(until_unix), *health_args]
        for inst in instances:
            args += ["--engine-pid", str(inst.handle.pid), "--engine-start", repr(float(inst.handle.start_time)),
                     "--health-url", inst.endpoint_url + "/health"]
        if run.profile.soak.restart_engine:
            ex.write_file(f"{base}/engine-restart.json", _restart_specs(instances), mode=0o600)
            args += ["--restart-json", f"{base}/engine-restart.json"]
        wh = start_watch(ex, python=python, agent=agent, workdir=base, local_dir=watch_dir(run), watch_args=args)
        run.gate_dir.record_command(server.name, wh.handle.command)
    except (RemoteError, InfraError) as exc:
        run.fault(f"{server.name}: the engine node's watchdog could not be started", exc)
        return {"watch": None, "watch_error": str(exc)}
    return {"watch": wh.to_json(), "watch_base": base}


def _write_traces(ex: Executor, base: str, profile: Profile) -> None:
    """The soak's requests and its probe set (the first PROBE_SET of them, renamed) on the load's node."""
    wl = point_workload(profile)
    ex.write_file(f"{base}/requests.jsonl", _trace(list(wl.measure)))
    probes = [s.with_id(f"probe-{i}") for i, s in enumerate(list(wl.measure)[:PROBE_SET])]
    ex.write_file(f"{base}/probes.jsonl", _trace(probes))


def _soak_args(profile: Profile, base: str, client: Node, instances: list[EngineInstance], window: float,
               health_args: list[str], *, watched: bool) -> list[str]:
    """The node agent's ``soak`` command line: the traces, the level, the windows, the node health to
    sample, every instance's endpoint (and its process, when the soak watches the engine itself)."""
    soak = profile.soak
    args = ["--model", instances[0].plan.served_model_name, "--api", profile.load.api,
            "--trace", f"{base}/requests.jsonl", "--probe-trace", f"{base}/probes.jsonl",
            "--duration", repr(float(soak.duration)), "--window", repr(window),
            "--concurrency", str(soak.concurrency), "--timeout", repr(float(profile.load.request_timeout)),
            "--watchdog", repr(_watch_interval(window))]
    args += health_args
    if soak.request_rate:
        args += ["--request-rate", repr(float(soak.request_rate))]
    if profile.engine.api_key_env:
        args += ["--api-key-env", profile.engine.api_key_env]
    for other in instances:  # in instance order: record i of the soak names instance i
        url = other.plan.url_for(client.name)  # the engine's loopback only on its own node
        args += ["--endpoint", url, "--health-url", url + "/health"]
        if watched:
            args += ["--engine-pid", str(other.handle.pid),
                     "--engine-start", repr(float(other.handle.start_time))]
    return args


def _start(run: GateRun, target: Optional[StorageTarget], target_node: Optional[Node]) -> dict[str, Any]:
    _stop_stale_soak(run)
    profile = run.profile
    arm = profile.arm(profile.candidate)
    server = run.server_nodes()[0]
    client = run.client_node(server)
    engine = get_engine(profile.engine.kind)
    instances = _start_instances(run, engine, server, arm)
    watch: dict[str, Any] = {}
    try:
        inst = instances[0]
        if len(instances) > 1:
            run.notes.append(f"the soak drives all {len(instances)} engine instances, requests round-robin; the "
                             "drift and error checks are over their pooled windows; the probe set goes to each")
        if profile.model.nodes_per_instance > 1:
            run.notes.append("only the processes on the engine's first node are watched; its Ray workers on "
                             "other nodes are seen through /health only")
        soak = profile.soak
        window = float(soak.window)
        watched = client.name == server.name
        # Node health is sampled where the engine runs (its KV target, its accelerators, its
        # kernel log): by the soak when that is the load's node, else by the engine node's watchdog.
        health_args, sampled = _node_health(server, target, target_node, window)
        if not watched:
            grace = max(600.0, 3 * window) + 2 * float(profile.load.request_timeout)
            watch = _start_engine_watch(run, server, instances, until_unix=time.time() + float(soak.duration) + grace,
                                        window=window, health_args=health_args)
        ex = run.executor(client.name)
        workdir = str(run.inventory.setting(client, "workdir"))
        python = str(run.inventory.setting(client, "python"))
        agent = ensure_agent(ex, workdir)
        base = f"{workdir.rstrip('/')}/soak/{run.campaign.name}-{uuid.uuid4().hex[:8]}"
        run.create_owned(ex, base)  # marked for this campaign: removed by containment at the end
        _write_traces(ex, base, profile)
        # the load's node is sampled too (its kernel log: network faults on the client side)
        client_health = health_args if watched else _node_health(client, target, target_node, window)[0]
        args = _soak_args(profile, base, client, instances, window, client_health, watched=watched)
        if soak.restart_engine and watched:
            ex.write_file(f"{base}/engine-restart.json", _restart_specs(instances), mode=0o600)
            args += ["--restart-json", f"{base}/engine-restart.json"]
        sh = start_soak(ex, python=python, agent=agent, workdir=base, local_dir=soak_dir(run), soak_args=args)
        run.gate_dir.record_command(client.name, sh.handle.command)
    except BaseException:
        if watch.get("watch"):
            try:
                wh = WatchHandle.from_json(watch["watch"])
                run.executor(wh.node).stop(wh.handle, grace=10.0)
            except (RemoteError, InfraError) as exc:
                run.warn("could not stop the engine node's watchdog", exc)
        _stop_instances(run, engine, instances, arm)
        raise
    state = {"handle": sh.to_json(), "base": base, "instance": inst.to_json(),
             "instances": [i.to_json() for i in instances], "engine_watched": watched, **watch,
             **sampled, "health_on_engine_node": not watched, "started_unix": time.time(),
             "duration_s": float(soak.duration), "window_s": window, "warmup_s": float(soak.warmup),
             "server": server.name, "client": client.name}
    run.gate_dir.mark_step_done("soak/start", state)
    return state


def _status_line(w: dict[str, Any], elapsed: float, total: float) -> str:
    p50 = w.get("ttft_p50_ms")
    return (f"window {w.get('index')}: {w.get('ok')} ok, {w.get('failed')} failed, TTFT p50 "
            f"{'-' if p50 is None else f'{p50:.0f} ms'}, {float(w.get('throughput_tok_s') or 0):.1f} tok/s, "
            f"restarts {w.get('restarts_so_far')}; {elapsed:.0f}/{total:.0f} s")


def _soak_nodes(state: dict[str, Any]) -> list[str]:
    """The nodes the soak's detached processes run on: the load's, and the engine's watchdog's."""
    watch = state.get("watch") or {}
    return [str(state["handle"]["node"]), *([str(watch["node"])] if watch.get("node") else [])]


def follow(run: GateRun, state: dict[str, Any], *, poll_s: float = 1.0,
           on_window: Optional[Callable[[dict[str, Any]], None]] = None) -> bool:
    """Pull until the soak ends; True when it ended, False when the node stayed unreachable past
    the soak's planned end plus a grace period (a fault is recorded; what was pulled is kept)."""
    sh = SoakHandle.from_json(state["handle"])
    sh.local_dir = str(soak_dir(run))  # the campaign directory may have moved
    total = float(state["duration_s"])
    grace = max(120.0, 3 * float(state["window_s"]))
    deadline = float(state["started_unix"]) + total + grace
    progress = Progress("G4 soak", enabled=run.progress, interval=0.0)
    last_error: Optional[BaseException] = None
    wh = _watch_handle(run, state)
    watch_warned = False
    while True:
        if wh is not None:
            # The engine node's watchdog: pulled as it goes (a status shows a restart at once);
            # an unreachable engine node does not stop the soak from being followed, and what
            # was not pulled now is pulled at the end (by offset: nothing lost or duplicated).
            try:
                for e in pull_watch(run.executor(wh.node), wh)[1]:
                    if e.get("event") in ("restart", "engine_relaunched"):
                        progress.status(f"engine node {wh.node}: {e.get('event')} {e.get('detail') or ''}", force=True)
            except (RemoteError, InfraError) as exc:
                run.drop_executor(wh.node)
                if not watch_warned:
                    run.warn(f"{wh.node}: the engine node's watchdog could not be pulled (tried again)", exc)
                    watch_warned = True
        try:
            got = pull(run.executor(sh.node), sh)
            last_error = None
        except (RemoteError, InfraError) as exc:
            last_error = exc
            run.drop_executor(sh.node)
            if time.time() > deadline:
                run.fault(f"{sh.node}: the soak could not be reached after its planned end", exc)
                return False
            time.sleep(max(poll_s, 2.0))
            continue
        note_node_actors(run, soak_dir(run), _soak_nodes(state))
        for w in got.windows:
            elapsed = float(w.get("ended_unix") or 0) - float(state["started_unix"])
            progress.status(_status_line(w, elapsed, total), force=True)
            if on_window is not None:
                on_window(w)
        if not got.state.running:
            if last_error is None:
                return True
        time.sleep(poll_s)


def _watch_handle(run: GateRun, state: dict[str, Any]) -> Optional[WatchHandle]:
    if not state.get("watch"):
        return None
    wh = WatchHandle.from_json(state["watch"])
    wh.local_dir = str(watch_dir(run))  # the campaign directory may have moved
    return wh


def _finish_watch(run: GateRun, state: dict[str, Any]) -> None:
    """Stop the engine node's watchdog (first: before the engine is stopped, which it would
    count) and pull its events to their end; a failure leaves them short of ``watch_end``, so the
    restarts check is NOT_RUN (unless a restart was already seen)."""
    wh = _watch_handle(run, state)
    if wh is None:
        return
    try:
        st = stop_watch(run.executor(wh.node), wh, timeout_s=max(30.0, 4 * _watch_interval(float(state["window_s"]))))
        if st.exit_code not in (0, None):
            run.warn(f"{wh.node}: the engine node's watchdog ended with exit code {st.exit_code}")
    except (RemoteError, InfraError) as exc:
        run.fault(f"{wh.node}: the engine node's watchdog could not be stopped and pulled", exc)
        return
    try:
        (watch_dir(run) / "agent.err").write_text(run.executor(wh.node).tail_log(wh.handle, lines=200))
    except (RemoteError, OSError) as exc:
        run.warn("could not copy the engine watchdog's log", exc)


def _finish(run: GateRun, state: dict[str, Any]) -> dict[str, Any]:
    done = run.gate_dir.step_done("soak/finished")
    if done is not None:
        return dict(done)
    profile = run.profile
    arm = profile.arm(profile.candidate)
    engine = get_engine(profile.engine.kind)
    _finish_watch(run, state)
    ex = run.executor(state["server"])
    insts = [EngineInstance.from_json(x, ex) for x in state.get("instances") or [state["instance"]]]
    alive: Optional[bool]
    try:
        alive = all(ex.poll(i.handle).running for i in insts)  # every instance, not only the first
    except RemoteError as exc:
        run.warn("could not poll the engine at the end of the soak", exc)
        alive = None
    sh = SoakHandle.from_json(state["handle"])
    try:
        (soak_dir(run) / "agent.err").write_text(run.executor(sh.node).tail_log(sh.handle, lines=200))
    except (RemoteError, OSError) as exc:
        run.warn("could not copy the soak agent's log", exc)
    _stop_relaunched(run, state, ex)  # first: the KV files are removed once no engine writes them
    _stop_instances(run, engine, insts, arm)
    _remove_node_copy(run, state)
    out = {"engine_alive_at_end": alive}
    run.gate_dir.mark_step_done("soak/finished", out)
    return out


# Stops a process group by its leader's pid only if the leader is still the process that was
# started (its start time, from /proc, within 2 s of the recorded one).
_KILL = r"""
import os, signal, sys, time
pid, start = int(sys.argv[1]), float(sys.argv[2])
def st():
    try:
        s = open(f"/proc/{pid}/stat").read()
        ticks = int(s[s.rindex(")") + 2:].split()[19])
        bt = next(int(x.split()[1]) for x in open("/proc/stat") if x.startswith("btime "))
        return bt + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, StopIteration):
        return None
t = st()
if t is None or abs(t - start) >= 2.0:
    print("gone"); sys.exit(0)
os.killpg(pid, signal.SIGTERM)
for _ in range(100):
    time.sleep(0.1)
    if st() is None:
        print("stopped"); sys.exit(0)
os.killpg(pid, signal.SIGKILL)
print("killed")
"""


def _stop_relaunched(run: GateRun, state: dict[str, Any], ex: Any) -> None:
    """Stop the engines the soak agent relaunched (profile ``soak.restart_engine``) and keep their logs."""
    python = str(run.inventory.setting(run.inventory.node(state["server"]), "python"))
    # relaunched by the soak (engine on the soak's node) or by the engine node's watchdog
    sources: list[tuple[Path, AgentLoad, str]] = [(soak_dir(run), SoakHandle.from_json(state["handle"]), "")]
    wh = _watch_handle(run, state)
    if wh is not None:
        sources.append((watch_dir(run), wh, "watch-"))
    for local, agent, prefix in sources:
        for e in read_local_jsonl(local / "events.jsonl"):
            if e.get("event") != "engine_relaunched" or e.get("start") is None:
                continue
            try:
                res = ex.run([python, "-I", "-S", "-c", _KILL, str(int(e["pid"])), repr(float(e["start"]))],
                             check=False, timeout=60)
                run.notes.append(f"relaunched engine instance {e.get('instance', 0)} pid {e['pid']}: "
                                 f"{res.stdout.strip() or res.stderr.strip()}")
                log = str(e.get("log") or "")
                if log and "/" not in log:
                    dest = run.gate_dir.evidence_path(f"engine/{profile_arm(run)}/{prefix}{log}")
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    dest.write_bytes(run.executor(agent.node).read_file(agent.remote(log)))
            except (RemoteError, OSError) as exc:
                run.fault(f"could not stop the engine the soak relaunched (pid {e.get('pid')})", exc)


def _remove_node_copy(run: GateRun, state: dict[str, Any]) -> None:
    """The soak's directory on the node goes once every window's records are here (by
    containment: only the directory this campaign created and marked)."""
    from harness.pipelines.g4.soakrun import read_local_jsonl

    base = state.get("base")
    if not base:
        return
    local = soak_dir(run)
    missing = [str(w.get("file")) for w in read_local_jsonl(local / "windows.jsonl")
               if not (local / str(w.get("file"))).exists()]
    if missing or not (local / "done.json").exists():
        run.warn(f"kept the soak's files on the node ({base}): "
                 + (f"{len(missing)} window file(s) not copied" if missing else "the soak left no done.json"))
        return
    sh = SoakHandle.from_json(state["handle"])
    run.remove_owned(run.executor(sh.node), str(base))
    wh = _watch_handle(run, state)
    if wh is not None and state.get("watch_base"):
        if (watch_dir(run) / "done.json").exists():
            run.remove_owned(run.executor(wh.node), str(state["watch_base"]))
        else:
            run.warn(f"kept the engine watchdog's files on {wh.node} ({state['watch_base']}): not pulled to its end")


def _verified_windows(run: GateRun) -> WindowCheck:
    """The node's window figures checked against the copied record files (``soakverify``); what
    disagrees or is missing is a fault, and the records' figures are the ones decided on."""
    local = soak_dir(run)
    check = verify_windows(local, read_local_jsonl(local / WINDOWS_INDEX), workers=2)
    run.gate_dir.write_evidence_json(f"{SOAK_DIR}/windows-verified.json", check.to_json())
    if check.mismatched:
        run.fault(f"{len(check.mismatched)} of {len(check.windows)} window summaries of the node disagree with "
                  f"their records (evidence/{SOAK_DIR}/windows-verified.json); the records' figures are used. "
                  f"First: {check.mismatched[0]}")
    if check.missing:
        run.fault(f"{len(check.missing)} window record file(s) were not copied, their figures are the node's "
                  f"summary, unverified: " + "; ".join(check.missing[:5]))
    for text in check.unwritten:
        run.notes.append(text)
    return check


def profile_arm(run: GateRun) -> str:
    return run.profile.arm(run.profile.candidate).name


def run_g4(run: GateRun, *, wait: bool = True,
           on_window: Optional[Callable[[dict[str, Any]], None]] = None) -> tuple[dict[str, Any], dict[str, Any]]:
    profile = run.profile
    arm = profile.arm(profile.candidate)
    target: Optional[StorageTarget] = None
    node: Optional[Node] = None
    if arm.storage is not None:
        node = run.node_with_target(arm.storage)
        target = node.target(arm.storage)
    before = _fio(run, node, target, "before") if node and target else None
    state = run.gate_dir.step_done("soak/start")
    if state is None:
        state = _start(run, target, node)
        note_node_actors(run, soak_dir(run), _soak_nodes(state))
    if not wait:
        remaining = float(state["started_unix"]) + float(state["duration_s"]) - time.time()
        raise SoakDetached(f"the soak of campaign {run.campaign.name!r} runs on {state['client']} "
                           f"(about {max(0.0, remaining):.0f} s left)", campaign=run.campaign.name,
                           remaining_s=remaining)
    # A few looks per window, but not more than one every 2 s: each look runs several commands on
    # the node, and on a compressed soak's short windows they would compete with the load itself.
    ended = follow(run, state, poll_s=min(10.0, max(2.0, float(state["window_s"]) / 4)), on_window=on_window)
    fin = _finish(run, state) if ended else {"engine_alive_at_end": None}
    after = _fio(run, node, target, "after") if node and target and ended else None
    check = _verified_windows(run) if ended else None
    windows = check.windows if check is not None else None
    measured, charts = soak_measured(
        soak_dir(run), windows=windows, duration_target_s=float(state["duration_s"]), window_s=float(state["window_s"]),
        nvme=state.get("nvme") or [], md_arrays=state.get("md_arrays") or [], fio_before=before, fio_after=after,
        engine_watched=bool(state.get("engine_watched")), engine_alive_at_end=fin.get("engine_alive_at_end"),
        warmup_s=float(state.get("warmup_s") or 0.0), accel_tools=state.get("accel_tools") or [],
        instances=run.profile.model.instances_per_node, concurrency=run.profile.soak.concurrency,
        request_rate=run.profile.soak.request_rate,
        watch=watch_dir(run) if state.get("watch") else None, engine_node=str(state.get("server") or ""),
        health_from_watch=bool(state.get("health_on_engine_node")))
    if node and target:  # the level before the soak must reproduce, or retention decides nothing
        soak = measured["soak"]
        soak["read_bw_retention"] = control_for_run(run, node, target, soak["read_bw_retention"], before)
    if not ended:
        measured["soak"]["duration"] = measurement(None, detail="the soak could not be followed to its end")
    record_replacements(run, soak_dir(run))
    if (soak_dir(run) / "done.json").exists() is False and ended:
        run.fault("the soak agent ended without writing done.json (see evidence/soak/agent.err)")
    charts["engine_logs"] = f"evidence/engine/{arm.name}/instance0-logs"
    if check is not None:
        charts["verified"] = check.to_json()
    return measured, {"soak": charts}

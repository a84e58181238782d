"""Run fio on nodes through the executor: one node, many nodes in parallel, or fio's client/server
mode for the aggregate bandwidth of several nodes at once.

Evidence: the raw fio output is copied back byte for byte (``executor.get``) as
``fio-<node>-<target>.json``, next to the job file and the exact command; the figures in the result
come from parsing that copy, so what is reported is what fio wrote.
"""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional, Union

from harness.config.inventory import StorageTarget
from harness.config.profile import FioSpec
from harness.errors import InputError
from harness.probes.backing import check_backing
from harness.probes.errors import ProbeError, ProbeRefused
from harness.probes.fio_jobs import (
    FioJobFile,
    TargetInfo,
    buffered,
    build_jobfile,
    check_target,
    choose_engine,
    describe_command,
    fio_command,
    fio_safe_path,
    fio_version,
    inspect_target,
)
from harness.probes.fio_parse import (
    DirectionSummary,
    FioOutput,
    GroupSummary,
    parse_fio_file,
    summarise_groups,
)
from harness.probes.iobuffers import with_huge_page_buffers
from harness.probes.roundsrecord import RoundsRecord
from harness.probes.steady import SteadyState, check_steady_state
from harness.progress import Progress
from harness.remote.base import DetachedHandle, Executor, RemoteError
from harness.remote.fleet import Fleet
from harness.remote.scratch import create_owned_dir, remove_owned_dir

log = logging.getLogger(__name__)

ProgressLike = Union[Progress, Callable[[str], None], None]

_SAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _safe(name: str) -> str:
    return _SAFE.sub("_", name)


def _say(progress: ProgressLike, text: str) -> None:
    if progress is None:
        return
    if isinstance(progress, Progress):
        progress.status(text, force=True)
    else:
        progress(text)


@dataclass(frozen=True)
class JobSetResult:
    """The figures of one job set on one target (fio's group, summed over its jobs)."""

    name: str
    read_bw_bytes: Optional[float]
    write_bw_bytes: Optional[float]
    read_iops: Optional[float]
    write_iops: Optional[float]
    read: Optional[DirectionSummary]
    write: Optional[DirectionSummary]
    errors: int
    steady_state: Optional[SteadyState]
    rounds: Optional[RoundsRecord] = None  # measured in rounds (harness.probes.fio_rounds)

    @classmethod
    def from_group(cls, name: str, group: GroupSummary, steady: Optional[SteadyState]) -> JobSetResult:
        return cls(
            name=name,
            read_bw_bytes=group.read.bw_bytes if group.read else None,
            write_bw_bytes=group.write.bw_bytes if group.write else None,
            read_iops=group.read.iops if group.read else None,
            write_iops=group.write.iops if group.write else None,
            read=group.read,
            write=group.write,
            errors=group.errors,
            steady_state=steady,
        )

    def to_json(self) -> dict[str, object]:
        return {
            "read_bw_bytes": self.read_bw_bytes,
            "write_bw_bytes": self.write_bw_bytes,
            "read_iops": self.read_iops,
            "write_iops": self.write_iops,
            "read": self.read.to_json() if self.read else None,
            "write": self.write.to_json() if self.write else None,
            "errors": self.errors,
            "steady_state": self.steady_state.to_json() if self.steady_state else None,
            **({"rounds": self.rounds.to_json()} if self.rounds is not None else {}),
        }


@dataclass(frozen=True)
class FioProbeResult:
    """One fio probe of one target on one node (or, in client/server mode, of several nodes)."""

    node: str
    target: str
    engine: str
    fio_version: Optional[str]
    job_sets: Mapping[str, JobSetResult]
    raw_output: Path  # fio's output exactly as fio wrote it
    jobfile: Path
    command: str
    bw_logs: tuple[Path, ...] = ()
    hosts: tuple[str, ...] = ()
    per_host: Mapping[str, Mapping[str, JobSetResult]] = field(default_factory=dict)

    def to_json(self, relative_to: Optional[Path] = None) -> dict[str, object]:
        def rel(p: Path) -> str:
            if relative_to is not None:
                try:
                    return str(p.resolve().relative_to(relative_to.resolve()))
                except ValueError:
                    pass
            return str(p)

        out: dict[str, object] = {
            "node": self.node,
            "target": self.target,
            "engine": self.engine,
            "fio_version": self.fio_version,
            "job_sets": {k: v.to_json() for k, v in self.job_sets.items()},
            "evidence": {
                "raw_output": rel(self.raw_output),
                "jobfile": rel(self.jobfile),
                "bw_logs": [rel(p) for p in self.bw_logs],
            },
            "command": self.command,
        }
        if self.per_host:
            out["hosts"] = list(self.hosts)
            out["per_host"] = {
                h: {k: v.to_json() for k, v in sets.items()} for h, sets in self.per_host.items()
            }
        return out


# --------------------------------------------------------------------------------------------
# Bandwidth logs -> steady state


def bw_log_series(logs: Mapping[str, bytes], avg_msec: int) -> list[float]:
    """Sum windowed fio bandwidth logs (one file per job; ``time_ms, KiB/s, ddir, ...``) into one
    series of bytes/s per window, all jobs and directions together."""
    buckets: dict[int, float] = {}
    for name, data in logs.items():
        for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            parts = [p.strip() for p in line.split(",")]
            if len(parts) < 2 or not parts[0]:
                continue
            try:
                t_ms, kib_s = int(parts[0]), float(parts[1])
            except ValueError:
                raise ProbeError(
                    f"bandwidth log {name} line {n} is not 'time, value, ...': {line!r}", node="-"
                ) from None
            key = max(0, (t_ms + avg_msec // 2) // avg_msec - 1)  # fio logs near each window end
            buckets[key] = buckets.get(key, 0.0) + kib_s * 1024.0
    if not buckets:
        return []
    # The last window is usually partial (the job stopped inside it); keep complete windows only.
    keys = sorted(buckets)[:-1] if len(buckets) > 3 else sorted(buckets)
    return [buckets[k] for k in keys]


# --------------------------------------------------------------------------------------------
# One node


def _fio_path(executor: Executor, target: str) -> str:
    fio = executor.which("fio")
    if not fio:
        raise ProbeError(
            "fio is not installed on the node (not found on PATH)", node=executor.node, target=target
        )
    return fio


def probe_setup(executor: Executor, target: StorageTarget, spec: FioSpec, out_dir: Path,
                job_sets: Optional[Sequence[str]], run_id: Optional[str]
                ) -> tuple[list[str], str, str, str, TargetInfo]:
    """(job sets, run id, evidence file stem, fio path, target info): what every one-node probe
    settles before it checks the target."""
    sets = list(job_sets or spec.job_sets)
    run_id = run_id or time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"fio-{_safe(executor.node)}-{_safe(target.name)}"
    return sets, run_id, stem, _fio_path(executor, target.name), inspect_target(executor, target.path)


def run_fio_probe(
    executor: Executor,
    target: StorageTarget,
    spec: FioSpec,
    out_dir: Path,
    *,
    job_sets: Optional[Sequence[str]] = None,
    progress: ProgressLike = None,
    run_id: Optional[str] = None,
    steady_state: str = "log",
    owner: Optional[str] = None,
) -> FioProbeResult:
    """Run the profile's fio job sets on ``target`` of the executor's node and parse fio's output.

    ``steady_state``: "log" (default) judges steady state from fio's windowed bandwidth logs, which
    leave the run unchanged; "fio" also asks fio for its own steady-state detection (``ss=``, fio >=
    2.16, runtime >= 3 s) and judges fio's window samples, at the cost that fio may end a set early
    once its criterion holds; "off" records neither.

    Refuses (``ProbeRefused``) before writing anything when the target is a raw device and writes
    are not allowed, is a memory filesystem, is missing, or lacks free space. The files are written
    under ``<target.path>/kvgate-fio-<run-id>/`` and removed afterwards, also on failure.
    """
    if steady_state not in ("log", "fio", "off"):
        raise ValueError(f"steady_state must be 'log', 'fio' or 'off', not {steady_state!r}")
    node = executor.node
    sets, run_id, stem, fio, info = probe_setup(executor, target, spec, out_dir, job_sets, run_id)
    if info.exists:
        check_backing(executor, target)  # a memory-backed target is refused before anything is written
    check_target(executor, target, sets, int(spec.size) * spec.numjobs, info)
    raw_device = info.is_block_device  # S_ISBLK only: /dev/shm/x is a directory on tmpfs
    scratch = f"/tmp/kvgate-fio-{run_id}" if raw_device else f"{target.path.rstrip('/')}/kvgate-fio-{run_id}"
    fio_safe_path(scratch, what=f"scratch directory of target {target.name}")
    if raw_device:
        fio_safe_path(target.path, what=f"device of target {target.name}")
    owner = owner or f"kvgate-fio-{run_id}"
    _say(progress, f"{node}/{target.name}: preparing {scratch}")
    _make_scratch(executor, scratch, owner, target.name)
    try:
        executor.run(["mkdir", "-p", f"{scratch}/bwlogs"])
        engine, job, jobfile_remote, jobfile_local = _prepare_job(
            executor, target, spec, sets, fio, scratch, stem, out_dir, raw_device=raw_device,
            steady_state=steady_state)
        remote_out = f"{scratch}/{stem}.json"
        argv = fio_command(fio, jobfile_remote, remote_out)
        command = describe_command(argv)
        (out_dir / f"{stem}.cmd").write_text(command + "\n")
        _say(
            progress,
            f"{node}/{target.name}: fio {', '.join(sets)} with {engine} "
            f"(~{len(sets) * (spec.runtime + spec.ramp_time):.0f} s)",
        )
        raw_local = _run_fio(executor, argv, remote_out, out_dir / f"{stem}.json", _time_budget(spec, len(sets)),
                             target=target.name, command=command)
        parsed = parse_fio_file(raw_local, node=node)
        logs = (_fetch_bw_logs(executor, f"{scratch}/bwlogs", out_dir / f"{stem}-bwlogs")
                if steady_state != "off" else {})
        return FioProbeResult(
            node=node, target=target.name, engine=engine, fio_version=parsed.final.fio_version,
            job_sets=_job_set_results(parsed, sets, job, logs, node, target.name), raw_output=raw_local,
            jobfile=jobfile_local, command=command, bw_logs=tuple(sorted(p for ps in logs.values() for p in ps)),
        )
    finally:
        _cleanup(executor, scratch, owner)


def _prepare_job(executor: Executor, target: StorageTarget, spec: FioSpec, sets: Sequence[str], fio: str,
                 scratch: str, stem: str, out_dir: Path, *, raw_device: bool,
                 steady_state: str) -> tuple[str, FioJobFile, str, Path]:
    """Choose the I/O engine by a real read, write the job file on the node and as evidence."""
    engine = choose_engine(
        executor,
        target.path if raw_device else f"{scratch}/kvgate-engine-probe",
        target=target.name,
        preferred=spec.ioengine,
        fio=fio,
        remove_probe_file=not raw_device,
        direct=not buffered(target),
    )
    job = build_jobfile(
        spec,
        job_sets=list(sets),
        engine=engine,
        directory=None if raw_device else scratch,
        filename=target.path if raw_device else None,
        bw_log_dir=f"{scratch}/bwlogs" if steady_state != "off" else None,
        ss_window=_ss_window(executor, fio, spec) if steady_state == "fio" else None,
        direct=not buffered(target),
    )
    jobfile_remote = f"{scratch}/{stem}.fio"
    executor.write_file(jobfile_remote, job.text.encode())
    jobfile_local = out_dir / f"{stem}.fio"
    jobfile_local.write_text(job.text)
    return engine, job, jobfile_remote, jobfile_local


def _run_fio(executor: Executor, argv: list[str], remote_out: str, raw_local: Path, budget: float, *,
             target: str, command: str) -> Path:
    """Run fio and copy its JSON output back byte for byte (also when fio failed, as evidence)."""
    node = executor.node
    res = executor.run(argv, check=False, timeout=budget)
    got_output = executor.run(["test", "-s", remote_out], check=False).ok
    if got_output:
        executor.get(remote_out, str(raw_local))
    if not res.ok:
        raise ProbeError(
            f"fio exited with {res.exit_code}",
            node=node,
            target=target,
            detail=f"command: {command}\n{(res.stderr or res.stdout)[-2000:]}",
        )
    if not got_output:
        raise ProbeError("fio wrote no output file", node=node, target=target, detail=res.stderr[-2000:])
    return raw_local


LAYOUT_FLOOR_BYTES_PER_S = 50e6  # slowest plausible file layout; only bounds the wait, never a result


def _time_budget(spec: FioSpec, sets: int) -> float:
    """How long fio may run before it is declared hung: the sets' runtimes, the file layout at a
    pessimistic rate, and start-up slack."""
    layout = spec.size * spec.numjobs / LAYOUT_FLOOR_BYTES_PER_S
    return sets * (spec.runtime + spec.ramp_time) + layout + 300.0


def _make_scratch(executor: Executor, scratch: str, owner: str, target: str) -> None:
    """Create the run directory fresh and mark it for ``owner`` (only such a directory is ever
    removed, see ``harness.remote.scratch``)."""
    try:
        state = create_owned_dir(executor, scratch, owner)
    except ValueError as exc:
        raise ProbeRefused(str(exc), node=executor.node, target=target) from None
    if state not in ("created", "ours"):
        raise ProbeRefused(f"{scratch} already exists and is not this run's directory ({state}); "
                           "kvgate writes only into a directory it created", node=executor.node, target=target)


def _cleanup(executor: Executor, scratch: str, owner: str) -> None:
    # Only a directory this run created and marked (containment, not a name pattern).
    try:
        removal = remove_owned_dir(executor, scratch, owner)
    except RemoteError:
        return  # the node went away: nothing more can be done from here; the error in flight wins
    if removal.outcome in ("refused", "failed"):
        log.warning("%s", removal.describe())


def _fetch_bw_logs(executor: Executor, remote_dir: str, local_dir: Path) -> dict[str, list[Path]]:
    """Copy every bandwidth log back; returns {job set: [local paths]}."""
    listing = executor.run(["find", remote_dir, "-maxdepth", "1", "-name", "*_bw*.log"], check=False)
    out: dict[str, list[Path]] = {}
    names = [ln.strip() for ln in listing.stdout.splitlines() if ln.strip()]
    if names:
        local_dir.mkdir(parents=True, exist_ok=True)
    for remote in names:
        base = remote.rsplit("/", 1)[-1]
        set_name = base.split("_bw", 1)[0]
        local = local_dir / base
        executor.get(remote, str(local))
        out.setdefault(set_name, []).append(local)
    return out


def _ss_window(executor: Executor, fio: str, spec: FioSpec) -> Optional[int]:
    """fio's steady-state window in whole seconds, or None where fio cannot do it (fio < 2.16, or a
    runtime too short for three one-second samples)."""
    version = fio_version(executor, fio)
    if version is None or version < (2, 16) or spec.runtime < 3:
        return None
    return int(max(3, min(spec.runtime, spec.runtime // 2)))


def _job_set_results(
    parsed: FioOutput,
    sets: Sequence[str],
    job: FioJobFile,
    logs: Mapping[str, list[Path]],
    node: str,
    target: str,
) -> dict[str, JobSetResult]:
    groups = summarise_groups(parsed.final.jobs)
    by_name = {g.name: g for g in groups}
    results: dict[str, JobSetResult] = {}
    for name in sets:
        group = by_name.get(name)
        if group is None:
            raise ProbeError(
                f"fio output has no result for job set {name!r} (groups: {', '.join(by_name) or 'none'})",
                node=node,
                target=target,
            )
        steady = None
        fio_ss = next((j.steadystate for j in parsed.final.jobs if j.name == name and j.steadystate), None)
        if fio_ss is not None and fio_ss.snia.samples >= 3:
            steady = replace(
                fio_ss.snia,
                source=f"fio ss= window samples (fio's own criterion "
                f"{fio_ss.criterion}: {'attained' if fio_ss.attained else 'not attained'})",
            )
        elif name in logs and job.log_avg_msec:
            series = bw_log_series({p.name: p.read_bytes() for p in logs[name]}, job.log_avg_msec)
            steady = check_steady_state(series, source=f"fio bandwidth log, {job.log_avg_msec} ms windows")
        results[name] = JobSetResult.from_group(name, group, steady)
    return results


# --------------------------------------------------------------------------------------------
# Many nodes in parallel


@dataclass(frozen=True)
class ProbeFailure:
    node: str
    target: str
    error: BaseException


def run_fio_probes(
    jobs: Sequence[tuple[Executor, StorageTarget]],
    spec: FioSpec,
    out_dir: Path,
    *,
    job_sets: Optional[Sequence[str]] = None,
    progress: ProgressLike = None,
    max_parallel: int = 16,
) -> list[Union[FioProbeResult, ProbeFailure]]:
    """One probe per (node, target), nodes in parallel (targets of one node one after the other, so
    they do not compete for the same CPU and PCIe links). A failure on one node never hides the
    others: it is returned in place of that node's result."""
    by_node: dict[str, list[StorageTarget]] = {}
    executors: dict[str, Executor] = {}
    for ex, tgt in jobs:
        executors.setdefault(ex.node, ex)
        by_node.setdefault(ex.node, []).append(tgt)

    def one_node(ex: Executor) -> list[Union[FioProbeResult, ProbeFailure]]:
        out: list[Union[FioProbeResult, ProbeFailure]] = []
        for tgt in by_node[ex.node]:
            try:
                out.append(run_fio_probe(ex, tgt, spec, out_dir, job_sets=job_sets, progress=progress))
            except (ProbeError, ProbeRefused, RemoteError, InputError) as exc:
                out.append(ProbeFailure(ex.node, tgt.name, exc))
        return out

    fleet = Fleet(executors)  # not closed here: the executors belong to the caller
    outcome = fleet.map(one_node, max_workers=max_parallel)
    results: list[Union[FioProbeResult, ProbeFailure]] = []
    for node, o in outcome.outcomes.items():
        if o.ok and o.value is not None:
            results.extend(o.value)
        else:  # an unexpected error escaped one node: every target of it is a failure, others stand
            err = o.error or ProbeError("no result", node=node)
            results.extend(ProbeFailure(node, t.name, err) for t in by_node[node])
    return results


# --------------------------------------------------------------------------------------------
# Client/server mode: aggregate bandwidth of several nodes


@dataclass(frozen=True)
class ServerSpec:
    """One node taking part in a client/server run: its executor, its target, and the address the
    client reaches its fio server on."""

    executor: Executor
    target: StorageTarget
    address: str
    port: int = 8765


def _listening_ports(executor: Executor) -> set[int]:
    """TCP ports in LISTEN state on the node, from /proc/net/tcp{,6} (fio --server prints nothing
    unbuffered, and a test connection would be taken as a client by the server)."""
    ports: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            text = executor.read_file(table).decode("ascii", "replace")
        except RemoteError:
            continue
        for line in text.splitlines()[1:]:
            cols = line.split()
            if len(cols) > 3 and cols[3] == "0A":  # TCP_LISTEN
                ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    return ports


def _wait_listening(server: ServerSpec, handle: DetachedHandle, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    delay = 0.02
    while time.monotonic() < deadline:
        state = server.executor.poll(handle)
        if not state.running:
            log = server.executor.tail_log(handle, stream="stderr")
            raise ProbeError(
                f"fio --server exited ({state.reason or state.exit_code})",
                node=server.executor.node,
                target=server.target.name,
                detail=log,
            )
        if server.port in _listening_ports(server.executor):
            return
        time.sleep(delay)
        delay = min(0.5, delay * 2)
    raise ProbeError(
        f"fio --server did not listen on {server.address},{server.port} within {timeout:.0f} s",
        node=server.executor.node,
        target=server.target.name,
    )


def run_fio_client_server(
    client: Executor,
    servers: Sequence[ServerSpec],
    spec: FioSpec,
    out_dir: Path,
    *,
    job_sets: Optional[Sequence[str]] = None,
    progress: ProgressLike = None,
    run_id: Optional[str] = None,
) -> FioProbeResult:
    """Start ``fio --server`` detached on every node, run ``fio --client`` from ``client`` with one
    job file per server, and sum the bandwidth across hosts per job set. fio's own "All clients"
    figure stays in the raw output; the result reports the per-host sum and each host's figures
    (keyed by node name, or "node/target" when one node serves several targets)."""
    sets = list(job_sets or spec.job_sets)
    run_id = run_id or time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]
    out_dir.mkdir(parents=True, exist_ok=True)
    fio_client = _fio_path(client, "client")
    handles: list[tuple[ServerSpec, DetachedHandle]] = []
    scratches: list[tuple[Executor, str]] = []
    client_dir = f"/tmp/kvgate-fio-{run_id}-client"
    owner = f"kvgate-fio-{run_id}"  # marks every directory of this run (harness.remote.scratch)
    label_of: dict[str, str] = {}  # "address:port" as fio names the host -> our label for it
    shared: dict[str, int] = {}
    for srv in servers:
        shared[srv.executor.node] = shared.get(srv.executor.node, 0) + 1
    engines: set[str] = set()
    try:
        _make_scratch(client, client_dir, owner, "client")
        scratches.append((client, client_dir))
        argv = [fio_client, "--output-format=json+"]
        local_jobfiles = []
        for srv in servers:
            engine, remote_job, local = _start_server(client, srv, spec, sets, run_id, client_dir, out_dir,
                                                      handles, scratches, progress)
            engines.add(engine)
            local_jobfiles.append(local)
            argv += [f"--client=ip:{srv.address},{srv.port}", remote_job]
            label_of[f"{srv.address}:{srv.port}"] = (
                srv.executor.node if shared.get(srv.executor.node, 0) < 2
                else f"{srv.executor.node}/{srv.target.name}"
            )
        remote_out = f"{client_dir}/fio-cluster.json"
        argv.insert(2, f"--output={remote_out}")
        command = describe_command(argv)
        (out_dir / "fio-cluster.cmd").write_text(command + "\n")
        _say(progress, f"fio --client to {len(servers)} server(s): {', '.join(sets)}")
        budget = _time_budget(spec, len(sets))
        res = client.run(argv, check=False, timeout=budget)
        raw_local = out_dir / "fio-cluster.json"
        if client.run(["test", "-s", remote_out], check=False).ok:
            client.get(remote_out, str(raw_local))
        if not res.ok:
            raise ProbeError(
                f"fio --client exited with {res.exit_code}",
                node=client.node,
                detail=f"command: {command}\n{(res.stderr or res.stdout)[-2000:]}",
            )
        if not raw_local.exists():
            raise ProbeError("fio --client wrote no output", node=client.node, detail=res.stdout[-2000:])
        return _cluster_result(client.node, raw_local, label_of, sets, servers, engines, local_jobfiles, command)
    finally:
        _stop_servers(handles, scratches, owner)


def _stop_servers(handles: Sequence[tuple[ServerSpec, DetachedHandle]],
                  scratches: Sequence[tuple[Executor, str]], owner: str) -> None:
    for srv, handle in handles:
        try:
            srv.executor.stop(handle, grace=5.0)
        except RemoteError:
            pass
    for ex, path in scratches:
        _cleanup(ex, path, owner)


def _start_server(client: Executor, srv: ServerSpec, spec: FioSpec, sets: Sequence[str], run_id: str,
                  client_dir: str, out_dir: Path, handles: list[tuple[ServerSpec, DetachedHandle]],
                  scratches: list[tuple[Executor, str]], progress: ProgressLike) -> tuple[str, str, Path]:
    """Check the server's target, write its job file (on the client and as evidence) and start ``fio
    --server`` there; the handle and scratch directories are appended for the caller's cleanup.
    Returns (I/O engine, job file on the client, local copy)."""
    ex = srv.executor
    fio = _fio_path(ex, srv.target.name)
    info = inspect_target(ex, srv.target.path)
    check_target(ex, srv.target, sets, int(spec.size) * spec.numjobs, info)
    if info.is_block_device:
        raise ProbeRefused("client/server mode probes filesystem targets only", node=ex.node, target=srv.target.name)
    scratch = f"{srv.target.path.rstrip('/')}/kvgate-fio-{run_id}"
    fio_safe_path(scratch, what=f"scratch directory of target {srv.target.name}")
    _make_scratch(ex, scratch, f"kvgate-fio-{run_id}", srv.target.name)
    scratches.append((ex, scratch))
    engine = choose_engine(
        ex, f"{scratch}/kvgate-engine-probe", target=srv.target.name, preferred=spec.ioengine, fio=fio
    )
    job = build_jobfile(spec, job_sets=list(sets), engine=engine, directory=scratch)
    stem = f"fio-{_safe(ex.node)}-{_safe(srv.target.name)}"
    remote_job = f"{client_dir}/{stem}.fio"
    client.write_file(remote_job, job.text.encode())
    local = out_dir / f"{stem}.fio"
    local.write_text(job.text)
    _say(progress, f"{ex.node}: starting fio --server on {srv.address}:{srv.port}")
    if srv.port in _listening_ports(ex):
        raise ProbeRefused(
            f"port {srv.port} is already in use on the node; choose another fio server port",
            node=ex.node,
            target=srv.target.name,
        )
    _make_scratch(ex, f"{scratch}-server", f"kvgate-fio-{run_id}", srv.target.name)
    scratches.append((ex, f"{scratch}-server"))
    handle = ex.start_detached(
        with_huge_page_buffers([fio, f"--server=ip:{srv.address},{srv.port}"]),
        workdir=f"{scratch}-server",
        name=f"fio-server-{run_id}",
    )
    handles.append((srv, handle))
    _wait_listening(srv, handle)
    return engine, remote_job, local


def _cluster_result(client_node: str, raw_local: Path, label_of: Mapping[str, str], sets: Sequence[str],
                    servers: Sequence[ServerSpec], engines: set[str], local_jobfiles: Sequence[Path],
                    command: str) -> FioProbeResult:
    """The per-host sums and each host's own figures from fio --client's json+ output."""
    parsed = parse_fio_file(raw_local)
    doc = parsed.final
    hosts = tuple(dict.fromkeys(label_of.get(j.host, j.host) for j in doc.jobs))
    cluster = {g.name: g for g in summarise_groups(doc.jobs)}
    per_host: dict[str, dict[str, JobSetResult]] = {}
    for host_key, node_name in label_of.items():
        groups = {g.name: g for g in summarise_groups([j for j in doc.jobs if j.host == host_key])}
        per_host[node_name] = {n: JobSetResult.from_group(n, groups[n], None) for n in sets if n in groups}
    missing = [n for n in sets if n not in cluster]
    if missing:
        raise ProbeError(f"fio client output lacks job set(s) {', '.join(missing)}", node=client_node)
    return FioProbeResult(
        node="+".join(hosts),
        target="+".join(s.target.name for s in servers),
        engine="/".join(sorted(engines)),
        fio_version=doc.fio_version,
        job_sets={n: JobSetResult.from_group(n, cluster[n], None) for n in sets},
        raw_output=raw_local,
        jobfile=local_jobfiles[0] if local_jobfiles else raw_local,
        command=command,
        hosts=hosts,
        per_host=per_host,
    )

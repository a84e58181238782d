"""fio as the gates run it: preconditioned, drained, in rounds until steady state, never a cache.

The protocol, the same for every bandwidth a gate decides (G1 fio, G2/G3 target read, G4 before and
after the soak), so that two figures of it are like for like:

1. **Backing.** The target's chain is resolved down to its devices (``harness.probes.backing``); a
   chain that ends in memory is refused (:class:`MemoryBackedTarget`, exit 2) unless the inventory
   declares the tier ``kind: memory``.
2. **Working set.** ``size x numjobs``; with a declared ``cache_size`` it must be at least twice
   the cache: the probe is sized up when the target has room, else the figure carries the reason
   it cannot be signed (``cache_problem``, the check is INCONCLUSIVE). Without a declared cache the
   figure says it may include cache.
3. **Preconditioning.** One sequential direct write pass over the whole working set (the same files
   every job set then uses), so no round reads holes or fresh flash (SNIA PTS, workload-independent
   preconditioning). A raw device is not written unless the inventory allows it.
4. **Drain** before each job set (``harness.probes.drain``), recorded.
5. **Rounds.** The job set runs as one continuous fio run; fio's cumulative status dump every
   ``runtime`` seconds (``--status-interval``) closes a round, and kvgate stops the run as soon as
   the last :data:`WINDOW` rounds meet SNIA's steady-state criterion (range within 20% of their
   mean, least-squares excursion within 10%), or once it has ``max_rounds`` rounds. fio is given
   one round more than that to run: the dumps are timed by the wall clock, and on a loaded node a
   late one merges two rounds into one, so a run of exactly ``max_rounds`` rounds' time ended a
   round short (CI, beside a CPU hog: 4 rounds of a 5-round run). The figure is the
   median of those last rounds; the gate's interval is built on them. The run's JSON, every dump
   in it, is the evidence. A job set that did not reach steady state carries that as its reason to
   be INCONCLUSIVE, never PASS.

6. **Buffers.** fio's I/O buffers are asked onto transparent huge pages (``harness.probes.iobuffers``):
   on 4 KiB pages a run's figure depended on which pages its buffers got, so two probes of one disk
   minutes apart differed by up to 40% while each was steady on its own.

Every read and write is ``direct=1`` (O_DIRECT): the node's page cache is out of the figure whether
or not kvgate may drop it; a cache below the node (a VM host, an array controller) is what the
working-set rule is for. The one exception is a tier the inventory declares ``kind: memory``: its
bytes are RAM whatever the I/O mode, so it is measured buffered (``direct=0``), and its evidence
says so (``memory_tier``, ``io: buffered``), so that the figure is labelled a memory figure.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional

from harness.config.inventory import StorageTarget
from harness.config.profile import FioSpec
from harness.probes.backing import Backing, MemoryBackedTarget, check_backing
from harness.probes.drain import DrainRecord, wait_drained
from harness.probes.errors import FioParseError, ProbeError
from harness.probes.fio_jobs import (
    FREE_SPACE_MARGIN,
    buffered,
    build_jobfile,
    build_precondition_jobfile,
    check_target,
    choose_engine,
    describe_command,
    fio_command,
    fio_safe_path,
)
from harness.probes.fio_parse import DIRECTIONS, GroupSummary, parse_fio_file, parse_fio_output, summarise_groups
from harness.probes.fio_run import (
    LAYOUT_FLOOR_BYTES_PER_S,
    FioProbeResult,
    JobSetResult,
    ProgressLike,
    _cleanup,
    _make_scratch,
    _run_fio,
    _say,
    probe_setup,
)
from harness.probes.iobuffers import BufferPages, buffer_pages
from harness.probes.roundsrecord import WINDOW, RoundsRecord
from harness.probes.steady import SteadyState, check_steady_state
from harness.remote.base import Executor


def size_working_set(spec: FioSpec, target: StorageTarget, free_bytes: Optional[int]
                     ) -> tuple[FioSpec, str, Optional[str]]:
    """(spec, what the report says about cache, reason the figure cannot be signed or None)."""
    ws = int(spec.size) * spec.numjobs
    cache = int(target.cache_size) if target.cache_size is not None else None
    if cache is None:
        return spec, (f"no cache_size declared for target {target.name}: the figure may include cache "
                      f"(working set {ws / 2**20:.0f} MiB)"), None
    if ws >= 2 * cache:
        return spec, f"working set {ws / 2**20:.0f} MiB >= 2x the declared cache {cache / 2**20:.0f} MiB", None
    block = int(spec.block_size)
    per_job = math.ceil(2 * cache / spec.numjobs / block) * block
    keep = int(target.min_free) if target.min_free is not None else FREE_SPACE_MARGIN
    if free_bytes is not None and free_bytes >= per_job * spec.numjobs + keep:
        sized = spec.model_copy(update={"size": per_job})
        return sized, (f"working set sized up from {ws / 2**20:.0f} to {per_job * spec.numjobs / 2**20:.0f} MiB, "
                       f"2x the declared cache {cache / 2**20:.0f} MiB"), None
    problem = (f"the working set {ws / 2**20:.0f} MiB is below 2x the declared cache {cache / 2**20:.0f} MiB and "
               f"target {target.name} has no room for {per_job * spec.numjobs / 2**20:.0f} MiB: the figure "
               "would include cache")
    return spec, problem, problem


def run_fio_rounds(executor: Executor, target: StorageTarget, spec: FioSpec, out_dir: Path, *,
                   job_sets: Optional[Sequence[str]] = None, progress: ProgressLike = None,
                   run_id: Optional[str] = None, owner: Optional[str] = None) -> FioProbeResult:
    """The protocol of the module docstring on ``target``; files under ``<path>/kvgate-fio-<id>/``,
    removed afterwards, also on failure."""
    node = executor.node
    sets, run_id, stem, fio, info = probe_setup(executor, target, spec, out_dir, job_sets, run_id)
    if not info.exists:
        check_target(executor, target, sets, 0, info)  # raises, naming the missing path
    backing = check_backing(executor, target)
    sized, cache_note, cache_problem = size_working_set(spec, target, info.free_bytes)
    check_target(executor, target, sets, int(sized.size) * sized.numjobs, info)
    raw = info.is_block_device  # S_ISBLK only: /dev/shm/x is a directory on tmpfs
    scratch = f"/tmp/kvgate-fio-{run_id}" if raw else f"{target.path.rstrip('/')}/kvgate-fio-{run_id}"
    fio_safe_path(scratch, what=f"scratch directory of target {target.name}")
    owner = owner or f"kvgate-fio-{run_id}"
    _make_scratch(executor, scratch, owner, target.name)
    try:
        engine = choose_engine(executor, target.path if raw else f"{scratch}/kvgate-engine-probe",
                               target=target.name, preferred=sized.ioengine, fio=fio, remove_probe_file=not raw,
                               direct=not buffered(target))
        ctx = _Ctx(executor, target, sized, fio, engine, scratch, stem, out_dir, raw, buffer_pages(executor))
        pre = _precondition(ctx, progress)
        results: dict[str, JobSetResult] = {}
        for name in sets:
            drain = wait_drained(executor, target.path if raw else scratch, backing.devices,
                                 timeout_s=float(sized.drain_timeout))
            _say(progress, f"{node}/{target.name}: {name} in rounds of {float(sized.runtime):g} s "
                           f"(writes {drain.describe()})")
            results[name] = _rounds(ctx, name, drain, pre, cache_note, cache_problem, backing, progress)
        last = next(reversed(results.values())).rounds
        outputs = last.outputs if last else ()
        return FioProbeResult(node=node, target=target.name, engine=engine, fio_version=ctx.fio_version,
                              job_sets=results, raw_output=outputs[0], jobfile=ctx.jobfiles[-1],
                              command=ctx.command)
    finally:
        _cleanup(executor, scratch, owner)


@dataclass
class _Ctx:
    executor: Executor
    target: StorageTarget
    spec: FioSpec
    fio: str
    engine: str
    scratch: str
    stem: str
    out_dir: Path
    raw: bool
    buffers: BufferPages
    fio_version: Optional[str] = None
    command: str = ""
    jobfiles: list[Path] = field(default_factory=list)


def _precondition(ctx: _Ctx, progress: ProgressLike) -> str:
    """One direct sequential write pass over the working set; what was done, as text."""
    if ctx.raw:
        return "not preconditioned: a raw device is never written for preconditioning; precondition it before the gate"
    ws = int(ctx.spec.size) * ctx.spec.numjobs
    direct = not buffered(ctx.target)
    text = build_precondition_jobfile(ctx.spec, engine=ctx.engine, directory=ctx.scratch, direct=direct)
    remote_job = f"{ctx.scratch}/{ctx.stem}-precondition.fio"
    ctx.executor.write_file(remote_job, text.encode())
    (ctx.out_dir / f"{ctx.stem}-precondition.fio").write_text(text)
    remote_out = f"{ctx.scratch}/{ctx.stem}-precondition.json"
    argv = fio_command(ctx.fio, remote_job, remote_out)
    _say(progress, f"{ctx.executor.node}/{ctx.target.name}: preconditioning, writing {ws / 2**20:.0f} MiB")
    started = time.monotonic()
    local = _run_fio(ctx.executor, argv, remote_out, ctx.out_dir / f"{ctx.stem}-precondition.json",
                     ws / LAYOUT_FLOOR_BYTES_PER_S + 300.0, target=ctx.target.name, command=describe_command(argv))
    took = time.monotonic() - started
    return (f"preconditioned: one sequential {'direct' if direct else 'buffered'} write pass over the "
            f"{ws / 2**20:.0f} MiB working set in "
            f"{took:.1f} s (evidence {local.name})")


def _group(path: Path, name: str, node: str, target: str) -> tuple[GroupSummary, Optional[str]]:
    parsed = parse_fio_file(path, node=node)
    groups = {g.name: g for g in summarise_groups(parsed.final.jobs)}
    if name not in groups:
        raise ProbeError(f"fio output {path.name} has no result for job set {name!r}", node=node, target=target)
    return groups[name], parsed.final.fio_version


def _rounds(ctx: _Ctx, name: str, drain: DrainRecord, pre: str, cache_note: str, cache_problem: Optional[str],
            backing: Backing, progress: ProgressLike) -> JobSetResult:
    """One continuous fio run; fio's status dump every ``runtime`` seconds closes a round, and the run is
    stopped as soon as the last :data:`WINDOW` rounds are steady, or at ``max_rounds`` rounds (fio's
    runtime has one round to spare for dumps a loaded node delays).
    Measured on this project's VM: 2 s rounds as separate fio runs wandered by 8-15% (sd/mean) where
    consecutive 2 s rounds of one run wandered by 4%; a restart is not the storage's behaviour."""
    ex, node = ctx.executor, ctx.executor.node
    round_s = float(ctx.spec.runtime)
    run_spec = ctx.spec.model_copy(update={"job_sets": [name], "runtime": round_s * (int(ctx.spec.max_rounds) + 1)})
    job = build_jobfile(run_spec, job_sets=[name], engine=ctx.engine, directory=None if ctx.raw else ctx.scratch,
                        filename=ctx.target.path if ctx.raw else None, direct=not buffered(ctx.target))
    remote_job = f"{ctx.scratch}/{ctx.stem}-{name}.fio"
    ex.write_file(remote_job, job.text.encode())
    local_job = ctx.out_dir / f"{ctx.stem}-{name}.fio"
    local_job.write_text(job.text)
    ctx.jobfiles.append(local_job)
    remote_out = f"{ctx.scratch}/{ctx.stem}-{name}.json"
    argv = [*fio_command(ctx.fio, remote_job, remote_out), f"--status-interval={_fio_time(round_s)}"]
    ctx.command = describe_command(argv)
    budget = float(run_spec.runtime) + float(ctx.spec.ramp_time) + 120.0
    series, steady = _run_until_steady(ctx, name, argv, remote_out, budget, progress)
    local = ctx.out_dir / f"{ctx.stem}-{name}.json"
    ex.get(remote_out, str(local))
    group, ctx.fio_version = _group(local, name, node, ctx.target.name)
    record = RoundsRecord(round_s, int(ctx.spec.max_rounds), {k: tuple(v) for k, v in series.items()}, steady,
                          drain, pre, int(ctx.spec.size) * ctx.spec.numjobs, cache_note, cache_problem,
                          backing.describe(), ctx.target.kind == "memory", (local,), local_job,
                          ctx.buffers.describe())
    return _result(name, group, record)


def _run_until_steady(ctx: _Ctx, name: str, argv: list[str], remote_out: str, budget: float,
                      progress: ProgressLike) -> tuple[dict[str, list[float]], SteadyState]:
    """Start fio detached, read its status dumps as they come, stop it once steady; (rounds, verdict)."""
    ex, node, round_s = ctx.executor, ctx.executor.node, float(ctx.spec.runtime)
    handle = ex.start_detached(argv, workdir=ctx.scratch, name=f"{ctx.stem}-{name}")
    deadline = time.monotonic() + budget
    series: dict[str, list[float]] = {}
    steady = _judge([], round_s)
    seen, max_rounds = 0, int(ctx.spec.max_rounds)
    try:
        while True:
            state = ex.poll(handle)
            series = status_rounds(ex.read_file(remote_out, max_bytes=STATUS_BYTES_MAX) if _exists(ex, remote_out)
                                   else b"", name, round_s, node=node, max_rounds=max_rounds)
            totals = _totals(series)
            if len(totals) > seen:
                seen, steady = len(totals), _judge(totals, round_s)
                if len(totals) >= WINDOW:
                    _say(progress, f"{node}/{ctx.target.name}: {name} round {len(totals)}: {steady.reason}")
            if steady.steady or not state.running or len(totals) >= max_rounds:
                break
            if time.monotonic() > deadline:
                raise ProbeError(f"fio ran past its {budget:.0f} s budget", node=node, target=ctx.target.name,
                                 detail=f"command: {ctx.command}")
            time.sleep(min(1.0, round_s / 2))
    finally:
        final = ex.stop(handle, grace=30.0)
    if not state.running and state.exit_code not in (0, None):
        raise ProbeError(f"fio exited with {state.exit_code}", node=node, target=ctx.target.name,
                         detail=f"command: {ctx.command}\n{ex.tail_log(handle)[-2000:]}")
    # stopped by kvgate (steady, or the round limit reached with its spare round unused): fio's exit
    # status is that of the stop
    if final.exit_code not in (0, None) and not (steady.steady or seen >= max_rounds):
        log_tail = ex.tail_log(handle)[-2000:]
        raise ProbeError(f"fio exited with {final.exit_code}", node=node, target=ctx.target.name,
                         detail=f"command: {ctx.command}\n{log_tail}")
    return {k: v[:len(_totals(series))] for k, v in series.items()}, steady


STATUS_BYTES_MAX = 32 * 2**20  # fio's JSON status dumps of one run; ~8 KiB each


def _exists(ex: Executor, path: str) -> bool:
    return ex.run(["test", "-s", path], check=False).ok


def _totals(series: Mapping[str, Sequence[float]]) -> list[float]:
    return [sum(v) for v in zip(*series.values())] if series else []


def _judge(totals: Sequence[float], round_s: float) -> SteadyState:
    steady = check_steady_state(totals[-WINDOW:], source=f"last {min(WINDOW, len(totals))} of {len(totals)} "
                                f"rounds of {round_s:g} s (one continuous fio run)")
    if len(totals) < WINDOW:
        return replace(steady, steady=False, reason=f"only {len(totals)} complete round(s) of {round_s:g} s; "
                       f"the steady-state window needs {WINDOW}")
    return steady


def _fio_time(seconds: float) -> str:
    return f"{max(1, round(seconds * 1000))}ms"


def status_rounds(data: bytes, name: str, round_s: float, *, node: str,
                  max_rounds: Optional[int] = None) -> dict[str, list[float]]:
    """Per direction, the bytes/s of every complete round: between two of fio's cumulative status dumps
    (``--status-interval``), the job set's bytes moved (summed over its jobs) over the time its jobs
    ran. A dump cut off mid-write is ignored; a round shorter than half ``round_s`` (the final dump
    when fio is stopped) is left out. At most ``max_rounds`` rounds: on a loaded node the dumps
    (timed by the wall clock) drift off the jobs' runtime, and a run of ``max_rounds`` rounds can
    then end in a further fragment over half a round long, which is the run's tail, not a round
    (seen in CI: six "rounds" of a five-round run)."""
    text = data.decode("utf-8", "replace")
    cut = text.rfind("\n}\n")
    if cut < 0:
        return {}
    try:
        docs = parse_fio_output(text[:cut + 3], source="fio status dumps", node=node).documents
    except FioParseError:
        return {}  # a dump being written; the next poll sees it whole
    out: dict[str, list[float]] = {}
    prev_bytes: dict[str, int] = {}
    prev_ms = 0.0
    for doc in docs:
        jobs = [j for j in doc.jobs if j.name == name]
        if not jobs:
            continue
        ms = max((d.runtime_ms for j in jobs for d in (j.read, j.write, j.trim) if d is not None), default=0)
        moved = {d: sum(s.io_bytes for j in jobs if (s := j.direction(d)) is not None)
                 for d in DIRECTIONS if any(j.direction(d) is not None for j in jobs)}
        if ms - prev_ms >= 500 * round_s:
            for d, b in moved.items():
                out.setdefault(d, []).append((b - prev_bytes.get(d, 0)) / ((ms - prev_ms) / 1000.0))
            prev_bytes, prev_ms = moved, ms
    return {d: v[:max_rounds] for d, v in out.items()} if max_rounds is not None else out


def _result(name: str, group: GroupSummary, record: RoundsRecord) -> JobSetResult:
    """The job set's figures: bandwidth = median of the window's rounds; the rest from the last round."""
    def med(direction: str) -> Optional[float]:
        window = record.window(direction)
        return statistics.median(window) if window else None

    base = JobSetResult.from_group(name, group, record.steady)
    return JobSetResult(name=name, read_bw_bytes=med("read"), write_bw_bytes=med("write"),
                        read_iops=base.read_iops, write_iops=base.write_iops, read=base.read, write=base.write,
                        errors=base.errors, steady_state=record.steady, rounds=record)


__all__ = ["MemoryBackedTarget", "RoundsRecord", "WINDOW", "check_backing", "run_fio_rounds", "status_rounds",
           "size_working_set"]

"""fio job generation and the checks made before any byte is written.

A probe of one storage target is one fio job file: one section per named job set, separated by
``stonewall`` so they run one after the other and each forms its own group (``group_reporting``).
Every set uses the same ``numjobs`` files (``filename_format=kvgate.$jobnum.$filenum``) under
``<target.path>/kvgate-fio-<run-id>/``, so the free space needed is ``size * numjobs`` whatever the
number of sets; the directory is removed afterwards by the runner.

Honesty rules enforced here: ``direct=1`` for every storage target; a tmpfs/ramfs target is refused
(its "disk" is the page cache, so no figure from it is a storage figure) unless the inventory
declares it a RAM tier (``kind: memory``), which is measured buffered (:func:`buffered`): O_DIRECT
on RAM bypasses nothing, and the figure is labelled a memory figure. A target is a raw block device
only when its path is a block device node (``test -b``, S_ISBLK), whatever its name (``/dev/shm/x``
is a directory on tmpfs); a raw device is written only when the inventory allows destructive tests
for that target.
"""

from __future__ import annotations

import logging
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from harness.config.inventory import StorageTarget
from harness.config.profile import FioSpec
from harness.errors import InputError
from harness.probes.errors import ProbeError, ProbeRefused
from harness.probes.iobuffers import with_huge_page_buffers
from harness.remote.base import Executor
from harness.remote.scratch import remove_owned_file

log = logging.getLogger(__name__)

MiB = 2**20
FREE_SPACE_MARGIN = 64 * MiB  # kept free beyond the probe's files when the target sets no min_free
ENGINE_PREFERENCE: tuple[str, ...] = ("io_uring", "libaio", "psync")
MEMORY_FILESYSTEMS = frozenset({"tmpfs", "ramfs"})


@dataclass(frozen=True)
class JobSet:
    """A named fio workload."""

    name: str
    rw: str
    block_size: Optional[int]  # None: the profile's block_size (sequential sets)
    writes: bool
    rwmixread: Optional[int] = None
    description: str = ""


# The registry of job sets (profiles name them in probes.fio.job_sets).
JOB_SETS: dict[str, JobSet] = {
    "seq-read": JobSet("seq-read", "read", None, False, description="sequential read, profile block size"),
    "seq-write": JobSet("seq-write", "write", None, True, description="sequential write, profile block size"),
    "rand-read": JobSet("rand-read", "randread", 4096, False, description="random read, 4 KiB"),
    "mixed": JobSet(
        "mixed", "randrw", 4096, True, rwmixread=70, description="random 70% read / 30% write, 4 KiB"
    ),
}


def job_set(name: str) -> JobSet:
    try:
        return JOB_SETS[name]
    except KeyError:
        raise InputError(f"unknown fio job set {name!r}; known: {', '.join(JOB_SETS)}") from None


# fio reads a job file line by line: a line break starts a new option (``exec_prerun=`` runs a
# command), ``;`` and ``#`` start comments, ``:`` separates several files or directories, ``$``
# expands variables and ``\\`` escapes. A path is therefore pasted into a job file only when every
# character is one fio takes literally; anything else is refused, never escaped.
_FIO_SAFE_PATH = re.compile(r"/[A-Za-z0-9._/@+-]*")


def fio_safe_path(value: str, *, what: str) -> str:
    """``value`` when fio will read it as exactly that path in a job file, else InputError."""
    if not _FIO_SAFE_PATH.fullmatch(value):
        bad = sorted({c for c in value if not re.fullmatch(r"[A-Za-z0-9._/@+-]", c)})
        shown = ", ".join(repr(c) for c in bad) or "(not absolute)"
        raise InputError(
            f"{what} {value!r} cannot be written into a fio job file: fio would interpret "
            f"{shown} (allowed: letters, digits and . _ / @ + -; the path must be absolute)"
        )
    return value


def buffered(target: StorageTarget) -> bool:
    """Whether fio runs on ``target`` buffered (``direct=0``): only a declared RAM tier, whose bytes
    are memory whatever the I/O mode, so O_DIRECT would only pretend to bypass a cache."""
    return target.kind == "memory"


def _seconds(value: float) -> str:
    """fio time value: whole seconds as plain integers, else milliseconds."""
    if float(value).is_integer():
        return str(int(value))
    return f"{round(value * 1000)}ms"


@dataclass(frozen=True)
class FioJobFile:
    """A generated job file and what it needs."""

    text: str
    job_sets: tuple[str, ...]
    required_bytes: int  # bytes the files take on the target
    bw_log_prefix: Optional[str]
    log_avg_msec: Optional[int]


def build_jobfile(
    spec: FioSpec,
    *,
    job_sets: Sequence[str],
    engine: str,
    directory: Optional[str] = None,
    filename: Optional[str] = None,
    bw_log_dir: Optional[str] = None,
    ss_window: Optional[int] = None,
    direct: bool = True,
) -> FioJobFile:
    """The fio job file text for ``job_sets`` (pure: no I/O).

    Exactly one of ``directory`` (a filesystem target) and ``filename`` (a raw device) is given.
    With ``bw_log_dir``, each set writes a windowed bandwidth log there (for the steady-state check).
    With ``ss_window`` (seconds, fio >= 2.16), fio's own steady-state detection runs on each set
    (``ss=bw:20%``, one bandwidth sample per second over the window); note that fio then ends a set
    early once its criterion holds, so this is opt-in. ``direct=False`` only for a declared RAM tier
    (:func:`buffered`).
    """
    if (directory is None) == (filename is None):
        raise ValueError("give exactly one of directory and filename")
    if directory is not None:
        fio_safe_path(directory, what="fio directory")
    if filename is not None:
        fio_safe_path(filename, what="fio filename")
    if bw_log_dir is not None:
        fio_safe_path(bw_log_dir, what="fio bandwidth log directory")
    if engine not in ENGINE_PREFERENCE and not re.fullmatch(r"[a-z0-9_]+", engine):
        raise InputError(f"fio ioengine {engine!r} is not a plain engine name")
    sets = [job_set(n) for n in job_sets]
    size = int(spec.size)
    lines = [
        "[global]",
        f"ioengine={engine}",
        f"direct={int(direct)}",
        "invalidate=1",
        "group_reporting=1",
        f"numjobs={spec.numjobs}",
        f"size={size}",
        "time_based=1",
        f"runtime={_seconds(spec.runtime)}",
        f"ramp_time={_seconds(spec.ramp_time)}",
    ]
    if directory is not None:
        lines += [f"directory={directory}", "filename_format=kvgate.$jobnum.$filenum"]
    else:
        lines += [f"filename={filename}"]
    log_avg: Optional[int] = None
    if bw_log_dir is not None:
        # about 20 samples per set, no finer than 100 ms (fio's logging cost stays negligible)
        log_avg = max(100, int(spec.runtime * 1000 / 20))
        lines += [f"log_avg_msec={log_avg}"]
    for i, s in enumerate(sets):
        bs = s.block_size if s.block_size is not None else int(spec.block_size)
        lines += ["", f"[{s.name}]"]
        if i > 0:
            lines.append("stonewall")
        lines += [f"rw={s.rw}", f"bs={bs}", f"iodepth={spec.iodepth}"]
        if s.rwmixread is not None:
            lines.append(f"rwmixread={s.rwmixread}")
        if bw_log_dir is not None:
            lines.append(f"write_bw_log={bw_log_dir}/{s.name}")
        if ss_window is not None:
            lines += ["ss=bw:20%", f"ss_dur={ss_window}", f"ss_ramp={_seconds(spec.ramp_time)}"]
    return FioJobFile(
        text="\n".join(lines) + "\n",
        job_sets=tuple(s.name for s in sets),
        required_bytes=size * spec.numjobs if directory is not None else 0,
        bw_log_prefix=bw_log_dir,
        log_avg_msec=log_avg,
    )


def build_precondition_jobfile(spec: FioSpec, *, engine: str, directory: str, direct: bool = True) -> str:
    """One sequential write pass over the probe's whole working set (the same files the job sets use,
    ``numjobs`` x ``size``), direct I/O, not time-based: SNIA's workload-independent
    preconditioning, so the rounds after it neither read holes nor fresh-out-of-box flash (buffered
    only for a declared RAM tier)."""
    fio_safe_path(directory, what="fio directory")
    return "\n".join([
        "[global]", f"ioengine={engine}", f"direct={int(direct)}", "group_reporting=1", f"numjobs={spec.numjobs}",
        f"size={int(spec.size)}", f"directory={directory}", "filename_format=kvgate.$jobnum.$filenum",
        "", "[precondition]", "rw=write", f"bs={int(spec.block_size)}", f"iodepth={spec.iodepth}",
    ]) + "\n"


# --------------------------------------------------------------------------------------------
# Checks on the node, through the executor


@dataclass(frozen=True)
class TargetInfo:
    """What the node says about a target path."""

    path: str
    exists: bool
    is_block_device: bool
    fs_type: Optional[str]
    free_bytes: Optional[int]


def inspect_target(executor: Executor, path: str) -> TargetInfo:
    """Existence, block device or not, filesystem type and free bytes of ``path`` on the node."""
    exists = executor.run(["test", "-e", path], check=False).exit_code == 0
    if not exists:
        return TargetInfo(path, False, False, None, None)
    block = executor.run(["test", "-b", path], check=False).exit_code == 0
    if block:
        return TargetInfo(path, True, True, None, None)
    fs = executor.run(["stat", "-f", "-c", "%T", path], check=False)
    fs_type = fs.stdout.strip() or None if fs.ok else None
    df = executor.run(["df", "-P", "-B1", path], check=False)
    free = None
    if df.ok:
        rows = [r.split() for r in df.stdout.strip().splitlines()[1:]]
        if rows and len(rows[-1]) >= 4 and rows[-1][3].isdigit():
            free = int(rows[-1][3])
    return TargetInfo(path, True, False, fs_type, free)


def check_target(
    executor: Executor,
    target: StorageTarget,
    job_sets: Sequence[str],
    required_bytes: int,
    info: Optional[TargetInfo] = None,
) -> TargetInfo:
    """Refuse, before anything is written, what cannot be measured safely or honestly."""
    node = executor.node
    info = info or inspect_target(executor, target.path)
    if not info.exists:
        raise ProbeRefused(
            f"path {target.path} does not exist on the node (is the storage mounted?)",
            node=node,
            target=target.name,
        )
    writing = [n for n in job_sets if job_set(n).writes]
    raw = info.is_block_device
    if raw and writing and not target.allow_destructive:
        raise ProbeRefused(
            f"{target.path} is a raw block device and job set(s) {', '.join(writing)} would overwrite it; "
            "set allow_destructive: true for this target in the inventory to allow it, or point the "
            "target at a mounted filesystem",
            node=node,
            target=target.name,
        )
    if target.kind != "memory" and (target.kind == "tmpfs" or (info.fs_type or "") in MEMORY_FILESYSTEMS):
        raise ProbeRefused(
            f"{target.path} is a memory filesystem ({info.fs_type or target.kind}): its reads and writes are "
            "page-cache operations, so fio cannot measure storage there honestly (declare it `kind: memory` "
            "if a RAM tier is meant: it is then measured buffered and labelled a memory figure)",
            node=node,
            target=target.name,
        )
    if not raw:
        keep = int(target.min_free) if target.min_free is not None else FREE_SPACE_MARGIN
        need = required_bytes + keep
        if info.free_bytes is None:
            raise ProbeRefused(
                f"cannot read the free space of {target.path} (df failed)", node=node, target=target.name
            )
        if info.free_bytes < need:
            raise ProbeRefused(
                f"not enough free space on {target.path}: {info.free_bytes} bytes free, the probe needs "
                f"{required_bytes} bytes of files plus {keep} bytes kept free "
                f"({'min_free' if target.min_free is not None else 'margin'}) = {need} bytes",
                node=node,
                target=target.name,
            )
    return info


def choose_engine(
    executor: Executor,
    probe_file: str,
    *,
    target: str,
    preferred: Optional[str] = None,
    fio: str = "fio",
    remove_probe_file: bool = True,
    direct: bool = True,
) -> str:
    """The first I/O engine that really works with direct I/O on ``probe_file`` (a 1 MiB read job per
    candidate, a fraction of a second each): io_uring, libaio, then psync. A preferred engine from
    the profile is tried alone and must work. For a raw device, ``probe_file`` is the device (only
    read) and ``remove_probe_file`` must be False. ``direct=False``: a declared RAM tier, probed buffered."""
    candidates = (preferred,) if preferred else ENGINE_PREFERENCE
    failures = []
    try:
        for engine in candidates:
            res = executor.run(
                [
                    fio,
                    "--name=kvgate-engine-probe",
                    f"--ioengine={engine}",
                    f"--direct={int(direct)}",
                    f"--filename={probe_file}",
                    "--size=1m",
                    "--bs=4k",
                    "--rw=read",
                    "--output-format=json",
                ],
                check=False,
                timeout=60,
            )
            if res.ok and '"error" : 0' in res.stdout:
                return engine
            failures.append(f"{engine}: exit {res.exit_code}: {(res.stderr or res.stdout).strip()[-300:]}")
    finally:
        if remove_probe_file:
            removal = remove_owned_file(executor, probe_file, None)
            if removal.outcome not in ("removed", "absent"):
                log.warning("%s: the probe file was not removed: %s", executor.node, removal.describe())
    text = "\n".join(failures)
    if "direct" in text.lower() and ("not support" in text.lower() or "invalid argument" in text.lower()):
        raise ProbeRefused(
            f"{probe_file} does not support O_DIRECT; a buffered measurement would count the "
            f"page cache as disk, so it is not made:\n{text}",
            node=executor.node,
            target=target,
        )
    raise ProbeError(
        f"no fio I/O engine works with direct I/O on {probe_file} (tried "
        f"{', '.join(c for c in candidates if c)})",
        node=executor.node,
        target=target,
        detail=text,
    )


def fio_version(executor: Executor, fio: str = "fio") -> Optional[tuple[int, ...]]:
    """``fio --version`` of the node as a tuple, e.g. (3, 33); None when it cannot be read."""
    res = executor.run([fio, "--version"], check=False, timeout=30)
    m = re.search(r"fio-(\d+)\.(\d+)(?:\.(\d+))?", res.stdout)
    return tuple(int(g) for g in m.groups() if g is not None) if m else None


def fio_command(fio: str, jobfile_path: str, output_path: str, *, output_format: str = "json") -> list[str]:
    """The fio argument list (also recorded as evidence, quoted with shlex), its I/O buffers on huge
    pages (``harness.probes.iobuffers``)."""
    return with_huge_page_buffers([fio, f"--output-format={output_format}", f"--output={output_path}", jobfile_path])


def describe_command(argv: Sequence[str]) -> str:
    return shlex.join(argv)

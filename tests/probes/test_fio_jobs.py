"""fio job generation and the refusals made before anything is written (real node checks through
the LocalExecutor: real df, real stat, a real block-device node, the real /dev/shm tmpfs)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from harness.config.inventory import StorageTarget
from harness.config.profile import FioSpec
from harness.errors import InputError
from harness.probes.errors import ProbeError, ProbeRefused
from harness.probes.fio_jobs import (
    FREE_SPACE_MARGIN,
    build_jobfile,
    check_target,
    choose_engine,
    inspect_target,
)
from harness.remote.local import LocalExecutor
from harness.remote.scratch import create_owned_dir

SPEC = FioSpec(
    job_sets=["seq-read", "seq-write", "rand-read", "mixed"],
    size="8 MiB",
    runtime="2s",
    ramp_time="0.5s",
    numjobs=3,
    iodepth=16,
    block_size="1 MiB",
)


def _sections(text: str) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    current = ""
    for line in text.splitlines():
        if line.startswith("["):
            current = line.strip("[]")
            out[current] = {}
        elif "=" in line:
            k, v = line.split("=", 1)
            out[current][k] = v
        elif line.strip():
            out[current][line.strip()] = ""
    return out


def test_jobfile_for_a_directory() -> None:
    job = build_jobfile(
        SPEC,
        job_sets=SPEC.job_sets,
        engine="libaio",
        directory="/mnt/x/kvgate-fio-1",
        bw_log_dir="/mnt/x/kvgate-fio-1/bwlogs",
    )
    s = _sections(job.text)
    g = s["global"]
    assert g["direct"] == "1" and g["ioengine"] == "libaio" and g["group_reporting"] == "1"
    assert g["size"] == str(8 * 2**20) and g["numjobs"] == "3"
    assert g["runtime"] == "2" and g["ramp_time"] == "500ms" and g["time_based"] == "1"
    assert g["directory"] == "/mnt/x/kvgate-fio-1" and g["filename_format"] == "kvgate.$jobnum.$filenum"
    assert list(s)[1:] == ["seq-read", "seq-write", "rand-read", "mixed"]
    assert "stonewall" not in s["seq-read"] and all("stonewall" in s[n] for n in list(s)[2:])
    assert (
        s["seq-read"]["rw"] == "read"
        and s["seq-read"]["bs"] == str(2**20)
        and s["seq-read"]["iodepth"] == "16"
    )
    assert s["seq-write"]["rw"] == "write"
    assert s["rand-read"]["rw"] == "randread" and s["rand-read"]["bs"] == "4096"
    assert s["mixed"]["rw"] == "randrw" and s["mixed"]["rwmixread"] == "70"
    assert s["mixed"]["write_bw_log"] == "/mnt/x/kvgate-fio-1/bwlogs/mixed"
    # every set shares the same numjobs files: the space needed does not grow with the sets
    assert job.required_bytes == 3 * 8 * 2**20


def test_jobfile_for_a_raw_device_and_unknown_set() -> None:
    job = build_jobfile(SPEC, job_sets=["seq-read"], engine="psync", filename="/dev/md0")
    g = _sections(job.text)["global"]
    assert g["filename"] == "/dev/md0" and "directory" not in g and job.required_bytes == 0
    with pytest.raises(InputError, match="unknown fio job set 'bogus'; known: seq-read, seq-write"):
        build_jobfile(SPEC, job_sets=["bogus"], engine="psync", directory="/x")


def test_inspect_target_reads_free_space(tmp_path: Path) -> None:
    info = inspect_target(LocalExecutor("n1"), str(tmp_path))
    st = os.statvfs(tmp_path)
    assert info.exists and not info.is_block_device and info.free_bytes is not None
    assert abs(info.free_bytes - st.f_bavail * st.f_frsize) < 256 * 2**20  # other tests write meanwhile


def test_refuses_too_little_free_space(tmp_path: Path) -> None:
    target = StorageTarget(name="fast", path=str(tmp_path), min_free="1 PB")
    with pytest.raises(
        ProbeRefused, match=r"node n1, target fast: not enough free space on .* kept free \(min_free\)"
    ):
        check_target(LocalExecutor("n1"), target, ["seq-read"], 2**20)
    free = inspect_target(LocalExecutor("n1"), str(tmp_path)).free_bytes
    assert free is not None
    with pytest.raises(ProbeRefused, match="not enough free space"):
        check_target(
            LocalExecutor("n1"),
            StorageTarget(name="fast", path=str(tmp_path)),
            ["seq-read"],
            free - FREE_SPACE_MARGIN + 2**20,
        )


def test_refuses_missing_path_and_memory_filesystems(tmp_path: Path) -> None:
    ex = LocalExecutor("n1")
    with pytest.raises(ProbeRefused, match="does not exist on the node"):
        check_target(ex, StorageTarget(name="gone", path=str(tmp_path / "nope")), ["seq-read"], 1)
    with pytest.raises(ProbeRefused, match="memory filesystem"):
        check_target(ex, StorageTarget(name="t", path=str(tmp_path), kind="tmpfs"), ["seq-read"], 1)
    if os.path.isdir("/dev/shm") and inspect_target(ex, "/dev/shm").fs_type == "tmpfs":
        with pytest.raises(ProbeRefused, match=r"memory filesystem \(tmpfs\).*cannot measure storage there"):
            check_target(ex, StorageTarget(name="shm", path="/dev/shm"), ["seq-read"], 1)


def test_refuses_raw_device_writes_without_allow_destructive(tmp_path: Path) -> None:
    dev = tmp_path / "blk"
    # a block-device node (loop minor 250) that is never opened: the refusal comes first
    try:
        os.mknod(dev, stat.S_IFBLK | 0o600, os.makedev(7, 250))
    except OSError as exc:
        pytest.skip(f"cannot create a block device node here: {exc}")
    ex = LocalExecutor("n1")
    target = StorageTarget(name="raw", path=str(dev))
    with pytest.raises(
        ProbeRefused,
        match=r"node n1, target raw: .* raw block device and job set\(s\) "
        r"seq-write, mixed would overwrite it; set allow_destructive",
    ):
        check_target(ex, target, ["seq-read", "seq-write", "mixed"], 0)
    # reading is not destructive; and the inventory can allow writes explicitly
    assert check_target(ex, target, ["seq-read"], 0).is_block_device
    allowed = StorageTarget(name="raw", path=str(dev), allow_destructive=True)
    assert check_target(ex, allowed, ["seq-write"], 0).is_block_device


@pytest.mark.fio
def test_choose_engine_really_runs_fio(tmp_path: Path) -> None:
    ex = LocalExecutor("n1")
    create_owned_dir(ex, str(tmp_path / "scratch"), "campaign-1")  # the probe file lives in fio's scratch
    tmp_path = tmp_path / "scratch"
    engine = choose_engine(ex, str(tmp_path / "probe"), target="t")
    assert engine in ("io_uring", "libaio", "psync")
    assert not (tmp_path / "probe").exists()
    with pytest.raises(ProbeError, match="no fio I/O engine works") as info:
        choose_engine(ex, str(tmp_path / "probe"), target="t", preferred="nosuchengine")
    assert "nosuchengine" in str(info.value)

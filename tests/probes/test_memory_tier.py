"""A tier declared ``kind: memory`` is measured as what it is (issue 51, item 6): buffered (O_DIRECT on
RAM bypasses nothing), its evidence saying it is memory and was measured buffered, never refused nor
taken for a raw device because its path begins with /dev/. Only a block device node (S_ISBLK) is a
raw device. Both false NOT_RUNs of the issue are run end to end through G1: a directory in
/dev/shm and a tmpfs mounted elsewhere, each declared ``kind: memory``."""

from __future__ import annotations

import json
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.config.inventory import StorageTarget
from harness.config.profile import CheckpointSpec, FioSpec, ModelLoadSpec
from harness.probes.checkpoint import run_checkpoint_probe
from harness.probes.errors import ProbeRefused
from harness.probes.fio_jobs import build_jobfile, check_target, inspect_target
from harness.probes.measured import checkpoint_leaf, modelload_leaf
from harness.probes.modelload import run_modelload_probe
from harness.remote.local import LocalExecutor
from tests.support.gate1 import run_g1
from tests.support.loopfs import sh

EX = LocalExecutor("n1")


@pytest.fixture(params=["dev-shm-directory", "tmpfs-mount"])
def ram_dir(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """A directory whose bytes are RAM: under /dev/shm, or on a tmpfs mounted under tmp_path."""
    if request.param == "dev-shm-directory":
        path = Path(f"/dev/shm/kvgate-test-{uuid.uuid4().hex[:8]}")
        path.mkdir()
        try:
            yield path
        finally:
            subprocess.run(["rm", "-rf", "--one-file-system", str(path)], check=False)  # noqa: S603
        return
    path = tmp_path / "ram"
    path.mkdir()
    sh("mount", "-t", "tmpfs", "-o", "size=256M", "kvgate-test", str(path))
    try:
        yield path
    finally:
        subprocess.run(["umount", str(path)], check=False)  # noqa: S603


def test_a_dev_shm_directory_is_not_a_raw_device_and_a_block_node_is(ram_dir: Path, tmp_path: Path) -> None:
    assert not inspect_target(EX, str(ram_dir)).is_block_device
    assert inspect_target(EX, "/dev/loop-control").is_block_device is False  # a char device is no disk
    loops = [p for p in Path("/dev").glob("loop[0-9]*") if p.is_block_device()]
    assert loops and inspect_target(EX, str(loops[0])).is_block_device


def test_declared_memory_passes_the_target_check_and_undeclared_is_refused(ram_dir: Path) -> None:
    with pytest.raises(ProbeRefused, match="memory filesystem"):
        check_target(EX, StorageTarget(name="t", path=str(ram_dir)), ["seq-read"], 1 << 20)
    info = check_target(EX, StorageTarget(name="t", path=str(ram_dir), kind="memory"), ["seq-read", "seq-write"],
                        1 << 20)
    assert info.fs_type == "tmpfs" and not info.is_block_device


def test_only_a_declared_memory_tier_is_buffered() -> None:
    spec = FioSpec()
    assert "direct=1\n" in build_jobfile(spec, job_sets=["seq-read"], engine="psync", directory="/d").text
    buffered = build_jobfile(spec, job_sets=["seq-read"], engine="psync", directory="/d", direct=False).text
    assert "direct=0\n" in buffered and "direct=1" not in buffered


def test_g1_measures_a_declared_memory_tier_buffered_and_says_so(ram_dir: Path, tmp_path: Path) -> None:
    res = run_g1(tmp_path, {"name": "ramtier", "path": str(ram_dir), "kind": "memory"}, campaign="mem")
    assert res.returncode in (0, 1, 3), res.stdout + res.stderr  # a verdict on a figure: not refused, not NOT_RUN
    gate = tmp_path / "r" / "mem" / "G1"
    result = json.loads((gate / "result.json").read_text())
    assert result["measurements"]["fio"]["local"]["ramtier"]["seq_read_bw"] > 0
    fio_read = next(c for c in result["checks"] if c["id"] == "fio_read")
    assert fio_read["verdict"] != "NOT_RUN"
    fio = json.loads((gate / "evidence" / "measured.json").read_text())["nodes"]["local"]["storage"]["ramtier"]["fio"]
    for leaf in (fio["seq_read_bw"], fio["seq_write_bw"]):
        assert leaf["protocol"]["memory_tier"] is True and leaf["protocol"]["io"] == "buffered"
        assert leaf["protocol"]["page_cache"].startswith("measured: a RAM tier declared kind: memory")
        assert "(a RAM tier, declared kind: memory, measured buffered)" in leaf["text"]
    jobs = list((gate / "evidence" / "fio" / "local" / "ramtier").glob("*.fio"))
    assert jobs and all("direct=0\n" in j.read_text() and f"directory={ram_dir}/" in j.read_text() for j in jobs)


def test_checkpoint_and_model_load_on_a_declared_ram_tier_never_pass_for_storage(ram_dir: Path,
                                                                                 tmp_path: Path) -> None:
    """Once a declared RAM tier is accepted, the other probes on it must not yield an unlabelled
    storage figure: the checkpoint write is labelled a RAM tier, and the model load's reads (RAM
    whatever the cache drop or O_DIRECT, which tmpfs accepts and ignores) are no storage figure."""
    target = StorageTarget(name="ramtier", path=str(ram_dir), kind="memory")
    ckpt = run_checkpoint_probe(EX, target, CheckpointSpec(size="8 MiB", files=2, writers=2, max_rounds=5),
                                tmp_path / "ckpt")
    assert ckpt.memory_tier and json.loads(json.dumps(ckpt.to_json()))["memory_tier"] is True
    leaf = checkpoint_leaf(ckpt)
    assert str(leaf["text"]).endswith("(a RAM tier, declared kind: memory)")
    load = run_modelload_probe(EX, target, ModelLoadSpec(readers=2, synthetic_size="8 MiB", max_rounds=5),
                               tmp_path / "load")
    assert load.may_include_cached and load.how.startswith("shards on a RAM tier declared kind: memory")
    assert modelload_leaf(load)["value"] is None
    assert list(ram_dir.iterdir()) == []

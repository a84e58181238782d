"""Where a bandwidth sweep cannot set a rate it is refused before anything runs, with the reason: a
network filesystem (its reads never pass a block device of the node), GPUDirect Storage, memory, a
candidate without a storage target. The refusal comes from the files alone when they say so, else
from the target's backing chain read on the node."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pytest
import yaml

from harness.cli.main import run
from harness.config.loader import load_inventory, load_profile
from harness.pipelines.bandwidth.targets import SweepRefused, at_rate, check_block_layer, swept_target
from harness.remote.local import LocalExecutor

REPO = Path(__file__).resolve().parents[2]
PROFILE = REPO / "profiles" / "demo-bandwidth.yaml"
INVENTORY = REPO / "inventory" / "localhost.yaml"


def _write(tmp_path: Path, name: str, data: dict) -> Path:  # type: ignore[type-arg]
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_nfs_gds_memory_and_a_tier_without_storage_are_refused_from_the_files(tmp_path: Path) -> None:
    inv = yaml.safe_load(INVENTORY.read_text())
    for kind, words in (("nfs", "network filesystem"), ("memory", "memory is never storage")):
        inv["nodes"][0]["storage"][1].update(kind=kind)
        inv["nodes"][0]["storage"][1].pop("enforce", None)
        inv["nodes"][0]["storage"][1].pop("provisioned", None)
        with pytest.raises(SweepRefused, match=words):
            swept_target(load_profile(PROFILE), load_inventory(_write(tmp_path, "inv.yaml", inv)))
    prof = yaml.safe_load(PROFILE.read_text())
    prof["arms"][1]["lmcache"]["use_gds"] = True
    with pytest.raises(SweepRefused, match="GPUDirect Storage") as exc:
        swept_target(load_profile(_write(tmp_path, "p.yaml", prof)), load_inventory(INVENTORY))
    assert "block-device tiers only" in str(exc.value) and "target fast-disk" in str(exc.value)
    prof["arms"][1]["lmcache"] = {"local_cpu": True}
    prof["arms"][1].pop("storage")
    with pytest.raises(SweepRefused, match="no storage target"):
        swept_target(load_profile(_write(tmp_path, "p.yaml", prof)), load_inventory(INVENTORY))


def test_the_backing_chain_refuses_a_network_filesystem_and_memory(tmp_path: Path) -> None:
    shm = Path(f"/dev/shm/kvgate-test-{uuid.uuid4().hex[:8]}")
    shm.mkdir()
    try:
        target = load_inventory(INVENTORY).nodes[0].storage[1].model_copy(update={"path": str(shm)})
        ex = LocalExecutor("local")
        with pytest.raises(SweepRefused, match="memory-backed"):
            check_block_layer(ex, target)
        # a directory on a filesystem with an anonymous device number (as every network filesystem's
        # is), which the node's mount table shows as an NFS export: only read, never written
        proc = target.model_copy(update={"path": "/proc/sys"})
        dev = os.stat("/proc/sys").st_dev
        mountinfo = tmp_path / "mountinfo"
        mountinfo.write_text(f"99 1 {os.major(dev)}:{os.minor(dev)} / /proc rw,relatime - nfs4 filer:/export/kv "
                             "rw,vers=4.2\n")
        with pytest.raises(SweepRefused, match="network filesystem") as exc:
            check_block_layer(ex, proc, mountinfo=str(mountinfo))
        assert "filer:/export/kv" in str(exc.value) and "nfs4 client" in str(exc.value)
        # the real mount table: proc has no block device under it either
        with pytest.raises(SweepRefused, match="reaches no block device"):
            check_block_layer(ex, proc)
    finally:
        shutil.rmtree(shm, ignore_errors=True)


def test_the_command_refuses_before_creating_anything(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inv = yaml.safe_load(INVENTORY.read_text())
    shm = Path(f"/dev/shm/kvgate-test-{uuid.uuid4().hex[:8]}")
    shm.mkdir()
    try:
        for target in inv["nodes"][0]["storage"]:
            target["path"] = str(shm)
        code = run(["bandwidth-sweep", "--inventory", str(_write(tmp_path, "inv.yaml", inv)), "--profile",
                    str(PROFILE), "--reports", str(tmp_path / "reports"), "--no-progress"])
    finally:
        shutil.rmtree(shm, ignore_errors=True)
    assert code == 2
    assert "memory-backed" in capsys.readouterr().err
    assert not (tmp_path / "reports").exists()


def test_a_rate_of_the_sweep_is_the_swept_targets_alone(tmp_path: Path) -> None:
    inv = load_inventory(INVENTORY)
    swept = at_rate(inv, "local", "fast-disk", 75e6)
    (target,) = swept.node("local").storage
    assert target.name == "fast-disk" and target.enforce == "blk-throttle"
    assert target.provisioned is not None and target.provisioned.read == 75e6 and target.provisioned.write == 150e6
    assert at_rate(inv, "local", "fast-disk", None) == inv  # the tier as declared

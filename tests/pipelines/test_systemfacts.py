"""What a gate records of the system under test for page one: per node, the inventory's storage
targets as declared and G1's facts as measured (accelerators by model and count, CPU, memory,
kernel, OS, per target its filesystem, device models and their firmware); nothing when G1 has no
readable facts (never guessed)."""

from __future__ import annotations

from harness.config.inventory import Inventory
from harness.facts.model import Accelerator, Mount, NodeFacts, NvmeDrive, OsInfo, StorageTargetFacts
from harness.pipelines.shared.systemfacts import add_system_facts


def _inventory() -> Inventory:
    return Inventory.model_validate({"cluster": "lab", "nodes": [{
        "name": "n1", "host": "10.0.0.1", "platform": "mi308x", "accelerators": {"model": "MI308X", "count": 8},
        "storage": [{"name": "fx100", "path": "/mnt/fx100", "kind": "nvmeof-raid", "device": "/dev/md0",
                     "raid": "raid0", "drive_models": ["FX100"], "allow_destructive": False}]}]})


def _facts() -> NodeFacts:
    return NodeFacts(
        node="n1", collected_at="2026-12-06T10:00:00+00:00", cpu_model="AMD EPYC 9654", memory_bytes=1_536_000_000_000,
        accelerators=[Accelerator(index=i, card=i, model="AMD Instinct MI308X") for i in range(8)],
        nvme=[NvmeDrive(device="/dev/nvme0n1", model="FX100", firmware="2.1.0"),
              NvmeDrive(device="/dev/nvme1n1", model="FX100", firmware="2.1.0")],
        os=OsInfo(pretty_name="Ubuntu 24.04.1 LTS", kernel="6.8.0-49-generic"),
        targets={"fx100": StorageTargetFacts(path="/mnt/fx100", exists=True, writable=True,
                                             mount=Mount(source="/dev/md0", target="/mnt/fx100", fstype="xfs"),
                                             device_models=["FX100", "FX100"])})


def test_declared_and_measured_blocks() -> None:
    inv = _inventory()
    nodes = [{"name": "n1"}]
    add_system_facts(nodes, inv.nodes, {"n1": _facts()})
    declared, measured = nodes[0]["declared"], nodes[0]["measured"]
    assert declared == {"storage_targets": [{"name": "fx100", "path": "/mnt/fx100", "kind": "nvmeof-raid",
                                             "device": "/dev/md0", "drive_models": ["FX100"], "raid": "raid0"}]}
    assert measured["accelerators"] == "AMD Instinct MI308X x 8"
    assert measured["cpu"] == "AMD EPYC 9654" and measured["memory_bytes"] == 1_536_000_000_000
    assert measured["kernel"] == "6.8.0-49-generic" and measured["os"] == "Ubuntu 24.04.1 LTS"
    assert measured["storage"] == {"fx100": {"filesystem": "xfs", "source": "/dev/md0", "device_models": ["FX100"],
                                             "firmware": ["2.1.0"]}}


def test_no_facts_no_measured_block() -> None:
    nodes = [{"name": "n1"}]
    add_system_facts(nodes, _inventory().nodes, {"n1": None})
    assert "measured" not in nodes[0] and nodes[0]["declared"]["storage_targets"][0]["kind"] == "nvmeof-raid"

"""The hardware fingerprint (issue 27 item 4) and the inventory fingerprint G1 records: what makes
figures comparable is what the nodes and the storage are, never what they are called."""

from __future__ import annotations

from typing import Any, Optional

from harness.config.inventory import Inventory
from harness.facts.model import Accelerator, Mount, NodeFacts, StorageTargetFacts
from harness.gates.fingerprint import fingerprint_diff
from harness.gates.hardware import UNKNOWN, hardware_fingerprint, inventory_fingerprint

GIB = 2**30


def _inventory(names: tuple[str, ...] = ("gpu01", "gpu02"), host: str = "10.0.0.", path: str = "/mnt/fx",
               kind: str = "nvmeof-raid", platform: str = "mi308x") -> Inventory:
    return Inventory.model_validate({"cluster": "lab", "nodes": [
        {"name": n, "host": f"{host}{i}", "platform": platform, "roles": ["server", "client"],
         "storage": [{"name": "fx", "path": path, "kind": kind}, {"name": "local", "path": "/nvme"}]}
        for i, n in enumerate(names)]})


def _facts(name: str, *, gpus: int = 8, gpu: str = "AMD Instinct MI308X OAM", cpu: str = "AMD EPYC 9654",
           mem: int = 1536 * GIB, kernel: str = "5.15.0-119-generic", drive: str = "FX100 NVMe-oF",
           fs: str = "xfs") -> NodeFacts:
    return NodeFacts(
        node=name, collected_at="t", cpu_model=cpu, memory_bytes=mem, versions={"kernel": kernel},
        accelerators=[Accelerator(index=i, card=i, model=gpu) for i in range(gpus)],
        targets={"fx": StorageTargetFacts(path="/mnt/fx", exists=True, writable=True, device_models=[drive],
                                          mount=Mount(source="/dev/md0", target="/mnt/fx", fstype=fs))})


def _fp(inv: Inventory, facts: dict[str, Optional[NodeFacts]], version: str = "1.0") -> dict[str, Any]:
    return hardware_fingerprint(inv, facts, storage="fx", kvgate_version=version)


def _both(**kw: Any) -> dict[str, Optional[NodeFacts]]:
    return {n: _facts(n, **kw) for n in ("gpu01", "gpu02")}


def test_fields_per_node_and_per_storage_target() -> None:
    fp = _fp(_inventory(), _both())
    assert fp["kvgate.version"] == "1.0"
    assert fp["hardware.nodes.accelerators"] == ["8 x AMD Instinct MI308X OAM"] * 2
    assert fp["hardware.nodes.cpu_model"] == ["AMD EPYC 9654"] * 2
    assert fp["hardware.nodes.memory"] == ["1536 GiB"] * 2
    assert fp["hardware.nodes.kernel"] == ["5.15.0-119-generic"] * 2
    assert fp["hardware.storage.kind"] == ["nvmeof-raid"] * 2
    assert fp["hardware.storage.device_model"] == ["FX100 NVMe-oF"] * 2
    assert fp["hardware.storage.filesystem"] == ["xfs"] * 2


def test_other_hardware_differs_field_by_field() -> None:
    inv = _inventory()
    base = _fp(inv, _both())
    other = {"gpu01": _facts("gpu01", gpus=4, gpu="NVIDIA A100-SXM4-80GB"), "gpu02": _facts("gpu02", fs="ext4")}
    diff = {k: (a, b) for k, a, b in fingerprint_diff(base, _fp(inv, other, version="1.1"))}
    assert diff["hardware.nodes.accelerators"] == (["8 x AMD Instinct MI308X OAM"] * 2,
                                                   ["4 x NVIDIA A100-SXM4-80GB", "8 x AMD Instinct MI308X OAM"])
    assert diff["hardware.storage.filesystem"] == (["xfs", "xfs"], ["ext4", "xfs"])
    assert diff["kvgate.version"] == ("1.0", "1.1")
    assert set(diff) == {"hardware.nodes.accelerators", "hardware.storage.filesystem", "kvgate.version"}
    for change in ({"cpu": "Intel Xeon Platinum 8480+"}, {"mem": 512 * GIB}, {"kernel": "6.8.0-45-generic"},
                   {"drive": "SAMSUNG MZWLO3T8HCLS-00A07"}):
        assert fingerprint_diff(base, _fp(inv, _both(**change))), change  # type: ignore[arg-type]
    local = _inventory(kind="local-nvme")
    assert [d[0] for d in fingerprint_diff(base, _fp(local, _both()))] == ["hardware.storage.kind"]
    one_node = _inventory(names=("gpu01",))
    assert {d[0] for d in fingerprint_diff(base, _fp(one_node, _both()))} >= {"hardware.nodes.cpu_model"}


def test_names_hosts_paths_and_order_are_not_hardware() -> None:
    base = _fp(_inventory(), _both())
    renamed = _inventory(names=("node-b", "node-a"), host="gpu-", path="/data/fx")
    facts = {"node-a": _facts("node-a"), "node-b": _facts("node-b")}
    assert fingerprint_diff(base, _fp(renamed, facts)) == []
    # memory rounds to whole GiB: a few MB of firmware reservation are the same machine
    assert fingerprint_diff(base, _fp(_inventory(), _both(mem=1536 * GIB - 37 * 2**20))) == []


def test_what_was_not_collected_is_never_equal() -> None:
    inv = _inventory()
    nothing = _fp(inv, {"gpu01": None, "gpu02": None})
    assert nothing["hardware.nodes.cpu_model"] == [UNKNOWN, UNKNOWN]
    assert nothing["hardware.storage.device_model"] == [UNKNOWN, UNKNOWN]
    # both sides unknown: not known to be equal, so reported (and refused) like a difference
    assert {d[0] for d in fingerprint_diff(nothing, nothing)} == {
        f"hardware.nodes.{k}" for k in ("accelerators", "cpu_model", "memory", "kernel")} | {
        "hardware.storage.device_model", "hardware.storage.filesystem"}
    half = _both()
    half["gpu02"] = half["gpu02"].model_copy(update={"cpu_model": None})  # type: ignore[union-attr]
    assert ("hardware.nodes.cpu_model", [UNKNOWN, "AMD EPYC 9654"], [UNKNOWN, "AMD EPYC 9654"]) in \
        fingerprint_diff(_fp(inv, half), _fp(inv, half))


def test_a_cpu_node_has_no_accelerators_to_collect() -> None:
    inv = _inventory(platform="cpu")
    facts = {n: _facts(n).model_copy(update={"accelerators": None}) for n in ("gpu01", "gpu02")}
    assert _fp(inv, facts)["hardware.nodes.accelerators"] == ["none", "none"]
    gpu = {n: f.model_copy(update={"accelerators": None}) for n, f in facts.items()}
    assert _fp(_inventory(), gpu)["hardware.nodes.accelerators"] == [UNKNOWN, UNKNOWN]  # mi308x: not collected


def test_inventory_fingerprint_is_what_g1_accepted_without_locations() -> None:
    base = inventory_fingerprint(_inventory())
    assert fingerprint_diff(base, inventory_fingerprint(_inventory(host="192.168.1.", path="/data/fx"))) == []
    assert base["node.gpu01.storage.fx"]["kind"] == "nvmeof-raid"
    diff = [d[0] for d in fingerprint_diff(base, inventory_fingerprint(_inventory(kind="local-nvme")))]
    assert diff == ["node.gpu01.storage.fx", "node.gpu02.storage.fx"]
    assert "node.gpu03.platform" in {d[0] for d in fingerprint_diff(
        base, inventory_fingerprint(_inventory(names=("gpu01", "gpu02", "gpu03"))))}

"""compare_facts: inventory expectations vs facts parsed from captured outputs, and the G1 gate
evaluated on the result (no accelerator or NVMe-oF array exists here; see SOURCES.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.config.inventory import Inventory, Node
from harness.config.loader import load_gate
from harness.facts.compare import compare_facts, model_matches, version_matches
from harness.facts.model import FsUsage, Mount, NodeFacts, NvmeDrive, RaidArray, StorageTargetFacts
from harness.facts.parsers.amd import parse_amdsmi_static
from harness.facts.parsers.ascend import parse_npusmi_info
from harness.facts.parsers.network import apply_gid_attrs, parse_ethtool, parse_ibv_devinfo
from harness.gates.evaluate import evaluate_gate
from harness.gates.verdict import decide
from harness.pipelines.gaterun.applicability import mark_not_applicable, not_applicable
from harness.store.schema import Verdict

DATA = Path(__file__).resolve().parents[1] / "data" / "facts"
GATES = Path(__file__).resolve().parents[2] / "gates"


def _read(name: str) -> str:
    return (DATA / name).read_text()


def _mi308x_node(**over: Any) -> Node:
    base: dict[str, Any] = {
        "name": "node1", "host": "10.0.0.11", "platform": "mi308x",
        "accelerators": {"model": "MI308X", "count": 8, "memory": "192 GB"},
        "storage": [{"name": "fx100", "path": "/mnt/fx100", "kind": "nvmeof-raid", "device": "/dev/md0",
                     "drives": 4, "raid": "raid0", "capacity": "14 TB"},
                    {"name": "nfs", "path": "/mnt/nfs", "kind": "nfs"}],
        "network": [{"interface": "ens1f0", "speed": "200 Gb/s", "roce": "v2", "rdma_device": "mlx5_0"}],
        "software": {"vllm": "0.20.1", "lmcache": "*", "rocm": "6.4"},
    }
    base.update(over)
    return Node.model_validate(base)


def _good_facts() -> NodeFacts:
    members = [f"/dev/nvme{i}n1" for i in range(1, 5)]
    ports = apply_gid_attrs(parse_ibv_devinfo(_read("ibv_devinfo_two_ports.txt")),
                            _read("sysfs_gid_attrs_grep.txt"))
    return NodeFacts(
        node="node1", collected_at="2026-01-01T00:00:00Z",
        accelerators=parse_amdsmi_static(_read("amdsmi_static_gpu_data_mi308x_amdsmi26.json")),
        accelerator_source="amd-smi",
        nvme=[NvmeDrive(device="/dev/nvme0n1", model="SAMSUNG MZQL23T8HCLS", size_bytes=3840755982336)]
        + [NvmeDrive(device=m, model="FX100 NVMe-oF namespace", transport="rdma", size_bytes=3500000000000)
           for m in members],
        raid={"/dev/md0": RaidArray(device="/dev/md0", level="raid0", n_devices=4, members=members)},
        targets={
            "fx100": StorageTargetFacts(
                path="/mnt/fx100", exists=True, writable=True,
                mount=Mount(source="/dev/md0", target="/mnt/fx100", fstype="xfs"),
                usage=FsUsage(target="/mnt/fx100", source="/dev/md0", fstype="xfs",
                              size_bytes=13999848439808)),
            "nfs": StorageTargetFacts(path="/mnt/nfs", exists=True, writable=True,
                                      mount=Mount(source="10.0.0.5:/export/kv", target="/mnt/nfs",
                                                  fstype="nfs4")),
        },
        links={"ens1f0": parse_ethtool("ens1f0", _read("ethtool_200g.txt"))},
        rdma=ports,
        versions={"vllm": "0.20.1+rocm644", "lmcache": "0.3.9", "rocm": "6.4.0-47", "python": "3.12.3"},
    )


def _rounds(bw: float) -> dict[str, Any]:
    """A fio leaf as the rounds protocol writes it: the median and five steady rounds."""
    return {"value": bw, "samples": {"kind": "percentile", "x": [bw * f for f in (0.99, 1.0, 1.01, 1.0, 1.0)],
                                     "q": 50}}


def _g1(node: Node, facts: NodeFacts) -> dict[str, Any]:
    sub = compare_facts(node, facts)
    sub["reachable"] = True
    sub["storage"]["fx100"]["fio"] = {"seq_read_bw": _rounds(5.2e9), "seq_write_bw": _rounds(4.1e9)}
    sub["storage"]["nfs"]["fio"] = {"seq_read_bw": _rounds(1.1e9), "seq_write_bw": _rounds(0.9e9)}
    return {"nodes": {node.name: sub}}


def test_matching_node_passes_g1() -> None:
    node = _mi308x_node()
    measured = _g1(node, _good_facts())
    leaves = measured["nodes"]["node1"]
    assert leaves["accelerators"]["match"]["value"] is True
    assert leaves["storage"]["fx100"]["drives"]["match"]["value"] is True
    assert leaves["storage"]["fx100"]["raid"]["match"]["value"] is True
    assert leaves["storage"]["fx100"]["capacity"]["match"]["value"] is True
    assert leaves["network"]["ens1f0"]["speed"]["match"]["value"] is True
    assert leaves["network"]["ens1f0"]["roce"]["match"]["value"] is True
    assert leaves["software"]["match"]["value"] is True, leaves["software"]["match"]["detail"]
    # the NFS target states no drives/raid/capacity: no leaves, so nothing is claimed for it
    assert set(leaves["storage"]["nfs"]) == {"mounted", "fio"}
    # as the pipeline does: what the inventory declares nothing for is NOT_APPLICABLE (provisioned_read)
    inventory = Inventory(cluster="t", nodes=[node])
    results = mark_not_applicable(evaluate_gate(load_gate(GATES / "G1.yaml"), measured),
                                  not_applicable("G1", inventory, None))  # type: ignore[arg-type]
    assert decide(results).verdict is Verdict.PASS, [(c.id, c.verdict, c.reason) for c in results]


def test_each_mismatch_fails_with_expected_and_found() -> None:
    node = _mi308x_node()
    facts = _good_facts()
    assert facts.accelerators is not None
    facts.accelerators = facts.accelerators[:7]  # a GPU missing
    three = facts.raid["/dev/md0"].members[:3]
    facts.raid["/dev/md0"] = RaidArray(device="/dev/md0", level="raid5", members=three)
    facts.targets["fx100"].usage = FsUsage(target="/mnt/fx100", size_bytes=12_000_000_000_000)
    facts.links["ens1f0"] = parse_ethtool("ens1f0", _read("ethtool_link_down.txt"))
    facts.rdma = apply_gid_attrs(parse_ibv_devinfo(_read("ibv_devinfo_two_ports.txt")),
                                 _read("sysfs_gid_attrs_grep.txt").replace("RoCE v2", "IB/RoCE v1"))
    facts.versions["vllm"] = "0.19.0"
    m = compare_facts(node, facts)
    acc = m["accelerators"]["match"]
    assert acc["value"] is False and "count 7 cards / 7 devices, not 8" in acc["detail"]
    assert m["storage"]["fx100"]["drives"]["match"]["value"] is False
    raid = m["storage"]["fx100"]["raid"]["match"]
    assert raid["value"] is False and "expected raid0" in raid["detail"] and "raid5" in raid["detail"]
    cap = m["storage"]["fx100"]["capacity"]["match"]
    assert cap["value"] is False and "12.00 TB" in cap["detail"]
    assert m["network"]["ens1f0"]["speed"]["match"]["value"] is False
    assert "link down" in m["network"]["ens1f0"]["speed"]["match"]["detail"]
    assert m["network"]["ens1f0"]["roce"]["match"]["value"] is False
    sw = m["software"]["match"]
    assert sw["value"] is False and "vllm: expected 0.20.1, found 0.19.0" in sw["detail"]
    measured = {"nodes": {"node1": {**m, "reachable": True}}}
    verdicts = {c.id: c.verdict for c in evaluate_gate(load_gate(GATES / "G1.yaml"), measured)}
    for check in ("accelerators", "drives", "raid", "capacity", "link_speed", "roce_v2", "software"):
        assert verdicts[check] is Verdict.FAIL, check


def test_uncollected_facts_are_not_run_never_pass() -> None:
    node = _mi308x_node()
    facts = NodeFacts(node="node1", collected_at="x",
                      missing=["amd-smi", "rocm-smi", "nvme", "ethtool", "ibv_devinfo"],
                      errors={"mdadm --detail --export /dev/md0": "exit code 1: mdadm: must be super-user"})
    m = compare_facts(node, facts)
    acc = m["accelerators"]["match"]
    assert acc["value"] is None and "amd-smi" in acc["detail"]
    assert m["storage"]["fx100"]["drives"]["match"]["value"] is None
    assert m["storage"]["fx100"]["raid"]["match"]["value"] is None
    assert "super-user" in m["storage"]["fx100"]["raid"]["match"]["detail"]
    assert m["network"]["ens1f0"]["roce"]["match"]["value"] is None
    assert m["software"]["match"]["value"] is None
    measured = {"nodes": {"node1": {**m, "reachable": True}}}
    results = evaluate_gate(load_gate(GATES / "G1.yaml"), measured)
    verdicts = {c.id: c.verdict for c in results}
    assert verdicts["accelerators"] is Verdict.NOT_RUN and verdicts["software"] is Verdict.NOT_RUN
    assert decide(results).verdict is not Verdict.PASS


def _acc_leaf(node: Node, devs: list[Any]) -> dict[str, Any]:
    facts = NodeFacts(node=node.name, collected_at="x", accelerators=devs)
    leaf: dict[str, Any] = compare_facts(node, facts)["accelerators"]["match"]
    return leaf


def _acc_node(accelerators: dict[str, Any]) -> Node:
    return _mi308x_node(accelerators=accelerators, storage=[], network=[], software={})


def test_partitioned_gpus_and_multi_chip_npus_count_either_way() -> None:
    cpx = parse_amdsmi_static(_read("amdsmi_static_mi300x_cpx_nps4.json"))
    for count in (8, 64):
        leaf = _acc_leaf(_acc_node({"model": "MI300X", "count": count}), cpx)
        assert leaf["value"] is True, leaf["detail"]
        assert "64 logical devices" in leaf["text"] and "CPX" in leaf["text"]
    assert _acc_leaf(_acc_node({"model": "MI300X", "count": 16}), cpx)["value"] is False
    a3 = parse_npusmi_info(_read("npusmi_info_a3_two_chips_per_npu_26.0.rc2.txt"))
    npu = Node.model_validate({"name": "a3", "host": "h", "platform": "ascend910b",
                               "accelerators": {"model": "Ascend910", "count": 2, "memory": "64 GB"}})
    leaf = _acc_leaf(npu, a3)
    assert leaf["value"] is True, leaf["detail"]


def test_memory_tolerance_reads_gb_as_decimal_or_binary() -> None:
    gpus = parse_amdsmi_static(_read("amdsmi_static_list_mi308x_spx.json"))  # 196592 MiB each
    cases = (("192 GB", True), ("192 GiB", True), ("206 GB", True), ("128 GB", False), ("256 GB", False))
    for mem, ok in cases:
        leaf = _acc_leaf(_acc_node({"model": "MI308X", "count": 8, "memory": mem}), gpus)
        assert leaf["value"] is ok, (mem, leaf["detail"])


def test_model_and_version_rules() -> None:
    assert model_matches("MI308X", "AMD Instinct MI308X OAM")
    assert model_matches("Ascend910B3", "910B3")
    assert model_matches("H100", "NVIDIA H100 80GB HBM3")
    assert not model_matches("Ascend910B3", "Ascend910")
    assert not model_matches("MI308X", "AMD Instinct MI300X")
    assert not model_matches("", "anything")
    assert version_matches("0.20.1", "0.20.1+rocm644") and version_matches("6.4", "6.4.0-47")
    assert version_matches("*", "1") and not version_matches("*", None)
    assert not version_matches("0.20", "0.201") and not version_matches("0.20.1", "0.20.10")


def test_no_expectations_no_leaves() -> None:
    node = Node.model_validate({"name": "bare", "host": "h"})
    assert compare_facts(node, NodeFacts(node="bare", collected_at="x")) == {}

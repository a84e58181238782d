"""The facts the hardware fingerprint adds (CPU model, memory size, the models of the devices behind
a storage target), parsed from captured outputs (tests/data/facts/SOURCES.md) and collected on this
machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.config.inventory import Node
from harness.facts.collect import collect_facts
from harness.facts.parsers import FactsParseError
from harness.facts.parsers.storage import parse_lsblk_models
from harness.facts.parsers.system import parse_lscpu_model, parse_meminfo_total
from harness.remote.local import LocalExecutor

DATA = Path(__file__).resolve().parents[1] / "data" / "facts"


def test_lscpu_model_name_and_not_the_bios_one() -> None:
    assert parse_lscpu_model((DATA / "lscpu_kvm_epyc.txt").read_text()) == "AMD EPYC"
    text = "Vendor ID: HiSilicon\nBIOS Model name: HUAWEI Kunpeng 920 5250\nModel name:  Kunpeng-920\n"
    assert parse_lscpu_model(text) == "Kunpeng-920"
    with pytest.raises(FactsParseError, match="lscpu"):
        parse_lscpu_model("Architecture: aarch64\n")


def test_meminfo_total_in_bytes() -> None:
    assert parse_meminfo_total((DATA / "proc_meminfo_24g.txt").read_text()) == 24683664 * 1024
    with pytest.raises(FactsParseError, match="MemTotal"):
        parse_meminfo_total("MemFree: 1 kB\n")


def test_lsblk_models_of_a_raid_and_its_members() -> None:
    models = parse_lsblk_models((DATA / "lsblk_inverse_md_raid0.json").read_text())
    assert models == ["Dell Ent NVMe CM7 E3.S RI 3.84TB", "SAMSUNG MZWLO3T8HCLS-00A07"]  # padding folded
    assert parse_lsblk_models((DATA / "lsblk_inverse_virtio.json").read_text()) == []  # no model: known, empty
    with pytest.raises(FactsParseError, match="lsblk"):
        parse_lsblk_models('{"devices": []}')


def test_collected_on_this_machine(tmp_path: Path) -> None:
    node = Node.model_validate({"name": "n1", "host": "localhost", "connection": "local",
                                "storage": [{"name": "tier", "path": str(tmp_path)}]})
    facts = collect_facts(LocalExecutor("n1"), node)
    assert facts.cpu_model and facts.memory_bytes and facts.memory_bytes > 2**28, facts.errors
    meminfo = Path("/proc/meminfo").read_text()
    assert facts.memory_bytes == parse_meminfo_total(meminfo)
    tier = facts.targets["tier"]
    assert tier.mount is not None and tier.device_models is not None, facts.errors  # a list, maybe empty
    assert "lscpu" in facts.raw

"""Facts parsers on captured tool outputs (tests/data/facts, provenance in SOURCES.md).

GPUs, NPUs, NVMe arrays and RDMA NICs cannot run here, so these tests use real output formats
captured from public reports and documentation (see SOURCES.md for which are verbatim)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.facts.parsers import FactsParseError
from harness.facts.parsers.amd import parse_amdsmi_static, parse_rocmsmi_json
from harness.facts.parsers.ascend import parse_npusmi_board, parse_npusmi_info
from harness.facts.parsers.network import apply_gid_attrs, parse_ethtool, parse_ibv_devinfo, parse_sysfs_speed
from harness.facts.parsers.nvidia import parse_nvidia_smi_csv
from harness.facts.parsers.storage import (
    mount_for,
    parse_df,
    parse_mdadm_export,
    parse_nvme_list,
    parse_proc_mounts,
)
from harness.facts.parsers.system import (
    parse_cann_version,
    parse_fio_version,
    parse_nvcc_version,
    parse_os_release,
    parse_py_versions,
    parse_rocm_version,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "facts"
GIB = 2**30


def _read(name: str) -> str:
    return (DATA / name).read_text()


def test_every_sample_has_a_documented_source() -> None:
    sources = _read("SOURCES.md")
    samples = [p.name for p in DATA.iterdir() if p.name != "SOURCES.md"]
    assert samples
    for name in samples:
        assert f"`{name}`" in sources or name.split(".")[0] in sources, f"{name} has no source in SOURCES.md"


# -- AMD -------------------------------------------------------------------------------------------

def test_amdsmi_26_gpu_data_prefers_board_product_name_over_generic_market_name() -> None:
    gpus = parse_amdsmi_static(_read("amdsmi_static_gpu_data_mi308x_amdsmi26.json"))
    assert len(gpus) == 8 and len({g.card for g in gpus}) == 8
    assert all(g.model == "AMD Instinct MI308X OAM" for g in gpus)
    assert "AMD Instinct MI300 Series" in gpus[0].names
    assert gpus[0].memory_bytes == 196592 * 2**20  # amd-smi's "MB" is MiB: 192 GiB
    assert gpus[0].compute_partition == "SPX" and gpus[0].bus_id == "0000:0c:00.0"


def test_amdsmi_old_top_level_list_with_string_sizes() -> None:
    gpus = parse_amdsmi_static(_read("amdsmi_static_list_mi308x_spx.json"))
    assert [g.index for g in gpus] == list(range(8))
    assert gpus[7].memory_bytes == 196592 * 2**20
    assert gpus[0].model in ("AMD Instinct MI308X OAM", "AMD Instinct MI308X")


def test_amdsmi_cpx_partitions_group_into_physical_cards() -> None:
    gpus = parse_amdsmi_static(_read("amdsmi_static_mi300x_cpx_nps4.json"))
    assert len(gpus) == 64
    assert len({g.card for g in gpus}) == 8
    primaries = [g for g in gpus if g.chip == 0]
    assert len(primaries) == 8 and all(g.compute_partition == "CPX" for g in primaries)
    assert all(g.compute_partition is None for g in gpus if g.chip != 0)  # "N/A" is not a mode
    assert [g.chip for g in gpus if g.card == 3] == list(range(8))


def test_amdsmi_no_gpus_and_garbage() -> None:
    assert parse_amdsmi_static(_read("amdsmi_static_no_gpu.json")) == []
    assert parse_amdsmi_static("[]") == []
    with pytest.raises(FactsParseError, match="amd-smi"):
        parse_amdsmi_static("AMDSMI_STATUS_NOT_INIT - Device not initialized\n")
    with pytest.raises(FactsParseError, match="gpu_data"):
        parse_amdsmi_static('{"gpus": []}')


def test_rocmsmi_fallback() -> None:
    gpus = parse_rocmsmi_json(_read("rocmsmi_rx7800xt_6.2.4.json"))
    assert len(gpus) == 1 and gpus[0].memory_bytes == 17163091968
    assert "7800 XT" in gpus[0].model
    mi250 = parse_rocmsmi_json(_read("rocmsmi_mi250x_productname.json"))
    assert mi250[0].model.startswith("AMD INSTINCT MI200") and mi250[0].memory_bytes is None


# -- Ascend ----------------------------------------------------------------------------------------

def test_npusmi_910b3_two_lines_per_npu_and_empty_process_table() -> None:
    npus = parse_npusmi_info(_read("npusmi_info_910b3_23.0.rc2.txt"))
    assert [(n.card, n.chip, n.model) for n in npus] == [(0, 0, "910B3"), (1, 0, "910B3")]
    assert npus[0].memory_bytes == 64 * GIB and npus[1].bus_id == "0000:C2:00.0"
    assert npus[0].health == "OK"


def test_npusmi_training_server_stops_at_the_process_table() -> None:
    npus = parse_npusmi_info(_read("npusmi_info_atlas800_training_24.1.RC2.txt"))
    assert len(npus) == 8 and [n.card for n in npus] == list(range(8))
    assert all(n.memory_bytes == 32 * GIB for n in npus)  # HBM column, not Memory-Usage (15137)
    assert npus[3].health == "Warning"
    old = parse_npusmi_info(_read("npusmi_info_atlas800_910a_22.0.3.txt"))
    assert len(old) == 8 and old[0].model == "910A"


def test_npusmi_cards_with_several_chips() -> None:
    a3 = parse_npusmi_info(_read("npusmi_info_a3_two_chips_per_npu_26.0.rc2.txt"))
    assert [(n.card, n.chip, n.index) for n in a3] == [(0, 0, 0), (0, 1, 1), (1, 0, 2), (1, 1, 3)]
    assert len({n.card for n in a3}) == 2 and all(n.memory_bytes == 64 * GIB for n in a3)
    duo = parse_npusmi_info(_read("npusmi_info_atlas800_inference_310_four_chips.txt"))
    assert len(duo) == 4 and {n.card for n in duo} == {6}
    assert [n.index for n in duo] == [3, 4, 5, 6]  # the Device column
    assert duo[0].memory_bytes == 8192 * 2**20  # no HBM column: Memory-Usage total


def test_npusmi_board_and_broken_tables() -> None:
    board = parse_npusmi_board(_read("npusmi_board_910b3.txt"))
    assert board["Software Version"] == "23.0.rc2" and board["Chip Count"] == "1"
    with pytest.raises(FactsParseError):
        parse_npusmi_board("")
    text = _read("npusmi_info_910b3_23.0.rc2.txt").replace("0000:C2:00.0", "garbage     ")
    with pytest.raises(FactsParseError, match="NPU 1"):
        parse_npusmi_info(text)
    header_only = "\n".join(_read("npusmi_info_910b3_23.0.rc2.txt").splitlines()[:6])
    assert parse_npusmi_info(header_only) == []


# -- NVIDIA ----------------------------------------------------------------------------------------

def test_nvidia_smi_csv_both_formats_and_no_devices() -> None:
    gpus, driver = parse_nvidia_smi_csv(_read("nvidiasmi_query_noheader_nounits.csv"))
    assert len(gpus) == 4 and gpus[0].model == "NVIDIA H100 80GB HBM3"
    assert gpus[0].memory_bytes == 81559 * 2**20 and driver == "535.104.05"
    gpus, driver = parse_nvidia_smi_csv(_read("nvidiasmi_query_header_units.csv"))
    assert len(gpus) == 2 and gpus[1].memory_bytes == 40 * GIB and driver == "470.57.02"
    assert parse_nvidia_smi_csv(_read("nvidiasmi_no_devices.txt")) == ([], None)
    with pytest.raises(FactsParseError, match="fields"):
        parse_nvidia_smi_csv("0, H100\n")


# -- storage ---------------------------------------------------------------------------------------

def test_nvme_list_old_and_new_nvme_cli() -> None:
    v1 = parse_nvme_list(_read("nvme_list_v1_intel.json"))
    assert v1[0].model == "INTEL SSDPE2KX080T8" and v1[0].size_bytes is None  # negative = overflowed
    flat = parse_nvme_list(_read("nvme_list_v2.3_flat.json"))
    assert [d.device for d in flat] == ["/dev/nvme0n1", "/dev/nvme1n1"]
    assert flat[0].size_bytes == 4000787030016
    nested = parse_nvme_list(_read("nvme_list_v2.11_nested.json"))
    assert [d.device for d in nested] == ["/dev/nvme0n1", "/dev/nvme1n1"]
    assert nested[0].controller == "nvme0" and nested[0].transport == "pcie"
    assert nested[1].model == "Seagate FireCuda 530 ZP4000GM30023"
    assert parse_nvme_list("") == [] and parse_nvme_list('{"Devices": []}') == []
    # NVMe-oF with native multipath: the namespace hangs off the subsystem, the model off its controllers
    fabric = {"Devices": [{"HostNQN": "h", "Subsystems": [{
        "Subsystem": "nvme-subsys5", "SubsystemNQN": "nqn.fx100",
        "Controllers": [{"Controller": "nvme5", "ModelNumber": "FX100", "SerialNumber": "s5", "Firmware": "1",
                         "Transport": "rdma", "Namespaces": [], "Paths": []}],
        "Namespaces": [{"NameSpace": "nvme5n1", "NSID": 1, "PhysicalSize": 3840000000000}]}]}]}
    (drive,) = parse_nvme_list(json.dumps(fabric))
    assert (drive.device, drive.model, drive.transport) == ("/dev/nvme5n1", "FX100", "rdma")
    with pytest.raises(FactsParseError):
        parse_nvme_list('{"Devices": [{"Name": "x"}]}')


def test_mdadm_export_members_in_role_order() -> None:
    r0 = parse_mdadm_export("/dev/md0", _read("mdadm_export_raid0.txt"))
    assert r0.level == "raid0" and r0.n_devices == 2 and r0.members == ["/dev/vda1", "/dev/vda2"]
    r5 = parse_mdadm_export("/dev/md2", _read("mdadm_export_raid5.txt"))
    assert r5.members == ["/dev/sde", "/dev/sdd", "/dev/sdi", "/dev/sdg", "/dev/sdh", "/dev/sdf"]
    with pytest.raises(FactsParseError, match="MD_LEVEL"):
        parse_mdadm_export("/dev/md9", "mdadm: cannot open /dev/md9: No such file or directory\n")


def test_mounts_and_df() -> None:
    mounts = parse_proc_mounts(_read("proc_mounts.txt"))
    assert mount_for("/mnt/fx100/kv", mounts).source == "/dev/md0"  # type: ignore[union-attr]
    assert mount_for("/mnt/fx1000", mounts).target == "/"  # type: ignore[union-attr]
    assert mount_for("/mnt/nfs", mounts).fstype == "nfs4"  # type: ignore[union-attr]
    assert any(m.target == "/mnt/with space" for m in mounts)
    df = parse_df(_read("df_B1_output.txt"))
    assert df[0].size_bytes == 13999848439808 and df[0].target == "/mnt/fx100"
    with pytest.raises(FactsParseError, match="-B1"):
        parse_df("Filesystem Type Size Used Avail Mounted on\n/dev/md0 xfs 13T 92G 13T /mnt/fx100\n")


# -- network ---------------------------------------------------------------------------------------

def test_ethtool_and_sysfs_speed() -> None:
    up = parse_ethtool("ens1f0", _read("ethtool_200g.txt"))
    assert up.speed_bps == 200 * 10**9 and up.link_detected is True
    down = parse_ethtool("ens1f1", _read("ethtool_link_down.txt"))
    assert down.speed_bps is None and down.link_detected is False
    assert parse_sysfs_speed("eth0", "100000\n").speed_bps == 100 * 10**9
    assert parse_sysfs_speed("eth0", "-1\n").speed_bps is None
    with pytest.raises(FactsParseError):
        parse_ethtool("x", "netlink error: no device matches name (offset 24)\n")


def test_rdma_ports_and_roce_v2_gids() -> None:
    ports = parse_ibv_devinfo(_read("ibv_devinfo_two_ports.txt"))
    assert [(p.device, p.port, p.link_layer) for p in ports] == [
        ("mlx5_0", 1, "Ethernet"), ("mlx5_1", 1, "Ethernet")]
    assert ports[0].state.startswith("PORT_ACTIVE")
    apply_gid_attrs(ports, _read("sysfs_gid_attrs_grep.txt"))
    assert ports[0].gid_types == ["IB/RoCE v1", "RoCE v2"] and ports[0].netdevs == ["ens1f0"]
    assert ports[1].gid_types == ["IB/RoCE v1"]
    assert parse_ibv_devinfo("No IB devices found\n") == []


# -- system ----------------------------------------------------------------------------------------

def test_os_and_versions() -> None:
    os_info = parse_os_release(_read("os_release_ubuntu_24.04.txt"), "6.8.0-79-generic\n")
    assert (os_info.id, os_info.version_id, os_info.kernel) == ("ubuntu", "24.04", "6.8.0-79-generic")
    assert os_info.pretty_name == "Ubuntu 24.04.2 LTS"
    assert parse_cann_version(_read("cann_ascend_toolkit_install.info")) == "8.0.RC2"
    assert parse_rocm_version(_read("rocm_info_version.txt")) == "6.4.0-47"
    assert parse_nvcc_version(_read("nvcc_version.txt")) == "12.4"
    assert parse_fio_version("fio-3.33\n") == "3.33"
    assert parse_py_versions('{"python": "3.11.2", "vllm": null}\n') == {"python": "3.11.2", "vllm": None}
    with pytest.raises(FactsParseError):
        parse_py_versions("Traceback (most recent call last):\n")

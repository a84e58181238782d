"""The G4 node-health parsers against captured kernel logs, smart-log JSON and mdstat (SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.facts.parsers.common import FactsParseError
from harness.facts.parsers.health import classify_kernel_line, kernel_faults, parse_mdstat, parse_smart_log

DATA = Path(__file__).resolve().parents[1] / "data" / "facts"


def read(name: str) -> str:
    return (DATA / name).read_text()


def test_storage_faults_in_dmesg_are_found_line_by_line() -> None:
    faults = kernel_faults(read("kernel_storage_faults_dmesg.txt"))
    kinds = [f.kind for f in faults]
    lines = [f.line for f in faults]
    assert kinds.count("storage") == 10
    assert kinds.count("network") == 1
    assert any("QID 1 timeout, aborting" in ln for ln in lines)
    assert any("reset controller" in ln for ln in lines)
    assert any("I/O error, dev nvme1n1" in ln for ln in lines)
    assert any("blk_update_request: I/O error" in ln for ln in lines)
    assert any("Disk failure on nvme2n1p4" in ln for ln in lines)
    # the boot banner, the PM line and "resync done" are not faults
    assert not any("Linux version" in ln or "resync done" in ln or "PM: calling" in ln for ln in lines)


def test_benign_kernel_lines_of_the_same_drivers_are_not_faults() -> None:
    assert kernel_faults(read("kernel_benign_dmesg.txt")) == []


def test_journalctl_short_iso_lines() -> None:
    faults = kernel_faults(read("kernel_journalctl_short_iso.txt"))
    assert [f.kind for f in faults] == ["storage"] * 4 + ["network"]
    assert faults[-1].line.endswith("ens1f0np0: Link down")


@pytest.mark.parametrize(("line", "kind"), [
    ("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.", "accelerator"),
    ("md/raid0md0: Disk failure on nvme0n1p1 detected, failing array.", "storage"),
    ("mlx5_core 0000:3b:00.0 ens1f0np0: Link up", None),
    ("EXT4-fs (nvme0n1p1): mounted filesystem with ordered data mode", None),
])
def test_single_lines(line: str, kind: str | None) -> None:
    assert classify_kernel_line(line) == kind


def test_smart_log_v2_object_critical_warning() -> None:
    s = parse_smart_log(read("nvme_smart_log_v2.11.json"))
    assert (s.media_errors, s.critical_warning, s.num_err_log_entries, s.percent_used) == (0, 0, 212, 30)
    assert s.temperature_c == pytest.approx(50.9)


def test_smart_log_v1_integer_critical_warning_with_media_errors() -> None:
    s = parse_smart_log(read("nvme_smart_log_v1_media_errors.json"))
    assert (s.media_errors, s.critical_warning) == (3, 4)


def test_smart_log_without_media_errors_is_an_error_not_zero() -> None:
    with pytest.raises(FactsParseError, match="media_errors"):
        parse_smart_log('{"critical_warning": 0, "temperature": 300}')


def test_mdstat_degraded_mirrors() -> None:
    arrays = parse_mdstat(read("proc_mdstat_degraded_raid1.txt"))
    assert [a.name for a in arrays] == ["md125", "md126", "md127"]
    assert all(a.degraded and a.level == "raid1" and (a.expected, a.working) == (2, 1) for a in arrays)
    assert arrays[0].members == ["sda2"]


def test_mdstat_recovery_and_delayed_resync() -> None:
    arrays = {a.name: a for a in parse_mdstat(read("proc_mdstat_recovery.txt"))}
    assert not arrays["md125"].degraded
    assert arrays["md126"].degraded and arrays["md126"].action == "recovery"
    assert arrays["md127"].action == "resync"


def test_mdstat_failed_member_and_healthy_raid0() -> None:
    md0, md1 = parse_mdstat(read("proc_mdstat_failed_member.txt"))
    assert not md0.degraded and len(md0.members) == 8
    assert md1.degraded and md1.failed_members == ["sdx"]
    (healthy,) = parse_mdstat(read("proc_mdstat_healthy_raid0.txt"))
    assert healthy.level == "raid0" and not healthy.degraded and len(healthy.members) == 4
    assert parse_mdstat("Personalities : \nunused devices: <none>\n") == []


def test_amdsmi_ecc_both_root_shapes_and_na_counters() -> None:
    from harness.facts.parsers.health import parse_amdsmi_ecc

    new = parse_amdsmi_ecc(read("amdsmi_metric_ecc_gpu_data_amdsmi26.json"))
    assert [(g.gpu, g.correctable, g.faults["total_uncorrectable_count"]) for g in new] == [(0, 2, 0), (1, 0, 0)]
    old = parse_amdsmi_ecc(read("amdsmi_metric_ecc_list_amdsmi24.json"))
    assert [sorted(g.faults) for g in old] == [["total_deferred_count", "total_uncorrectable_count"]] * 2
    # warnings printed before the JSON (as amd-smi does) are skipped
    assert parse_amdsmi_ecc("SyntaxWarning: invalid escape sequence\n" + read("amdsmi_metric_ecc_list_amdsmi24.json"))


def test_amdsmi_ecc_that_can_never_show_a_fault_is_an_error() -> None:
    from harness.facts.parsers.health import parse_amdsmi_ecc

    na = '{"gpu_data": [{"gpu": 0, "ecc": {"total_uncorrectable_count": "N/A", "total_deferred_count": "N/A"}}]}'
    with pytest.raises(FactsParseError, match="N/A"):
        parse_amdsmi_ecc(na)
    with pytest.raises(FactsParseError, match="'ecc'"):
        parse_amdsmi_ecc('{"gpu_data": [{"gpu": 0, "temperature": {}}]}')


def test_amdsmi_ecc_increases_name_the_gpu_and_counter() -> None:
    from harness.facts.parsers.health import ecc_increases, parse_amdsmi_ecc

    a = parse_amdsmi_ecc(read("amdsmi_metric_ecc_gpu_data_amdsmi26.json"))
    b = parse_amdsmi_ecc(read("amdsmi_metric_ecc_gpu_data_uncorrectable.json"))
    assert ecc_increases(a, a) == []
    assert ecc_increases(a, b) == ["amd-smi: GPU 1 total_uncorrectable_count 0 -> 3",
                                   "amd-smi: GPU 1 total_deferred_count 0 -> 1"]
    assert ecc_increases(a, b[:1]) == ["amd-smi: GPU 1 no longer reported"]


def test_npusmi_health_not_ok_is_a_fault_line() -> None:
    from harness.facts.parsers.health import npu_unhealthy

    assert npu_unhealthy(read("npusmi_info_910b3_23.0.rc2.txt")) == []
    # a real capture: two of its eight NPUs report Warning
    assert npu_unhealthy(read("npusmi_info_atlas800_training_24.1.RC2.txt")) == [
        "npu-smi: NPU 3 chip 0 (xxx) health Warning", "npu-smi: NPU 7 chip 0 (xxx) health Warning"]
    assert npu_unhealthy(read("npusmi_info_910b3_alarm.txt")) == ["npu-smi: NPU 1 chip 0 (910B3) health Alarm"]
    with pytest.raises(FactsParseError):
        npu_unhealthy("+---+\n| nothing here |\n")

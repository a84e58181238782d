"""Finding 8: faults are faults.

A full reports directory exited 5 ("bug") with a traceback and an empty faults.jsonl; 3580 ENOSPC
lines in the engine log left no fault in result.json; ``commands.jsonl`` recorded only some
commands, without exit codes. Now a full disk is exit 4 with the fault recorded once space is
back, engine-side ENOSPC fails the point as a recorded fault, and every command run on a node is
in ``commands.jsonl`` with its exit code and duration.

Full disks are real: small tmpfs mounts (the tests run as root, as CI does here)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.errors import StorageFull
from harness.pipelines.shared.context import GateRun
from harness.ports import free_port
from harness.store.campaign import Campaign
from tests.pipelines.conftest import small_profile
from tests.pipelines.test_gates_local import gate, result
from tests.support.procs import HANG_GUARD_S


@pytest.fixture()
def small_fs(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], check=True)  # noqa: S603
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)  # noqa: S603


def _fill(mnt: Path) -> Path:
    filler = mnt / "filler"
    with open(filler, "wb") as fh:
        try:
            while True:
                fh.write(b"\0" * 65536)
                fh.flush()
        except OSError:
            pass
    return filler


def test_full_reports_directory_is_exit_4_without_traceback(tmp_path: Path, small_fs: Path,
                                                             local_inventory: Path,
                                                             write_yaml: Callable[[str, dict[str, Any]], Path]) -> None:
    prof = write_yaml("profile.yaml", small_profile(free_port()))
    _fill(small_fs)
    proc = subprocess.run([sys.executable, "-m", "harness.cli.main", "gate", "G1", "--inventory",  # noqa: S603
                           str(local_inventory), "--profile", str(prof), "--campaign", "c", "--reports",
                           str(small_fs / "reports"), "--no-progress"], capture_output=True, text=True,
                          timeout=HANG_GUARD_S)
    assert proc.returncode == 4, proc.stderr
    assert "No space left on device" in proc.stderr and "Traceback" not in proc.stderr + proc.stdout
    assert "free space and run again with --resume" in proc.stderr


def test_fault_met_on_a_full_disk_is_recorded_once_space_is_back(small_fs: Path, local_inventory: Path,
                                                                  tmp_path: Path) -> None:
    prof = tmp_path / "p.yaml"
    prof.write_text("name: p\n")
    with Campaign.open(small_fs / "reports", "c", inventory_path=local_inventory, profile_path=prof) as camp:
        gd = camp.gate_dir("G2")
        run = GateRun("G2", None, None, None, camp, gd)  # type: ignore[arg-type]
        filler = _fill(small_fs)
        with pytest.raises(StorageFull):
            gd.write_evidence("x.bin", b"y" * 200_000)
        run.fault("the reports directory is full")  # must not raise: kept in memory
        assert run.faults and not run.flush_faults(wait_s=0)
        filler.unlink()
        assert run.flush_faults(wait_s=5)
        recs = gd.read_jsonl("faults.jsonl")
        assert recs == [{"fault": "the reports directory is full"}]


@pytest.mark.slow
def test_engine_enospc_fails_the_point_as_a_recorded_fault(tmp_path: Path, local_inventory: Path,
                                                           write_yaml: Callable[[str, dict[str, Any]], Path]) -> None:
    """The KV tier (``<target>/kvgate-kv``) is a tmpfs too small for one chunk: the emulator serves
    by recomputing and logs ENOSPC; the points are faults, not measurements, and G2 exits 4."""
    data = small_profile(free_port())
    data["arms"][0] = {"name": "baseline", "storage": "tier", "lmcache": {"max_local_disk_size": 1}}
    data["recompute"] = None
    data["load"]["repetitions"] = 2
    prof = write_yaml("profile.yaml", data)
    reports = tmp_path / "reports"
    assert gate("G1", local_inventory, prof, reports, "e") == 0
    kv = tmp_path / "tier" / "kvgate-kv"
    kv.mkdir()
    # room for kvgate's directories and marker, not for one KV chunk
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(kv)], check=True)  # noqa: S603
    try:
        code = gate("G2", local_inventory, prof, reports, "e")
    finally:
        subprocess.run(["umount", "-l", str(kv)], check=False)  # noqa: S603
    g2 = result(reports, "e", "G2")
    assert code == 4, g2["faults"]
    assert any("no space left on device" in f for f in g2["faults"])
    commands = [json.loads(x) for x in (reports / "e" / "G2" / "evidence" / "commands.jsonl").read_text().splitlines()]
    ran = [c for c in commands if "exit_code" in c]  # the others describe a launch (the engine's env + argv)
    assert len(ran) > 20 and all(isinstance(c["duration_s"], float) for c in ran)
    assert any(c["argv"][0].endswith("fio") and c["exit_code"] == 0 for c in ran)
    argvs = [" ".join(c["argv"]) for c in commands]
    assert any(a.startswith("kvgate-detached") for a in argvs)  # the engine start
    assert any(a.startswith("kvgate-rm") for a in argvs)  # the KV removal, by containment

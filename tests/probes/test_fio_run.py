"""fio probes really run: fio 3.33 on small temp files (a few MiB, 1 s per set), locally through the
LocalExecutor; the figures reported are fio's own figures from the raw JSON of the same run."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.config.inventory import StorageTarget
from harness.config.profile import FioSpec
from harness.ports import free_port
from harness.probes.errors import ProbeError, ProbeRefused
from harness.probes.fio_parse import parse_fio_file
from harness.probes.fio_run import FioProbeResult, ProbeFailure, bw_log_series, run_fio_probe, run_fio_probes
from harness.probes.measured import fio_tree
from harness.remote.local import LocalExecutor

pytestmark = pytest.mark.fio

SPEC = FioSpec(
    job_sets=["seq-read", "seq-write"], size="4 MiB", runtime="1s", ramp_time="0s", numjobs=2, iodepth=8
)


def test_local_probe_reports_fios_own_bandwidth(tmp_path: Path) -> None:
    target_dir = tmp_path / "tier"
    target_dir.mkdir()
    out = tmp_path / "out"
    lines: list[str] = []
    spec = SPEC.model_copy(update={"job_sets": ["seq-read", "seq-write", "rand-read", "mixed"]})
    res = run_fio_probe(
        LocalExecutor("n1"), StorageTarget(name="t1", path=str(target_dir)), spec, out, progress=lines.append
    )
    assert res.node == "n1" and res.target == "t1" and res.fio_version == "fio-3.33"
    assert res.engine in ("io_uring", "libaio", "psync")
    raw = json.loads(res.raw_output.read_text())
    jobs = {j["jobname"]: j for j in raw["jobs"]}
    assert set(jobs) == {"seq-read", "seq-write", "rand-read", "mixed"}
    sr, sw, mixed = res.job_sets["seq-read"], res.job_sets["seq-write"], res.job_sets["mixed"]
    assert sr.read_bw_bytes == jobs["seq-read"]["read"]["bw_bytes"] > 0
    assert sr.write_bw_bytes is None  # nothing written in a read set: not measured, never 0
    assert sw.write_bw_bytes == jobs["seq-write"]["write"]["bw_bytes"] > 0
    assert sw.read_bw_bytes is None
    assert mixed.read_bw_bytes == jobs["mixed"]["read"]["bw_bytes"]
    assert mixed.write_bw_bytes == jobs["mixed"]["write"]["bw_bytes"]
    assert res.job_sets["rand-read"].read_iops == jobs["rand-read"]["read"]["iops"]
    assert (
        sr.read is not None
        and sr.read.percentiles_ns[99.0] == jobs["seq-read"]["read"]["clat_ns"]["percentile"]["99.000000"]
    )
    # honest measurement: direct I/O, and the job file kept as evidence says so
    assert "direct=1" in res.jobfile.read_text().splitlines()
    assert all(
        j["job options"].get("direct", raw["global options"].get("direct")) == "1" for j in raw["jobs"]
    )
    # steady state from fio's own bandwidth logs, kept as evidence too
    assert sr.steady_state is not None and sr.steady_state.samples >= 3
    assert res.bw_logs and all(p.exists() for p in res.bw_logs)
    # the files under the target are gone; the evidence stays
    assert list(target_dir.iterdir()) == []
    assert (out / "fio-n1-t1.cmd").read_text().startswith(res.command.split()[0])
    assert parse_fio_file(res.raw_output).final.jobs
    assert any("fio seq-read" in line for line in lines)
    # results.json material
    tree = fio_tree([res], base=out)
    leaf = tree["nodes"]["n1"]["storage"]["t1"]["fio"]["seq_read_bw"]  # type: ignore[index]
    assert leaf["value"] == jobs["seq-read"]["read"]["bw_bytes"]
    assert leaf["evidence"] == ["fio-n1-t1.json", "fio-n1-t1.fio"] and "direct=1" in leaf["detail"]
    assert (
        tree["nodes"]["n1"]["storage"]["t1"]["fio"]["mixed_write_bw"]["value"]
        == (  # type: ignore[index]
            jobs["mixed"]["write"]["bw_bytes"]
        )
    )
    doc = res.to_json(relative_to=out)
    assert doc["evidence"]["raw_output"] == "fio-n1-t1.json"  # type: ignore[index]


def test_files_removed_when_the_probe_fails(tmp_path: Path) -> None:
    target_dir = tmp_path / "tier"
    target_dir.mkdir()
    spec = SPEC.model_copy(update={"ioengine": "nosuchengine"})
    with pytest.raises(ProbeError, match="node n1, target t1: no fio I/O engine works"):
        run_fio_probe(
            LocalExecutor("n1"), StorageTarget(name="t1", path=str(target_dir)), spec, tmp_path / "o"
        )
    assert list(target_dir.iterdir()) == []


def test_refusal_writes_nothing(tmp_path: Path) -> None:
    target_dir = tmp_path / "tier"
    target_dir.mkdir()
    with pytest.raises(ProbeRefused, match="not enough free space"):
        run_fio_probe(
            LocalExecutor("n1"),
            StorageTarget(name="t1", path=str(target_dir), min_free="1 PB"),
            SPEC,
            tmp_path / "o",
        )
    assert list(target_dir.iterdir()) == []


def test_many_nodes_in_parallel_one_failure_does_not_hide_others(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    spec = SPEC.model_copy(update={"job_sets": ["seq-read"], "numjobs": 1})
    results = run_fio_probes(
        [
            (LocalExecutor("n1"), StorageTarget(name="a", path=str(a))),
            (LocalExecutor("n2"), StorageTarget(name="b", path=str(b), min_free="1 PB")),
        ],
        spec,
        tmp_path / "out",
    )
    ok = [r for r in results if isinstance(r, FioProbeResult)]
    bad = [r for r in results if isinstance(r, ProbeFailure)]
    assert [r.node for r in ok] == ["n1"] and ok[0].job_sets["seq-read"].read_bw_bytes
    assert [(f.node, f.target) for f in bad] == [("n2", "b")] and isinstance(bad[0].error, ProbeRefused)


def test_bw_log_series_sums_jobs_per_window() -> None:
    # two jobs' windowed logs (time ms, KiB/s, ddir, bs, offset), as fio 3.33 writes them
    a = b"100, 1000, 0, 0, 0\n200, 1100, 0, 0, 0\n300, 1000, 0, 0, 0\n400, 900, 0, 0, 0\n450, 10, 0, 0, 0\n"
    b = b"101, 500, 0, 0, 0\n199, 500, 0, 0, 0\n302, 600, 0, 0, 0\n401, 500, 0, 0, 0\n"
    series = bw_log_series({"a": a, "b": b}, 100)
    assert series == [1500 * 1024.0, 1600 * 1024.0, 1600 * 1024.0, 1400 * 1024.0]


def test_client_server_two_fio_servers_on_loopback(tmp_path: Path) -> None:
    from harness.probes.fio_run import ServerSpec, run_fio_client_server

    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    servers = [
        ServerSpec(LocalExecutor("n1"), StorageTarget(name="ta", path=str(a)), "127.0.0.1", free_port()),
        ServerSpec(LocalExecutor("n2"), StorageTarget(name="tb", path=str(b)), "127.0.0.1", free_port()),
    ]
    spec = SPEC.model_copy(update={"job_sets": ["seq-read"], "numjobs": 1})
    res = run_fio_client_server(LocalExecutor("ctl"), servers, spec, tmp_path / "out")
    assert set(res.hosts) == {"n1", "n2"}
    text = res.raw_output.read_text()
    raw = json.loads(text[text.index("\n{") :] if not text.startswith("{") else text)
    per_host_raw = {
        e["port"]: e["read"]["bw_bytes"] for e in raw["client_stats"] if e["jobname"] != "All clients"
    }
    assert len(per_host_raw) == 2
    total = res.job_sets["seq-read"].read_bw_bytes
    assert total == sum(per_host_raw.values()) > 0
    assert res.per_host["n1"]["seq-read"].read_bw_bytes == per_host_raw[servers[0].port]
    assert res.per_host["n2"]["seq-read"].read_bw_bytes == per_host_raw[servers[1].port]
    # servers stopped, files removed
    assert list(a.iterdir()) == [] and list(b.iterdir()) == []
    for srv in servers:
        import socket

        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", srv.port)) != 0


def test_steady_state_from_fios_own_ss_window(tmp_path: Path) -> None:
    tier = tmp_path / "tier"
    tier.mkdir()
    spec = SPEC.model_copy(update={"job_sets": ["rand-read"], "numjobs": 1, "runtime": 3.0})
    res = run_fio_probe(
        LocalExecutor("n1"),
        StorageTarget(name="t1", path=str(tier)),
        spec,
        tmp_path / "out",
        steady_state="fio",
    )
    assert "ss=bw:20%" in res.jobfile.read_text().splitlines()
    raw = json.loads(res.raw_output.read_text())
    ss_raw = raw["jobs"][0]["steadystate"]
    steady = res.job_sets["rand-read"].steady_state
    assert steady is not None and steady.source.startswith("fio ss= window samples")
    assert steady.samples == len(ss_raw["data"]["bw"]) >= 3
    assert steady.mean == pytest.approx(sum(ss_raw["data"]["bw"]) / len(ss_raw["data"]["bw"]))


@pytest.fixture
def loop_device(tmp_path: Path) -> Iterator[str]:
    """A real block device: a loop device over a 16 MiB file (root only), detached afterwards."""
    import shutil
    import subprocess

    losetup = shutil.which("losetup")
    if losetup is None or os.geteuid() != 0:
        pytest.skip("needs root and losetup for a loop block device")
    image = tmp_path / "disk.img"
    image.write_bytes(b"\0" * 16 * 2**20)
    made = subprocess.run([losetup, "-f", "--show", str(image)], capture_output=True, text=True)  # noqa: S603
    if made.returncode != 0:
        pytest.skip(f"no loop device here: {made.stderr.strip()}")
    dev = made.stdout.strip()
    try:
        yield dev
    finally:
        subprocess.run([losetup, "-d", dev], check=False)  # noqa: S603


def test_raw_device_probe_when_the_inventory_allows_it(loop_device: str, tmp_path: Path) -> None:
    spec = SPEC.model_copy(update={"numjobs": 1})
    with pytest.raises(ProbeRefused, match="raw block device"):
        run_fio_probe(LocalExecutor("n1"), StorageTarget(name="raw", path=loop_device), spec, tmp_path / "o")
    target = StorageTarget(name="raw", path=loop_device, allow_destructive=True)
    res = run_fio_probe(LocalExecutor("n1"), target, spec, tmp_path / "out")
    raw = json.loads(res.raw_output.read_text())
    jobs = {j["jobname"]: j for j in raw["jobs"]}
    assert "filename=" + loop_device in res.jobfile.read_text().splitlines()
    assert res.job_sets["seq-read"].read_bw_bytes == jobs["seq-read"]["read"]["bw_bytes"] > 0
    assert res.job_sets["seq-write"].write_bw_bytes == jobs["seq-write"]["write"]["bw_bytes"] > 0
    assert os.path.exists(loop_device)  # the device node itself is never removed


def test_client_server_refuses_a_port_in_use(tmp_path: Path) -> None:
    import socket

    from harness.probes.fio_run import ServerSpec, run_fio_client_server

    tier = tmp_path / "a"
    tier.mkdir()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        srv = ServerSpec(LocalExecutor("n1"), StorageTarget(name="ta", path=str(tier)), "127.0.0.1", port)
        with pytest.raises(ProbeRefused, match=f"node n1, target ta: port {port} is already in use"):
            run_fio_client_server(LocalExecutor("ctl"), [srv], SPEC, tmp_path / "out")
    assert list(tier.iterdir()) == []

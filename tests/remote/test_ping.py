"""``kvgate ping`` (harness.remote.ping + harness.cli.cmd_ping) against real loopback sshd nodes."""

from __future__ import annotations

import getpass
import json
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from harness.cli.main import run
from harness.remote.local import LocalExecutor
from harness.remote.ping import measure_clock, ping_node
from tests.support.sshd import SshCluster

pytestmark = pytest.mark.ssh

Factory = Callable[..., SshCluster]


def test_ping_table_and_exit_4_naming_the_dead_node(ssh_cluster: Factory,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    cluster = ssh_cluster(3)
    cluster.kill("node2")
    rc = run(["ping", "--inventory", str(cluster.inventory_path)])
    out, err = capsys.readouterr()
    assert rc == 4
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["node", "reachable", "rtt"]
    rows = {line.split()[0]: line for line in lines[2:]}
    assert set(rows) == {"node0", "node1", "node2"}
    assert rows["node0"].split()[1] == "yes" and rows["node2"].split()[1] == "NO"
    assert "Connection refused" in rows["node2"]
    assert "node2" in err and "1 of 3 node(s) unreachable" in err
    assert "node0" not in err


def test_ping_json_facts(ssh_cluster: Factory, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = ssh_cluster(2)
    rc = run(["ping", "--inventory", str(cluster.inventory_path), "--json"])
    out, _ = capsys.readouterr()
    assert rc == 0
    data = json.loads(out)
    assert [d["node"] for d in data] == ["node0", "node1"]
    fio = subprocess.run(["fio", "--version"], capture_output=True, text=True).stdout.strip() \
        if shutil.which("fio") else None
    os_release = Path("/etc/os-release").read_text()
    pretty = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', os_release, re.M)
    for d in data:
        assert d["reachable"] is True and d["error"] == ""
        assert d["user"] == getpass.getuser()
        assert pretty is not None and d["os"] == pretty.group(1)
        assert re.fullmatch(r"\d+\.\d+\.\d+", d["python"])
        assert d["fio"] == fio
        assert 0 < d["rtt_ms"] < 5000
        # Same machine, same clock: the offset is within the measurement's own uncertainty (+slack).
        assert abs(d["clock_offset_ms"]) <= d["clock_uncertainty_ms"] + 20


def test_ping_unknown_host_keys_then_accept(ssh_cluster: Factory, capsys: pytest.CaptureFixture[str]) -> None:
    cluster = ssh_cluster(2, known=False)
    assert run(["ping", "--inventory", str(cluster.inventory_path)]) == 4
    _, err = capsys.readouterr()
    assert "unknown host key" in err and "--accept-new-host-keys" in err
    assert run(["ping", "--inventory", str(cluster.inventory_path), "--accept-new-host-keys"]) == 0
    assert len(cluster.known_hosts.read_text().splitlines()) == 2
    assert run(["ping", "--inventory", str(cluster.inventory_path)]) == 0


def test_ping_bad_inventory_is_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "inv.yaml"
    bad.write_text("cluster: x\nnodes:\n  - name: a\n    host: h\n    prot: 22\n")
    assert run(["ping", "--inventory", str(bad)]) == 2
    _, err = capsys.readouterr()
    assert "inv.yaml:5" in err and "prot" in err


def test_ping_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["ping", "--help"]) == 0
    assert "--accept-new-host-keys" in capsys.readouterr().out


def test_ping_node_local_and_clock() -> None:
    ex = LocalExecutor("me")
    r = ping_node(ex)
    assert r.reachable and r.node == "me" and r.user == getpass.getuser()
    offset, uncertainty, rtt = measure_clock(ex)
    assert rtt > 0 and uncertainty == rtt / 2 and abs(offset) <= uncertainty + 0.02

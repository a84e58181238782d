"""Load runs on a node through the agent: detached, polled, records pulled incrementally, and
reattached after a controller restart (LocalExecutor) or an SSH outage (a real loopback sshd)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from harness.agent.deploy import ensure_agent
from harness.agent.remote import AgentLoad, AgentLoadError, poll_load, pull_records, start_load, wait_load
from harness.load.records import read_records
from harness.remote.base import Executor
from harness.remote.local import LocalExecutor
from tests.load.sse_server import SSE_HEAD, ScriptedServer, chunk, completion_chunk, event, stream


def _slow_stream(r: Any) -> list[Any]:
    # about 120 ms per request: a 24-request run at concurrency 2 lasts about 1.5 s
    parts: list[Any] = [SSE_HEAD]
    for i in range(6):
        parts += [("sleep", 0.02), chunk(event(completion_chunk(f"w{i} ")))]
    return parts + stream([])[1:]


def _args(url: str, n: int = 24) -> list[str]:
    return ["--endpoint", url, "--model", "m", "--workload", "random", "--input-len", "8", "--output-len", "6",
            "--num-requests", str(n), "--concurrency", "2"]


def _wait_records(executor: Executor, run: AgentLoad, at_least: int, timeout: float = 20) -> int:
    got = 0
    deadline = time.monotonic() + timeout
    while got < at_least and time.monotonic() < deadline:
        got += len(pull_records(executor, run))
        time.sleep(0.05)
    return got


def _check_complete(run: AgentLoad, n: int) -> None:
    local = run.local_records.read_bytes()
    remote = (Path(run.remote_out) / "records.jsonl").read_bytes()  # same machine: compare bytes
    assert local == remote
    ids = [r["request_id"] for r in read_records(run.local_records)]
    assert len(ids) == n == len(set(ids))


def test_local_run_with_controller_restart(tmp_path: Path) -> None:
    ex = LocalExecutor("local")
    agent = ensure_agent(ex, str(tmp_path / "node"))
    with ScriptedServer() as s:
        s.script = _slow_stream
        run = start_load(ex, agent, _args(s.url), workdir=str(tmp_path / "node"), local_dir=tmp_path / "ctl",
                         name="load-a")
        try:
            first = _wait_records(ex, run, 3)
            assert 3 <= first < 24
            state, more = poll_load(ex, run)
            assert state.running
            first += len(more)
            # the controller "restarts": a new executor and the handle file, nothing else
            ex2 = LocalExecutor("local")
            again = AgentLoad.load(tmp_path / "ctl" / "agent-load.json")
            assert again == run
            seen: list[int] = []
            summary = wait_load(ex2, again, poll_s=0.1, on_records=lambda recs: seen.append(len(recs)))
        finally:
            if ex.poll(run.handle).running:
                ex.stop(run.handle, grace=2)
    assert summary["completed"] == 24 and first + sum(seen) == 24
    _check_complete(run, 24)
    assert json.loads((tmp_path / "ctl" / "summary.json").read_text())["completed"] == 24
    handle_text = (tmp_path / "ctl" / "agent-load.json").read_text()
    assert "Bearer" not in handle_text and "--api-key-env" not in handle_text


def test_torn_local_copy_is_cut_back_and_refetched(tmp_path: Path) -> None:
    ex = LocalExecutor("local")
    agent = ensure_agent(ex, str(tmp_path / "node"))
    with ScriptedServer() as s:
        run = start_load(ex, agent, _args(s.url, 8), workdir=str(tmp_path / "node"), local_dir=tmp_path / "ctl")
        summary = wait_load(ex, run, poll_s=0.05)
    assert summary["completed"] == 8
    whole = run.local_records.read_bytes()
    run.local_records.write_bytes(whole[: len(whole) // 2 + 7])  # a crash in the middle of an append
    assert len(pull_records(ex, run)) >= 4
    _check_complete(run, 8)


def test_a_run_that_dies_without_summary_is_an_error_with_its_log(tmp_path: Path) -> None:
    ex = LocalExecutor("local")
    agent = ensure_agent(ex, str(tmp_path / "node"))
    run = start_load(ex, agent, ["--endpoint", "http://127.0.0.1:1", "--model", "m", "--workload", "long-doc"],
                     workdir=str(tmp_path / "node"), local_dir=tmp_path / "ctl")
    with pytest.raises(AgentLoadError) as e:
        wait_load(ex, run, poll_s=0.05, timeout_s=30)
    assert "no summary" in str(e.value) and "num_docs" in str(e.value) and e.value.exit_code == 2


@pytest.mark.ssh
def test_ssh_node_outage_and_reattach(ssh_cluster: Any, tmp_path: Path) -> None:
    from harness.remote.ssh import SSHExecutor

    cluster = ssh_cluster(1)
    node = cluster.nodes[0].name
    workdir = str(tmp_path / "node")
    ex = SSHExecutor.from_inventory(cluster.inventory, node)
    with ScriptedServer() as s:
        s.script = _slow_stream
        agent = ensure_agent(ex, workdir)
        run = start_load(ex, agent, _args(s.url), workdir=workdir, local_dir=tmp_path / "ctl", name="ssh-load")
        try:
            first = _wait_records(ex, run, 3)
            assert first >= 3
            cluster.kill(node)  # the link dies under the controller; the detached run goes on
            with pytest.raises(Exception):  # noqa: B017 - any RemoteError subclass
                pull_records(ex, run)
            ex.close()
            cluster.restart(node)
            ex2 = SSHExecutor.from_inventory(cluster.inventory, node)
            try:
                again = AgentLoad.load(tmp_path / "ctl" / "agent-load.json")
                summary = wait_load(ex2, again, poll_s=0.1, timeout_s=60)
            finally:
                ex2.close()
        finally:
            local = LocalExecutor("local")
            if local.poll(run.handle).running:
                local.stop(run.handle, grace=2)
    assert summary["completed"] == 24
    _check_complete(run, 24)

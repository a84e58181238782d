"""SSHExecutor against real OpenSSH servers on loopback: keys, host-key policy, jump hosts,
timeouts, liveness, reconnect and detached processes across connections and controllers."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pydantic
import pytest

from harness.config.inventory import Inventory
from harness.errors import InputError
from harness.ports import free_port
from harness.remote import keys
from harness.remote.base import (
    CommandTimeout,
    ConnectionLost,
    DetachedHandle,
    HostKeyError,
    RemoteError,
    TransferError,
    Unreachable,
)
from harness.remote.connect import executor_for
from harness.remote.local import LocalExecutor
from harness.remote.ssh import SSHExecutor
from tests.support.procs import processes_running, unique_sleep, wait_for
from tests.support.sshd import PASSPHRASE, SshCluster

pytestmark = pytest.mark.ssh

Factory = Callable[..., SshCluster]


@pytest.fixture(autouse=True)
def _fresh_key_cache() -> Iterator[None]:
    keys.clear_cache()
    yield
    keys.clear_cache()


def _ex(inv: Inventory, name: str, **kw: object) -> SSHExecutor:
    return SSHExecutor.from_inventory(inv, name, **kw)  # type: ignore[arg-type]


def _openssh_fingerprint(pub: Path) -> str:
    out = subprocess.run(["ssh-keygen", "-lf", str(pub)], capture_output=True, text=True,  # noqa: S603
                         check=True).stdout
    return out.split()[1]


def test_executor_for_picks_the_executor(ssh_cluster: Factory) -> None:
    cluster = ssh_cluster(1)
    ex = executor_for(cluster.inventory, "node0")
    assert isinstance(ex, SSHExecutor)
    assert ex.run(["echo", "hi"]).stdout == "hi\n"
    ex.close()
    local = Inventory.model_validate({"cluster": "c", "nodes": [{"name": "me", "host": "localhost",
                                                                 "connection": "local"}]})
    lex = executor_for(local, "me")
    assert isinstance(lex, LocalExecutor) and lex.node == "me"
    with pytest.raises(InputError, match="no node named 'nope'"):
        executor_for(local, "nope")


@pytest.mark.parametrize("kind", ["ed25519", "rsa"])
def test_client_key_kinds(ssh_cluster: Factory, kind: str) -> None:
    cluster = ssh_cluster(1, client_key_kind=kind, log_level="DEBUG3")
    with _ex(cluster.inventory, "node0") as ex:
        assert ex.run(["id", "-un"]).stdout.strip() == cluster.user
    log = cluster.log("node0")
    if kind == "rsa":
        # OpenSSH 9 refuses SHA-1 "ssh-rsa" signatures: the server must have verified an rsa-sha2 one.
        assert "RSA signature using rsa-sha2-" in log and "verified" in log
    else:
        assert "ED25519 signature using ssh-ed25519" in log or "signature using ssh-ed25519" in log


def test_rsa_host_key_verified(ssh_cluster: Factory) -> None:
    cluster = ssh_cluster(1)
    rsa_only = [line for line in cluster.known_hosts.read_text().splitlines() if " ssh-rsa " in line]
    assert len(rsa_only) == 1
    cluster.known_hosts.write_text(rsa_only[0] + "\n")
    with _ex(cluster.inventory, "node0") as ex:
        assert ex.run(["true"]).ok
        assert ex._transport is not None
        assert ex._transport.host_key_type in ("rsa-sha2-512", "rsa-sha2-256")


def test_passphrase_from_env_file_and_prompt(ssh_cluster: Factory, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = ssh_cluster(1, client_key_kind="ed25519-passphrase")
    monkeypatch.setenv("KV_TEST_PP", PASSPHRASE)
    with _ex(cluster.inventory_with(passphrase_env="KV_TEST_PP"), "node0") as ex:
        assert ex.run(["true"]).ok
    keys.clear_cache()
    pp_file = tmp_path / "pp"
    pp_file.write_text(PASSPHRASE + "\n")
    with _ex(cluster.inventory_with(passphrase_file=str(pp_file)), "node0") as ex:
        assert ex.run(["true"]).ok
    keys.clear_cache()
    asked: list[str] = []

    def prompt(text: str) -> str:
        asked.append(text)
        return PASSPHRASE

    exs = [_ex(cluster.inventory, "node0", passphrase_prompt=prompt) for _ in range(3)]
    for ex in exs:
        assert ex.run(["true"]).ok
        ex.close()
    assert len(asked) == 1, "the passphrase must be asked once per key, not per connection"
    assert PASSPHRASE not in repr(exs[0]) and PASSPHRASE not in repr(exs[0]._passphrase)


def test_wrong_or_missing_passphrase(ssh_cluster: Factory, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = ssh_cluster(1, client_key_kind="ed25519-passphrase")
    monkeypatch.setenv("KV_TEST_PP", "wrong secret 123")
    with pytest.raises(Unreachable) as ei:
        _ex(cluster.inventory_with(passphrase_env="KV_TEST_PP"), "node0").run(["true"])
    assert "wrong passphrase" in str(ei.value) and "wrong secret 123" not in str(ei.value)
    monkeypatch.delenv("KV_TEST_PP")
    with pytest.raises(Unreachable, match="KV_TEST_PP, which is not set"):
        _ex(cluster.inventory_with(passphrase_env="KV_TEST_PP"), "node0").run(["true"])
    monkeypatch.setattr(sys, "stdin", None)
    with pytest.raises(Unreachable, match="passphrase-protected"):
        _ex(cluster.inventory, "node0").run(["true"])


def test_unknown_host_key_refused(ssh_cluster: Factory) -> None:
    cluster = ssh_cluster(1, known=False)
    with pytest.raises(HostKeyError) as ei:
        _ex(cluster.inventory, "node0").run(["true"])
    msg = str(ei.value)
    assert "unknown host key" in msg and "SHA256:" in msg
    assert "--accept-new-host-keys" in msg and "accept_new_host_keys: true" in msg
    assert cluster.known_hosts.read_text() == ""
    # The fingerprint shown is the one OpenSSH computes for the node's key.
    fps = [_openssh_fingerprint(Path(f"{k}.pub")) for k in cluster.nodes[0].host_keys]
    assert any(fp in msg for fp in fps)


def test_accept_new_records_key(ssh_cluster: Factory) -> None:
    cluster = ssh_cluster(1, known=False)
    with _ex(cluster.inventory, "node0", accept_new_host_keys=True) as ex:
        assert ex.run(["true"]).ok
    recorded = cluster.known_hosts.read_text().splitlines()
    node = cluster.nodes[0]
    assert len(recorded) == 1 and recorded[0].startswith(f"[{node.host}]:{node.port} ")
    assert recorded[0].split()[1:] in [line.split()[1:] for line in node.host_key_lines()]
    # Without the opt-in, the recorded key now suffices; OpenSSH's client agrees with the line.
    with _ex(cluster.inventory, "node0") as ex:
        assert ex.run(["true"]).ok
    # The inventory field works as well as the flag.
    cluster.known_hosts.write_text("")
    with _ex(cluster.inventory_with(accept_new_host_keys=True), "node0") as ex:
        assert ex.run(["true"]).ok
    assert len(cluster.known_hosts.read_text().splitlines()) == 1


def test_changed_host_key_always_refused(ssh_cluster: Factory) -> None:
    cluster = ssh_cluster(2)
    a, b = cluster.nodes
    # known_hosts claims node0's address has node1's keys: what a changed key looks like.
    fake = [line.replace(f"[{b.host}]:{b.port}", f"[{a.host}]:{a.port}") for line in b.host_key_lines()]
    cluster.known_hosts.write_text("\n".join(fake) + "\n")
    for accept in (False, True):
        with pytest.raises(HostKeyError) as ei:
            _ex(cluster.inventory, "node0", accept_new_host_keys=accept).run(["true"])
        assert "HOST KEY CHANGED" in str(ei.value) and "ssh-keygen -R" in str(ei.value)
    assert cluster.known_hosts.read_text() == "\n".join(fake) + "\n"


def test_unreachable_and_auth_failure(ssh_cluster: Factory) -> None:
    cluster = ssh_cluster(1)
    inv = cluster.inventory_with(nodes={"node0": {"port": free_port()}})
    start = time.monotonic()
    with pytest.raises(Unreachable, match="cannot connect"):
        _ex(inv, "node0").run(["true"])
    assert time.monotonic() - start < 3
    # A key the server does not know.
    other = cluster.workdir / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)  # noqa: S603
    with pytest.raises(Unreachable, match="authentication"):
        _ex(cluster.inventory_with(identity_file=str(other)), "node0").run(["true"])


def test_banner_timeout(ssh_cluster: Factory) -> None:
    cluster = ssh_cluster(1)
    with socket.socket() as silent:  # accepts (backlog) but never speaks SSH
        silent.bind(("127.0.0.1", 0))
        silent.listen(4)
        inv = cluster.inventory_with(nodes={"node0": {"port": silent.getsockname()[1]}}, connect_timeout=1.0)
        start = time.monotonic()
        with pytest.raises(Unreachable):
            _ex(inv, "node0").run(["true"])
        assert time.monotonic() - start < 5


def test_jump_host(ssh_cluster: Factory) -> None:
    cluster = ssh_cluster(2, log_level="DEBUG1")
    inv = cluster.inventory_with(nodes={"node1": {"jump": "node0"}})
    with _ex(inv, "node1") as ex:
        assert ex.jump is not None and ex.jump.node == "node0"
        assert ex.run(["echo", "via jump"]).stdout == "via jump\n"
    target = cluster.nodes[1]
    log = cluster.log("node0")
    assert f"target 127.0.0.1 port {target.port}" in log or f"127.0.0.1:{target.port}" in log, log[-3000:]
    # A loop in the jump chain is an input error, not a hang.
    loop = cluster.inventory_with(nodes={"node0": {"jump": "node1"}, "node1": {"jump": "node0"}})
    with pytest.raises(InputError, match="loop"):
        _ex(loop, "node1")


def test_jump_host_chain_of_two(ssh_cluster: Factory) -> None:
    cluster = ssh_cluster(3)
    inv = cluster.inventory_with(nodes={"node1": {"jump": "node0"}, "node2": {"jump": "node1"}})
    with _ex(inv, "node2") as ex:
        assert ex.run(["true"]).ok


def test_server_killed_mid_command(ssh_cluster: Factory) -> None:
    cluster = ssh_cluster(1, keepalive=1.0)
    ex = _ex(cluster.inventory, "node0")
    ex.connect()
    threading.Timer(0.5, cluster.kill, args=("node0",)).start()
    start = time.monotonic()
    with pytest.raises(ConnectionLost) as ei:
        ex.run(["sh", "-c", "echo started; sleep 30"])
    elapsed = time.monotonic() - start
    assert elapsed < 0.5 + ex.liveness_bound_s + 1
    assert ei.value.host == "node0" and "sleep" in str(ei.value)
    ex.close()


def test_silent_server_detected_by_liveness(ssh_cluster: Factory) -> None:
    # SIGSTOP keeps the TCP connection open but nothing answers: a cut link or a hung host.
    cluster = ssh_cluster(1, keepalive=1.0)
    ex = _ex(cluster.inventory, "node0")
    ex.connect()
    assert ex.liveness_bound_s == 3.0
    threading.Timer(0.5, cluster.freeze, args=("node0",)).start()
    start = time.monotonic()
    try:
        with pytest.raises(ConnectionLost) as ei:
            ex.run(["sleep", "30"])
        elapsed = time.monotonic() - start
        assert elapsed < 0.5 + ex.liveness_bound_s + 1.0, elapsed
        assert "no answer" in str(ei.value)
    finally:
        cluster.thaw("node0")
        ex.close()


def test_reconnects_for_new_commands(ssh_cluster: Factory) -> None:
    cluster = ssh_cluster(1)
    with _ex(cluster.inventory, "node0") as ex:
        assert ex.run(["true"]).ok
        cluster.kill("node0")
        restarter = threading.Timer(0.3, cluster.restart, args=("node0",))
        restarter.start()
        try:
            # The first attempt may fail while sshd is down; backoff retries until it is back.
            assert ex.run(["echo", "back"]).stdout == "back\n"
            assert ex.connect_count == 2
        finally:
            restarter.join()


def test_detached_survives_disconnect_and_server_restart(ssh_cluster: Factory, tmp_path: Path) -> None:
    cluster = ssh_cluster(1)
    ex = _ex(cluster.inventory, "node0")
    h = ex.start_detached(["sh", "-c", "echo started; while :; do sleep 0.1; done"],
                          workdir=str(tmp_path / "work"), name="server")
    saved = json.dumps(h.to_json())
    ex.close()
    cluster.kill("node0")  # the connection, the session and sshd itself are gone
    cluster.restart("node0")
    fresh = _ex(cluster.inventory, "node0")
    handle = DetachedHandle.from_json(json.loads(saved))
    assert fresh.poll(handle).running
    assert fresh.tail_log(handle, stream="stdout") == "started\n"
    st = fresh.stop(handle, grace=5)
    assert not st.running and st.exit_code == 143
    fresh.close()


def test_detached_reattach_from_another_controller(ssh_cluster: Factory, tmp_path: Path) -> None:
    cluster = ssh_cluster(1)
    # A separate controller process starts it, prints the handle and exits.
    script = (
        "import json, sys\n"
        "from harness.config.loader import load_inventory\n"
        "from harness.remote.connect import executor_for\n"
        "ex = executor_for(load_inventory(sys.argv[1]), 'node0')\n"
        "h = ex.start_detached(['sleep', '60'], workdir=sys.argv[2], name='long')\n"
        "print(json.dumps(h.to_json()))\n"
    )
    out = subprocess.run([sys.executable, "-c", script, str(cluster.inventory_path), str(tmp_path)],  # noqa: S603
                         capture_output=True, text=True, timeout=60, check=True,
                         cwd=str(Path(__file__).resolve().parents[2])).stdout
    handle = DetachedHandle.from_json(json.loads(out))
    with _ex(cluster.inventory, "node0") as ex:
        assert ex.poll(handle).running
        assert ex.stop(handle, grace=5).exit_code == 143


def test_node_names_cannot_carry_commands(ssh_cluster: Factory) -> None:
    cluster = ssh_cluster(1)
    for bad in ["n;touch x", "$(x)", "`x`", "a b", "a\nb", "'a'"]:
        with pytest.raises(pydantic.ValidationError):
            cluster.inventory_with(nodes={"node0": {"name": bad}})


def test_secrets_not_in_errors_or_repr(ssh_cluster: Factory) -> None:
    cluster = ssh_cluster(1)
    inv = Inventory.model_validate({**cluster.inventory.model_dump(mode="json", exclude_none=True),
                                    "defaults": {**cluster.inventory.defaults.model_dump(mode="json",
                                                                                        exclude_none=True),
                                                 "passphrase": "s3cret-value"}})
    ex = _ex(inv, "node0")
    assert "s3cret-value" not in repr(ex)
    with pytest.raises(RemoteError) as ei:
        ex.run(["sh", "-c", "exit 4"])
    assert "s3cret-value" not in str(ei.value)
    ex.close()


@pytest.mark.ssh
def test_a_commands_stdin_eof_never_follows_its_channel_close(ssh_cluster: Callable[..., SshCluster],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """The race that dropped whole connections beside a CPU hog (3 of 8 concurrent commands lost):
    a command that ends at once is closed by the server while kvgate is still sending the end of its
    stdin, and an EOF that arrives after the channel is closed names a channel OpenSSH has freed, so
    sshd drops the connection ("ieof packet referred to nonexistent channel"). Here every EOF is
    held until its channel is unlinked (at most 3 s): paramiko's own shutdown_write sent it after
    the close; kvgate's sends it before, whatever the scheduling."""
    import paramiko

    cluster = ssh_cluster(1)
    real_send = paramiko.Transport._send_user_message

    def late_eof(self: paramiko.Transport, msg: paramiko.Message) -> None:
        data = msg.asbytes()
        if data[:1] == bytes([96]):  # SSH_MSG_CHANNEL_EOF
            remote = int.from_bytes(data[1:5], "big")
            deadline = time.monotonic() + 3.0
            while time.monotonic() < deadline and any(
                    c.remote_chanid == remote for c in list(self._channels.values())):  # type: ignore[attr-defined]
                time.sleep(0.01)
        real_send(self, msg)

    monkeypatch.setattr(paramiko.Transport, "_send_user_message", late_eof)
    with _ex(cluster.inventory, "node0") as ex:
        for i in range(3):
            assert ex.run(["echo", str(i)]).stdout == f"{i}\n"
        assert ex.connect_count == 1  # never dropped and reconnected
    assert "bad id" not in cluster.log("node0") and "nonexistent channel" not in cluster.log("node0")


def test_concurrent_commands_on_one_connection(shared_ssh_cluster: SshCluster) -> None:
    with _ex(shared_ssh_cluster.inventory, "shared0") as ex:
        results: list[str] = []
        threads = [threading.Thread(target=lambda i=i: results.append(ex.run(["echo", str(i)]).stdout))
                   for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        assert sorted(results) == sorted(f"{i}\n" for i in range(8))
        assert ex.connect_count == 1


def test_a_deadline_before_the_command_reports_its_group_still_kills_it(shared_ssh_cluster: SshCluster) -> None:
    # A loaded node can start a command after its deadline. The executor waits (bounded) for the
    # wrapper's process-group report and kills that group, rather than closing the channel while the
    # report is in flight: a command that has started and does not write again outlives the close.
    # This one ignores the hangup and broken pipe a closed channel would bring, so only the kill
    # stops it.
    marker = unique_sleep()
    with _ex(shared_ssh_cluster.inventory, "shared0") as ex:
        ex.run(["true"])  # connected: the deadline falls between the command's start and its report
        with pytest.raises(CommandTimeout, match=r"process group \d+ killed"):
            ex.run(["sh", "-c", f"trap '' HUP PIPE; sleep {marker} & wait"], timeout=1e-6)
    wait_for(lambda: not processes_running(["sleep", marker]), 30, f"the timed-out command's sleep {marker} to end")


def test_command_line_is_one_quoted_list(shared_ssh_cluster: SshCluster) -> None:
    with _ex(shared_ssh_cluster.inventory, "shared0") as ex:
        line = ex.command_line(["echo", "$(x); y"], env={"A": "b c"}, cwd="/tmp/d e")
        assert "'$(x); y'" in line and "'A=b c'" in line and "'/tmp/d e'" in line
        with pytest.raises(InputError):
            ex.command_line(["X=1"], env={"A": "b"})
    assert os.environ.get("A") != "b c"


def test_put_refuses_a_corrupted_copy(shared_ssh_cluster: SshCluster, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # Corruption in transit cannot be produced on loopback, so the node's checksum is replaced by a
    # wrong one: the copy must be refused and no file (nor temp file) left at the destination.
    src = tmp_path / "src"
    src.write_bytes(b"payload")
    dest_dir = tmp_path / "dest"
    dest_dir.mkdir()
    with _ex(shared_ssh_cluster.inventory, "shared0") as ex:
        monkeypatch.setattr(ex, "remote_sha256", lambda path: "0" * 64)
        with pytest.raises(TransferError, match="checksum mismatch"):
            ex.put(str(src), str(dest_dir / "f"))
        assert list(dest_dir.iterdir()) == []
        with pytest.raises(TransferError, match="checksum mismatch"):
            ex.get(str(src), str(dest_dir / "g"))
        assert list(dest_dir.iterdir()) == []


def test_sftp_on_a_dead_connection_is_connection_lost(ssh_cluster: Factory, tmp_path: Path) -> None:
    cluster = ssh_cluster(1, keepalive=1.0)
    ex = _ex(cluster.inventory, "node0")
    ex.write_file(str(tmp_path / "a"), b"x")
    cluster.kill("node0")
    start = time.monotonic()
    with pytest.raises((ConnectionLost, Unreachable)):
        ex.read_file(str(tmp_path / "a"))
    assert time.monotonic() - start < ex.liveness_bound_s + 2
    ex.close()


def test_key_from_ssh_agent(ssh_cluster: Factory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = ssh_cluster(1)
    sock = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL,  # noqa: S603
                             stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while not sock.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        inv = cluster.inventory_with(identity_file=None, use_agent=True)
        # The agent is empty: authentication must fail...
        with pytest.raises(Unreachable, match="authentication"):
            _ex(inv, "node0").run(["true"])
        # ...and succeed once the key is in the agent (no identity_file anywhere).
        subprocess.run(["ssh-add", "-q", str(cluster.keys.client_key("rsa"))], check=True,  # noqa: S603
                       env={**os.environ, "SSH_AUTH_SOCK": str(sock)}, capture_output=True)
        with _ex(inv, "node0") as ex:
            assert ex.identity_file is None
            assert ex.run(["echo", "agent"]).stdout == "agent\n"
        with pytest.raises(Unreachable, match="no way to authenticate"):
            _ex(cluster.inventory_with(identity_file=None, use_agent=False), "node0").run(["true"])
    finally:
        agent.terminate()
        agent.wait(10)

"""Real OpenSSH servers on loopback for tests and benchmarks.

``SshCluster.start(n, workdir, keys)`` starts ``n`` ``/usr/sbin/sshd -D -e -f <config>`` processes on
127.0.0.1, each on its own free port with its own generated host keys (ed25519 + RSA), all
accepting the client keys of a ``KeyStore`` (ed25519, RSA, passphrase-protected ed25519). It writes
a known_hosts file and an inventory (``harness.config.inventory.Inventory``, also saved as YAML) and
stops every process it started on ``close()``: the listeners and their per-connection children,
then every process still contained in the cluster's work directory (``contained_processes``: its
command line, environment or cwd names that directory), which is where processes started through
the cluster run (the inventory's remote ``workdir`` is inside it). A detached engine or agent left
running by a test is stopped there and listed in ``leftovers``.

Fault injection: ``kill(node)`` (SIGKILL the server and its sessions: connections see EOF),
``freeze(node)``/``thaw(node)`` (SIGSTOP/SIGCONT: a silent server, like a cut link),
``stop(node)``/``restart(node)`` (same port and host keys).
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import yaml

from harness.config.inventory import Inventory
from harness.ports import free_port
from tests.support.procs import descendants, stop_contained, stop_processes, wait_exited

SSHD = "/usr/sbin/sshd"
PASSPHRASE = "kvgate test passphrase; $(not a command)"
CLIENT_KEY_KINDS = ("ed25519", "rsa", "ed25519-passphrase")


class SshdError(RuntimeError):
    """The test sshd could not be started."""


def _keygen(path: Path, kind: str, passphrase: str = "") -> Path:
    if not path.exists():
        args = ["ssh-keygen", "-q", "-t", kind, "-N", passphrase, "-C", f"kvgate-test-{path.name}",
                "-f", str(path)]
        if kind == "rsa":
            args[4:4] = ["-b", "2048"]  # 2048 keeps the fixture fast; the server still signs with rsa-sha2
        subprocess.run(args, check=True, stdin=subprocess.DEVNULL, capture_output=True)  # noqa: S603
    return path


class KeyStore:
    """Client keys and per-node host keys, generated once and reused by every cluster (keygen is the
    slow part of starting a cluster)."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir, 0o700)

    def client_key(self, kind: str = "ed25519") -> Path:
        if kind == "ed25519-passphrase":
            return _keygen(self.dir / "client_ed25519_pp", "ed25519", PASSPHRASE)
        if kind not in ("ed25519", "rsa"):
            raise ValueError(f"unknown client key kind {kind!r}; known: {CLIENT_KEY_KINDS}")
        return _keygen(self.dir / f"client_{kind}", kind)

    def host_keys(self, index: int) -> list[Path]:
        d = self.dir / f"host{index}"
        d.mkdir(exist_ok=True)
        return [_keygen(d / "ssh_host_ed25519_key", "ed25519"), _keygen(d / "ssh_host_rsa_key", "rsa")]

    def authorized_keys(self) -> str:
        return "".join(Path(str(self.client_key(k)) + ".pub").read_text() for k in CLIENT_KEY_KINDS)


def _signal_all(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


@dataclass
class SshNode:
    """One sshd of a cluster."""

    name: str
    host: str
    port: int
    dir: Path
    host_keys: list[Path]
    config_path: Path
    log_path: Path
    proc: Optional[subprocess.Popen[bytes]] = None
    frozen: list[int] = field(default_factory=list)

    def host_key_lines(self) -> list[str]:
        """known_hosts lines for this node (``[host]:port type base64``)."""
        lines = []
        for key in self.host_keys:
            kind, b64 = Path(str(key) + ".pub").read_text().split()[:2]
            lines.append(f"[{self.host}]:{self.port} {kind} {b64}")
        return lines

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


class SshCluster:
    """N real sshd processes on loopback and an inventory for them."""

    def __init__(self, workdir: Path, keys: KeyStore, nodes: list[SshNode], *, user: str,
                 client_key: Path, known_hosts: Path, inventory_opts: dict[str, Any]) -> None:
        self.workdir = workdir
        self.keys = keys
        self.nodes = nodes
        self.user = user
        self.client_key = client_key
        self.known_hosts = known_hosts
        self._inventory_opts = inventory_opts
        self.login_rc = True
        self.session_env: dict[str, str] = {}
        self._closed = False
        self.leftovers: list[int] = []  # pids close() found still running under workdir and stopped
        self._lock = threading.RLock()  # a fault thread (restart) must not race close()
        self.inventory_path = workdir / "inventory.yaml"
        self.inventory: Inventory  # set once the ports are known

    # -- construction --------------------------------------------------------------------------

    @classmethod
    def start(cls, n: int, workdir: Path, keys: KeyStore, *, client_key_kind: str = "ed25519",
              known: bool = True, log_level: str = "VERBOSE", name_prefix: str = "node",
              login_rc: bool = False, session_env: dict[str, str] | None = None,
              **inventory_opts: Any) -> SshCluster:
        """Start ``n`` servers. ``known=False`` leaves known_hosts empty (unknown host keys).
        ``login_rc=False`` (default) sets SHLVL=1 in sessions so bash skips ~/.bashrc, which bash
        otherwise sources for every SSH command (here ~/.bashrc runs ``pyenv init``: +0.1 s per
        command); ``login_rc=True`` keeps the user's real login environment.
        ``inventory_opts`` become inventory ``defaults`` (e.g. ``keepalive=1.0``). ``session_env``
        is set in every session (sshd ``SetEnv``; e.g. a PATH with fake node tools first)."""
        if not os.path.exists(SSHD):
            raise SshdError(f"{SSHD} not found: install openssh-server (make system-deps)")
        if os.geteuid() == 0:
            os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # privilege separation directory
        workdir.mkdir(parents=True, exist_ok=True)
        auth = workdir / "authorized_keys"
        auth.write_text(keys.authorized_keys())
        auth.chmod(0o600)
        nodes = []
        for i in range(n):
            d = workdir / f"{name_prefix}{i}"
            d.mkdir(exist_ok=True)
            nodes.append(SshNode(name=f"{name_prefix}{i}", host="127.0.0.1", port=0, dir=d,
                                 host_keys=keys.host_keys(i), config_path=d / "sshd_config",
                                 log_path=d / "sshd.log"))
        known_hosts = workdir / "known_hosts"
        cluster = cls(workdir, keys, nodes, user=getpass.getuser(),
                      client_key=keys.client_key(client_key_kind), known_hosts=known_hosts,
                      inventory_opts=inventory_opts)
        cluster.login_rc = login_rc
        cluster.session_env = dict(session_env or {})
        try:
            for node in nodes:
                cluster._launch(node, auth, log_level)
            for node in nodes:
                cluster._wait_ready(node)
        except BaseException:
            cluster.close()
            raise
        known_hosts.write_text("".join(line + "\n" for node in nodes for line in node.host_key_lines())
                               if known else "")
        cluster.inventory = cluster._write_inventory()
        return cluster

    def _launch(self, node: SshNode, auth: Path, log_level: str, port: int | None = None) -> None:
        env = {**({} if self.login_rc else {"SHLVL": "1"}), **self.session_env}
        setenv = ['"' + f"{k}={v}" + '"' for k, v in env.items()]
        for _attempt in range(5):
            node.port = port or free_port()
            node.config_path.write_text("\n".join([
                f"Port {node.port}",
                f"ListenAddress {node.host}",
                *(f"HostKey {k}" for k in node.host_keys),
                f"AuthorizedKeysFile {auth}",
                "StrictModes no",
                "UsePAM no",
                "PidFile none",
                "PermitRootLogin yes",
                "PubkeyAuthentication yes",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "AllowTcpForwarding yes",
                "UseDNS no",
                # sshd takes the first SetEnv line only: every variable goes on one line.
                *([f"SetEnv {' '.join(setenv)}"] if setenv else []),
                "MaxStartups 100:30:200",
                "MaxSessions 100",
                "Subsystem sftp internal-sftp",
                f"LogLevel {log_level}",
                "",
            ]))
            log = open(node.log_path, "ab")  # noqa: SIM115 - handed to the child
            try:
                node.proc = subprocess.Popen(  # noqa: S603
                    [SSHD, "-D", "-e", "-f", str(node.config_path)], stdin=subprocess.DEVNULL,
                    stdout=log, stderr=log, start_new_session=True)
            finally:
                log.close()
            # A lost race for the port shows as an early exit; anything else waits in _wait_ready.
            try:
                node.proc.wait(timeout=0.05)
            except subprocess.TimeoutExpired:
                return
            if port is not None:
                break
        raise SshdError(f"sshd for {node.name} did not start:\n{node.log_path.read_text()[-2000:]}")

    def _wait_ready(self, node: SshNode, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not node.running:
                raise SshdError(f"sshd for {node.name} exited:\n{node.log_path.read_text()[-2000:]}")
            try:
                with socket.create_connection((node.host, node.port), timeout=1.0) as s:
                    if s.recv(64).startswith(b"SSH-"):
                        return
            except OSError:
                time.sleep(0.01)
        raise SshdError(f"sshd for {node.name} is not accepting on port {node.port}")

    def _write_inventory(self) -> Inventory:
        defaults: dict[str, Any] = {"user": self.user, "identity_file": str(self.client_key),
                                    "known_hosts": str(self.known_hosts), "use_agent": False,
                                    "connect_timeout": 5.0, "keepalive": 2.0,
                                    "workdir": str(self.workdir / "remote-work")}
        defaults.update(self._inventory_opts)
        data = {"cluster": "loopback", "defaults": defaults,
                "nodes": [{"name": n.name, "host": n.host, "port": n.port,
                           "roles": ["server", "client", "storage"]} for n in self.nodes]}
        self.inventory_path.write_text(yaml.safe_dump(data, sort_keys=False))
        return Inventory.model_validate(data)

    def inventory_with(self, nodes: dict[str, dict[str, Any]] | None = None, **defaults: Any) -> Inventory:
        """A copy of the inventory with other ``defaults`` and per-node fields, e.g.
        ``inventory_with(nodes={"node1": {"jump": "node0"}}, keepalive=1.0)``."""
        data = self.inventory.model_dump(mode="json", exclude_none=True)
        data["defaults"].update(defaults)
        for node in data["nodes"]:
            node.update((nodes or {}).get(node["name"], {}))
        return Inventory.model_validate(data)

    # -- access --------------------------------------------------------------------------------

    def node(self, name: str) -> SshNode:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)

    def _node(self, node: str | SshNode) -> SshNode:
        return node if isinstance(node, SshNode) else self.node(node)

    def log(self, node: str | SshNode) -> str:
        return self._node(node).log_path.read_text(errors="replace")

    # -- faults --------------------------------------------------------------------------------

    def kill(self, node: str | SshNode) -> None:
        """SIGKILL the server and every session under it: clients see the connection drop."""
        n = self._node(node)
        if n.proc is None:
            return
        self.thaw(n)
        pids = [n.proc.pid, *descendants(n.proc.pid)]
        _signal_all(pids, signal.SIGKILL)
        n.proc.wait(timeout=10)
        wait_exited(pids, 10.0)

    def stop(self, node: str | SshNode) -> None:
        """Stop the server and its sessions (SIGTERM, then SIGKILL after 5 s), and return only once
        each of them has exited: a killed process runs on until the scheduler gives it the signal,
        which on a loaded machine is after kill() returns."""
        n = self._node(node)
        if n.proc is None or n.proc.poll() is not None:
            return
        self.thaw(n)
        stop_processes([n.proc.pid, *descendants(n.proc.pid)], grace=5.0)
        n.proc.wait(timeout=5)

    def freeze(self, node: str | SshNode) -> None:
        """SIGSTOP the server and its sessions: the TCP connection stays up but nothing answers,
        as when a link is cut or a host hangs."""
        n = self._node(node)
        assert n.proc is not None
        n.frozen = [n.proc.pid, *descendants(n.proc.pid)]
        _signal_all(n.frozen, signal.SIGSTOP)

    def thaw(self, node: str | SshNode) -> None:
        n = self._node(node)
        _signal_all(n.frozen, signal.SIGCONT)
        n.frozen = []

    def restart(self, node: str | SshNode) -> None:
        """Start a stopped or killed server again on the same port with the same host keys."""
        n = self._node(node)
        with self._lock:
            if self._closed:
                raise SshdError("restart after close: the cluster is stopped")
            self.stop(n)
            self._launch(n, self.workdir / "authorized_keys", "VERBOSE", port=n.port)
            self._wait_ready(n)

    def close(self) -> None:
        """Stop the servers and their sessions, then what was started through them: processes that
        detached from their session (setsid, double fork: kvgate's engines and soak agents do) are
        no descendants of sshd, and are found by containment in this cluster's work directory."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for n in self.nodes:
            try:
                self.stop(n)
            except Exception:  # noqa: BLE001 - keep stopping the others
                if n.proc is not None:
                    _signal_all([n.proc.pid], signal.SIGKILL)
        self.leftovers = stop_contained(self.workdir)

    def __enter__(self) -> SshCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def sshd_available() -> bool:
    return os.path.exists(SSHD) and shutil.which("ssh-keygen") is not None

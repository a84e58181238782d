"""Host key verification against a known_hosts file: unknown keys are refused unless
trust-on-first-use was asked for explicitly; a changed key is always refused."""

from __future__ import annotations

import base64
import fcntl
import hashlib
import os
import threading

import paramiko

from harness.remote.base import HostKeyError

_APPEND_LOCK = threading.Lock()  # flock is per open file; this also orders threads of one process


def fingerprint(key: paramiko.PKey) -> str:
    """OpenSSH's fingerprint form: ``SHA256:<base64 without padding>``."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def known_hosts_name(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"


def append_known_host(path: str, name: str, key: paramiko.PKey) -> None:
    """Record ``key`` for ``name`` in ``path`` (created 0600 with its directory when missing)."""
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, mode=0o700, exist_ok=True)
    line = f"{name} {key.get_name()} {key.get_base64()}\n"
    with _APPEND_LOCK:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, line.encode())
        finally:
            os.close(fd)


class KnownHostsPolicy(paramiko.MissingHostKeyPolicy):
    """Called by paramiko only for a host with no key in known_hosts. Refuses with the fingerprint
    and the way to accept, or (``accept_new``) records the key: never paramiko's AutoAddPolicy."""

    def __init__(self, node: str, known_hosts: str, accept_new: bool) -> None:
        self.node = node
        self.known_hosts = known_hosts
        self.accept_new = accept_new

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        if not self.accept_new:
            raise HostKeyError(
                f"unknown host key for {hostname}: {key.get_name()} {fingerprint(key)} is not in "
                f"{self.known_hosts}. If this fingerprint is the node's, accept it once with "
                f"--accept-new-host-keys (or `accept_new_host_keys: true` for this node in the inventory); "
                f"it is then recorded in {self.known_hosts}",
                host=self.node)
        append_known_host(self.known_hosts, hostname, key)
        client.get_host_keys().add(hostname, key.get_name(), key)


def changed_key_error(node: str, hostname: str, known_hosts: str, got: paramiko.PKey,
                      expected: paramiko.PKey) -> HostKeyError:
    return HostKeyError(
        f"HOST KEY CHANGED for {hostname}: known_hosts {known_hosts} has {expected.get_name()} "
        f"{fingerprint(expected)}, the server presented {got.get_name()} {fingerprint(got)}. This can be an "
        f"attack (man in the middle) or a reinstalled node; kvgate never accepts a changed key. "
        f"If the change "
        f"is expected, remove the old line (ssh-keygen -R '{hostname}' -f {known_hosts}) and connect again",
        host=node)

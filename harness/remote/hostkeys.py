"""Host key verification against a known_hosts file: unknown keys are refused unless
trust-on-first-use was asked for explicitly; a changed key is always refused.

known_hosts is read here, not by paramiko (whose reader fails on OpenSSH's marker lines with
"Incorrect padding", making every node unreachable): ``@revoked`` keys are refused for every host
with a clear message (also under trust-on-first-use); ``@cert-authority`` lines are skipped with a
warning (kvgate does not verify host certificates: list the node's own key instead); lines that
cannot be read are skipped with a warning naming the line, as OpenSSH does.
"""

from __future__ import annotations

import base64
import binascii
import fcntl
import hashlib
import logging
import os
import threading
from dataclasses import dataclass, field

import paramiko

from harness.remote.base import HostKeyError

log = logging.getLogger(__name__)

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


@dataclass
class KnownHosts:
    """What a known_hosts file says: usable entries, revoked keys, and why lines were skipped."""

    entries: list[tuple[list[str], paramiko.PKey]] = field(default_factory=list)
    revoked: list[paramiko.PKey] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # lines paramiko cannot match (host patterns with * ? !, @cert-authority): any of them could
    # cover a host paramiko calls unknown, so a new key is never accepted while one is there
    undecided: list[str] = field(default_factory=list)

    def is_revoked(self, key: paramiko.PKey) -> bool:
        blob = key.asbytes()
        return any(r.asbytes() == blob for r in self.revoked)

    def install(self, keys: paramiko.HostKeys) -> None:
        for names, key in self.entries:
            for name in names:
                keys.add(name, key.get_name(), key)


def _parse_key(fields: list[str]) -> paramiko.PKey | None:
    if len(fields) < 3:
        return None
    entry = paramiko.hostkeys.HostKeyEntry.from_line(" ".join(fields[:3]))
    return entry.key if entry is not None else None


def read_known_hosts(path: str) -> KnownHosts:
    """Parse ``path`` (OpenSSH format, markers included); never raises for a bad line."""
    out = KnownHosts()
    with open(path, encoding="utf-8", errors="replace") as fh:
        lines = fh.read().splitlines()
    for lineno, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        marker = fields[0] if fields[0].startswith("@") else None
        if marker is not None:
            fields = fields[1:]
        try:
            key = _parse_key(fields)
        except (paramiko.SSHException, binascii.Error, ValueError) as exc:
            out.warnings.append(f"{path}:{lineno}: skipped (cannot read the key: {exc})")
            continue
        if key is None:
            out.warnings.append(f"{path}:{lineno}: skipped (not a host, key type and key)")
            continue
        if marker == "@revoked":
            out.revoked.append(key)
            continue
        if marker == "@cert-authority" or any(c in fields[0] for c in "*?!"):
            out.undecided.append(f"{path}:{lineno}")
        if marker == "@cert-authority":
            out.warnings.append(f"{path}:{lineno}: @cert-authority line skipped: kvgate does not verify "
                                "host certificates; list the node's own host key to connect to it")
        elif marker is not None:
            out.warnings.append(f"{path}:{lineno}: skipped (unknown marker {marker})")
        else:
            out.entries.append((fields[0].split(","), key))
    for w in out.warnings:
        log.warning("%s", w)
    return out


def revoked_key_error(node: str, hostname: str, known_hosts: str, key: paramiko.PKey) -> HostKeyError:
    return HostKeyError(
        f"host key of {hostname} ({key.get_name()} {fingerprint(key)}) is marked @revoked in {known_hosts}: "
        "kvgate refuses to connect to a server presenting it", host=node)


class KnownHostsPolicy(paramiko.MissingHostKeyPolicy):
    """Called by paramiko only for a host with no key in known_hosts. Refuses with the fingerprint
    and the way to accept, or (``accept_new``) records the key: never paramiko's AutoAddPolicy."""

    def __init__(self, node: str, known_hosts: str, accept_new: bool, known: KnownHosts | None = None) -> None:
        self.node = node
        self.known_hosts = known_hosts
        self.accept_new = accept_new
        self.known = known or KnownHosts()

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        if self.known.is_revoked(key):
            raise revoked_key_error(self.node, hostname, self.known_hosts, key)
        if not self.accept_new:
            raise HostKeyError(
                f"unknown host key for {hostname}: {key.get_name()} {fingerprint(key)} is not in "
                f"{self.known_hosts}. If this fingerprint is the node's, accept it once with "
                f"--accept-new-host-keys (or `accept_new_host_keys: true` for this node in the inventory); "
                f"it is then recorded in {self.known_hosts}",
                host=self.node)
        if self.known.undecided:
            # OpenSSH would match these lines (wildcards, negation, a CA); paramiko cannot, so a host
            # it calls unknown may be pinned there to another key: accepting would defeat the pin
            raise HostKeyError(
                f"not accepting the new host key of {hostname} ({key.get_name()} {fingerprint(key)}): "
                f"{', '.join(self.known.undecided[:3])} of {self.known_hosts} could cover this host (a host "
                "pattern or @cert-authority line, which kvgate does not match); check the fingerprint and "
                f"add the key for {hostname} to {self.known_hosts} yourself", host=self.node)
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

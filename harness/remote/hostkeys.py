"""Host key verification against a known_hosts file, decided as OpenSSH decides, before any
authentication: unknown keys are refused unless trust-on-first-use was asked for explicitly; a
changed key is always refused.

known_hosts is read here, not by paramiko (which matches host names exactly, and whose reader fails
on OpenSSH's marker lines). Which lines cover a host is ``hostmatch.host_field_matches``: hashed
names, ``*``/``?`` wildcards, ``!`` negation and ``[host]:port``, as OpenSSH matches them. For the key a
server presents (``KnownHosts.check``), in this order:
1. ``@revoked``: a line marking that key revoked refuses it, naming the file and line. This is
   stricter than OpenSSH, which heeds a revocation only on lines that cover the host: a revoked key
   is refused whatever host presents it.
2. ``ok``: a plain line covering the host lists that very key.
3. ``changed``: a plain line covering the host lists another key of the same type.
4. ``covered``: some other line covers the host (a key of another type, an ``@cert-authority``
   line, a key kvgate cannot read): the key is refused, also under trust-on-first-use, since
   recording it could undo what that line pins. kvgate does not verify host certificates.
5. ``new``: no line covers the host; only here may trust-on-first-use record the key.
Paramiko calls ``KnownHostsPolicy`` for every server key (its own host key store is left empty),
after key exchange and before authentication, so a refused server never sees a password or key.
"""

from __future__ import annotations

import base64
import binascii
import fcntl
import hashlib
import logging
import os
import struct
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

import paramiko
from paramiko.pkey import UnknownKeyType

from harness.remote.base import HostKeyError
from harness.remote.hostmatch import ascii_lower, host_field_matches, lookup_name
from harness.remote.sshtransport import Transport

log = logging.getLogger(__name__)

_APPEND_LOCK = threading.Lock()  # flock is per open file; this also orders threads of one process
_MARKERS = (b"@cert-authority", b"@revoked")
_KEY_ERRORS = (paramiko.SSHException, UnknownKeyType, binascii.Error, ValueError,
               TypeError, IndexError, struct.error, UnicodeError)

Status = Literal["ok", "revoked", "changed", "covered", "new"]


def fingerprint(key: paramiko.PKey) -> str:
    """OpenSSH's fingerprint form: ``SHA256:<base64 without padding>``."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def known_hosts_name(host: str, port: int) -> str:
    """The name written to known_hosts for a new key (lowercased, as ``ssh`` writes it)."""
    return lookup_name(host, port).decode("utf-8", "surrogateescape")


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


@dataclass(frozen=True)
class KnownHostLine:
    """One usable line of known_hosts: its place, marker, host field and key (None: unreadable)."""

    where: str  # "path:line"
    marker: str  # "", "@cert-authority" or "@revoked"
    hosts: bytes
    key_type: str
    key: paramiko.PKey | None

    def has_key(self, key: paramiko.PKey) -> bool:
        return self.key is not None and self.key.asbytes() == key.asbytes()

    def describe(self) -> str:
        what = self.marker or "host key"
        if self.key is None:
            return f"{self.where} ({what} of type {self.key_type}, which kvgate cannot read)"
        return f"{self.where} ({what} {self.key.get_name()} {fingerprint(self.key)})"


@dataclass(frozen=True)
class HostKeyCheck:
    """What known_hosts says of a key a server presented; ``lines`` are the lines that decided it."""

    status: Status
    lines: tuple[KnownHostLine, ...] = ()


@dataclass
class KnownHosts:
    """A parsed known_hosts file (``read_known_hosts``) and the warnings its lines gave."""

    path: str = ""
    lines: list[KnownHostLine] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def covering(self, name: bytes) -> list[KnownHostLine]:
        """The lines whose host field covers ``name`` (``hostmatch.lookup_name``), any marker."""
        return [line for line in self.lines if host_field_matches(name, line.hosts)]

    def check(self, name: bytes, key: paramiko.PKey) -> HostKeyCheck:
        """The decision for ``key`` presented under ``name``, by the rules in the module docstring."""
        revoked = tuple(line for line in self.lines if line.marker == "@revoked" and line.has_key(key))
        if revoked:
            return HostKeyCheck("revoked", revoked)
        covering = [line for line in self.covering(name) if line.marker != "@revoked"]
        plain = [line for line in covering if not line.marker and line.key is not None]
        for line in plain:
            if line.has_key(key):
                return HostKeyCheck("ok", (line,))
        same_type = tuple(line for line in plain if line.key is not None and line.key.get_name() == key.get_name())
        if same_type:
            return HostKeyCheck("changed", same_type)
        return HostKeyCheck("covered", tuple(covering)) if covering else HostKeyCheck("new")

    def known_key_types(self, name: bytes) -> list[str]:
        """Key types (``ssh-ed25519``, ``ssh-rsa``...) of plain lines covering ``name``, in file order:
        the host key algorithms to ask the server for first, as ``ssh`` does."""
        types: list[str] = []
        for line in self.covering(name):
            if not line.marker and line.key is not None and line.key.get_name() not in types:
                types.append(line.key.get_name())
        return types


def _parse_key(key_type: str, b64: str) -> paramiko.PKey | None:
    try:
        return paramiko.PKey.from_type_string(key_type, base64.b64decode(b64, validate=True))
    except _KEY_ERRORS:
        return None


def _split_marker(text: bytes) -> tuple[bytes | None, bytes]:
    """OpenSSH's check_markers: at most one marker, ``@cert-authority`` or ``@revoked``, ended by a
    space or tab. Returns (marker, rest); a bad marker gives (None, b"")."""
    if not text.startswith(b"@"):
        return b"", text
    end = text.find(b" ")  # OpenSSH looks for a space first, anywhere, then for a tab
    if end < 0:
        end = text.find(b"\t")
    if end < 0 or text[:end] not in _MARKERS:
        return None, b""
    rest = text[end:].lstrip(b" \t")
    return (None, b"") if rest.startswith(b"@") else (text[:end], rest)


def _fields(text: bytes) -> list[bytes]:
    return [f for f in text.replace(b"\t", b" ").split(b" ") if f]


def _parse_line(path: str, lineno: int, raw: bytes) -> KnownHostLine | str | None:
    """A usable line, a warning (str) for a line OpenSSH would skip as invalid, or None (blank or
    comment)."""
    text = raw.lstrip(b" \t")
    if not text or text.startswith(b"#"):
        return None
    where = f"{path}:{lineno}"
    marker, rest = _split_marker(text)
    if marker is None:
        return f"{where}: skipped (unknown or repeated marker)"
    fields = _fields(rest)
    if len(fields) < 2 or fields[1].startswith(b"#"):
        return f"{where}: skipped (no key type after the host names)"
    key_type = fields[1].decode("ascii", "replace")
    key = _parse_key(key_type, fields[2].decode("ascii", "replace")) if len(fields) > 2 else None
    return KnownHostLine(where, marker.decode(), fields[0], key_type, key)


def read_known_hosts(path: str) -> KnownHosts:
    """Parse ``path`` (OpenSSH format, markers and hashed names included); never raises for a bad
    line: a line OpenSSH would skip is skipped with a warning naming it. A line whose key kvgate
    cannot read is kept (it may cover a host, and then no new key is trusted for that host)."""
    out = KnownHosts(path=path)
    with open(path, "rb") as fh:
        data = fh.read()
    for lineno, raw in enumerate(data.split(b"\n"), 1):
        parsed = _parse_line(path, lineno, raw.rstrip(b"\r"))
        if isinstance(parsed, str):
            out.warnings.append(parsed)
        elif parsed is not None:
            out.lines.append(parsed)
            if parsed.marker == "@cert-authority":
                out.warnings.append(f"{parsed.where}: @cert-authority line skipped as a trust anchor: kvgate "
                                    "does not verify host certificates, and records no new key for a host it "
                                    "covers; list the node's own host key")
    for w in out.warnings:
        log.warning("%s", w)
    return out


def revoked_key_error(node: str, hostname: str, key: paramiko.PKey, lines: tuple[KnownHostLine, ...]) -> HostKeyError:
    return HostKeyError(
        f"host key of {hostname} ({key.get_name()} {fingerprint(key)}) is marked @revoked at "
        f"{', '.join(line.where for line in lines)}: kvgate refuses to connect to a server presenting it "
        "(refused before authentication: no key or password was offered)", host=node)


def changed_key_error(node: str, hostname: str, known_hosts: str, got: paramiko.PKey,
                      lines: tuple[KnownHostLine, ...]) -> HostKeyError:
    return HostKeyError(
        f"HOST KEY CHANGED for {hostname}: known_hosts has {'; '.join(line.describe() for line in lines)}, "
        f"the server presented {got.get_name()} {fingerprint(got)}. This can be an attack (man in the "
        f"middle) or a reinstalled node; kvgate never accepts a changed key. If the change is expected, "
        f"remove the old line (ssh-keygen -R '{hostname}' -f {known_hosts}) and connect again", host=node)


def covered_key_error(node: str, hostname: str, known_hosts: str, got: paramiko.PKey,
                      lines: tuple[KnownHostLine, ...]) -> HostKeyError:
    return HostKeyError(
        f"not accepting the host key of {hostname} ({got.get_name()} {fingerprint(got)}): known_hosts lines "
        f"{'; '.join(line.describe() for line in lines[:3])} could cover this host and do not list this key "
        "(kvgate does not verify host certificates, and never records a key where a line pins the host). "
        f"Check the fingerprint and add the key for {hostname} to {known_hosts} yourself", host=node)


def _algorithm_key_type(algorithm: str) -> str:
    return "ssh-rsa" if algorithm in ("rsa-sha2-512", "rsa-sha2-256") else algorithm


def preferring_known_types(known_types: list[str]) -> Callable[..., paramiko.Transport]:
    """A paramiko transport factory that asks the server first for the host key types known_hosts
    lists for the host (OpenSSH's order_hostkeyalgs): a node known by its RSA key must not be asked
    for an ed25519 key it also has, which no line lists, and be refused for it."""

    def make(sock: Any, disabled_algorithms: dict[str, Any] | None = None) -> paramiko.Transport:
        transport = Transport(sock, disabled_algorithms=disabled_algorithms)
        options = transport.get_security_options()
        offered = list(options.key_types)
        first = [a for a in offered if _algorithm_key_type(a) in known_types]
        options.key_types = first + [a for a in offered if a not in first]
        return transport

    return make


class KnownHostsPolicy(paramiko.MissingHostKeyPolicy):
    """Called by paramiko for every server key (kvgate gives paramiko no host keys of its own), after
    key exchange and before authentication. Accepts a key known_hosts lists for the host; refuses a
    revoked, changed or covered one; records a new one only with ``accept_new``."""

    def __init__(self, node: str, known_hosts: str, accept_new: bool, known: KnownHosts | None = None) -> None:
        self.node = node
        self.known_hosts = known_hosts
        self.accept_new = accept_new
        self.known = known or KnownHosts(path=known_hosts)

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        # paramiko names the host "[host]:port" (or "host" on 22), as OpenSSH; only the case differs
        name = ascii_lower(hostname.encode("utf-8", "surrogateescape"))
        result = self.known.check(name, key)
        if result.status == "ok":
            return
        if result.status == "revoked":
            raise revoked_key_error(self.node, hostname, key, result.lines)
        if result.status == "changed":
            raise changed_key_error(self.node, hostname, self.known_hosts, key, result.lines)
        if result.status == "covered":
            raise covered_key_error(self.node, hostname, self.known_hosts, key, result.lines)
        if not self.accept_new:
            raise HostKeyError(
                f"unknown host key for {hostname}: {key.get_name()} {fingerprint(key)} is not in "
                f"{self.known_hosts}. If this fingerprint is the node's, accept it once with "
                f"--accept-new-host-keys (or `accept_new_host_keys: true` for this node in the inventory); "
                f"it is then recorded in {self.known_hosts}",
                host=self.node)
        append_known_host(self.known_hosts, name.decode("utf-8", "surrogateescape"), key)

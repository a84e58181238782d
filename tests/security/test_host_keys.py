"""#29 item 2 (part): a new host key is never trusted while a known_hosts line could cover the host.

The finding: paramiko matches host names exactly, so ``[127.0.0.?]:PORT <pinned key>`` read as
"unknown" and ``kvgate ping --accept-new-host-keys`` appended a different key, where OpenSSH with
``StrictHostKeyChecking=accept-new`` refuses. kvgate does not match patterns itself: while any
pattern (``*``, ``?``, ``!``) or ``@cert-authority`` line is in the file, a new key is refused."""

from __future__ import annotations

from pathlib import Path

import paramiko
import pytest

from harness.remote.base import HostKeyError
from harness.remote.hostkeys import KnownHostsPolicy, read_known_hosts


def _key_line(key: paramiko.PKey) -> str:
    return f"{key.get_name()} {key.get_base64()}"


@pytest.mark.parametrize("pattern", ["[127.0.0.?]:2222", "[127.0.0.*]:2222", "*,!other", "@cert-authority *"])
def test_a_pattern_line_blocks_accept_new(tmp_path: Path, pattern: str) -> None:
    pinned = paramiko.RSAKey.generate(1024)
    attacker = paramiko.RSAKey.generate(1024)
    kh = tmp_path / "known_hosts"
    kh.write_text(f"{pattern} {_key_line(pinned)}\n")
    before = kh.read_text()
    policy = KnownHostsPolicy("n1", str(kh), True, read_known_hosts(str(kh)))
    with pytest.raises(HostKeyError, match="could cover this host"):
        policy.missing_host_key(paramiko.SSHClient(), "[127.0.0.1]:2222", attacker)
    assert kh.read_text() == before  # nothing appended


def test_accept_new_still_works_without_pattern_lines(tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[10.0.0.9]:22 {_key_line(paramiko.RSAKey.generate(1024))}\n")
    key = paramiko.RSAKey.generate(1024)
    KnownHostsPolicy("n1", str(kh), True, read_known_hosts(str(kh))).missing_host_key(
        paramiko.SSHClient(), "[127.0.0.1]:2222", key)
    assert key.get_base64() in kh.read_text()

"""OpenSSH's own answers about known_hosts, to check kvgate's matcher against: ``ssh-keygen -F``
(which lines cover a name), ``ssh-keygen -H`` (hashed lines as OpenSSH writes them) and the ``ssh``
client's accept-new decision against a real server."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from harness.remote.hostkeys import read_known_hosts

_FOUND = re.compile(r"^# Host .* found: line (\d+)", re.M)


def keygen_found(known_hosts: Path, name: str) -> set[int]:
    """Line numbers ``ssh-keygen -F name`` reports (every marker included)."""
    r = subprocess.run(["ssh-keygen", "-F", name, "-f", str(known_hosts)],  # noqa: S603, S607
                       capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert r.returncode in (0, 1), r.stderr
    return {int(n) for n in _FOUND.findall(r.stdout)}


def kvgate_found(known_hosts: Path, name: str) -> set[int]:
    """Line numbers kvgate's reader says cover ``name`` (the same question, kvgate's answer), among
    lines with a key it can read: a line with an unreadable key, which OpenSSH skips, still covers
    the host for kvgate (no new key is recorded past it), a deliberate difference."""
    known = read_known_hosts(str(known_hosts))
    return {int(line.where.rsplit(":", 1)[1]) for line in known.covering(name.encode()) if line.key is not None}


def hashed_lines(tmp: Path, plain: str) -> list[str]:
    """``plain`` known_hosts text hashed by ``ssh-keygen -H`` (one line per name of a list)."""
    work = tmp / "to-hash"
    work.write_text(plain)
    subprocess.run(["ssh-keygen", "-H", "-f", str(work)], check=True, capture_output=True,  # noqa: S603, S607
                   stdin=subprocess.DEVNULL, timeout=30)
    return work.read_text().splitlines()


def key_text(pub: Path) -> str:
    """``type base64`` of an OpenSSH public key file."""
    return " ".join(pub.read_text().split()[:2])


def ssh_accept_new(known_hosts: Path, host: str, port: int, user: str, identity: Path) -> bool:
    """Does OpenSSH's client (StrictHostKeyChecking=accept-new) connect to ``host:port`` with this
    known_hosts? It may append to the file, as kvgate may."""
    assert shutil.which("ssh")
    r = subprocess.run(  # noqa: S603
        ["ssh", "-F", "/dev/null", "-i", str(identity), "-p", str(port), "-o", "BatchMode=yes",
         "-o", "IdentitiesOnly=yes", "-o", f"UserKnownHostsFile={known_hosts}",
         "-o", "GlobalKnownHostsFile=/dev/null", "-o", "StrictHostKeyChecking=accept-new",
         "-o", "HashKnownHosts=no", "-o", "CheckHostIP=no", "-o", "ConnectTimeout=10",
         f"{user}@{host}", "true"],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode in (0, 255), r.stderr
    return r.returncode == 0

"""#29 item 2: host keys as OpenSSH matches them.

The findings: paramiko matched host names exactly, so ``[127.0.0.?]:PORT <pinned key>`` read as
"unknown" and ``kvgate ping --accept-new-host-keys`` appended a different key, where OpenSSH with
``StrictHostKeyChecking=accept-new`` refuses; a key marked ``@revoked`` but also listed on a plain line
was refused only after authentication (sshd logged "Accepted publickey" first). 7fcf472 then
refused every new key while any pattern line was in the file, covering the host or not (a false
refusal OpenSSH does not make), and a host known only through a pattern could not be reached.

Now ``harness/remote/hostmatch.py`` matches as OpenSSH does. Checked here: OpenSSH's own match
test cases (regress/unittests/match/tests.c), ``ssh-keygen -F`` on every line form kvgate accepts
(hashed, wildcards, negation, ``[host]:port``, markers), and the ``ssh`` client's accept-new decision
against a real sshd, scenario by scenario."""

from __future__ import annotations

import base64
import time
from pathlib import Path
from typing import Callable

import paramiko
import pytest

from harness.remote.base import HostKeyError
from harness.remote.hostkeys import KnownHostsPolicy, read_known_hosts
from harness.remote.hostmatch import match_pattern, match_pattern_list
from harness.remote.ssh import SSHExecutor
from tests.security.openssh_hosts import (
    hashed_lines,
    key_text,
    keygen_found,
    kvgate_found,
    ssh_accept_new,
)
from tests.support.sshd import KeyStore, SshCluster

Factory = Callable[..., SshCluster]

# OpenSSH's regress/unittests/match/tests.c: (string, pattern, match_pattern's answer)
PATTERN_CASES = [
    ("", "", True), ("", "aaa", False), ("aaa", "", False), ("aaa", "aaaa", False), ("aaaa", "aaa", False),
    ("", "*", True), ("a", "?", True), ("aa", "a?", True), ("a", "*", True), ("aa", "a*", True),
    ("aa", "?*", True), ("aa", "**", True), ("aa", "?a", True), ("aa", "*a", True), ("ba", "a?", False),
    ("ba", "a*", False), ("ab", "?a", False), ("ab", "*a", False),
    # found by tests/fuzz/test_fuzz_known_hosts.py: a "*" in the name against a "*" in the pattern
    ("*1", "*", True), ("a*b", "a*b", True), ("*", "?", True), ("a*", "*a", False),
]
# (string, pattern list, dolower, match_pattern_list's answer). ("a", "!b") and ("b", "a,!a"): OpenSSH's
# tests mark them "XXX negated" (disabled); its code, and ssh-keygen -F, say 0: a negation alone never matches.
LIST_CASES = [
    ("", "", 0, 0), ("", "*", 0, 1), ("", "!*", 0, -1), ("", "!a,*", 0, 1), ("", "*,!a", 0, 1),
    ("", "a,!*", 0, -1), ("", "!*,a", 0, -1), ("a", "", 0, 0), ("a", "*", 0, 1), ("a", "!*", 0, -1),
    ("a", "!a", 0, -1), ("a", "!b", 0, 0), ("a", "!a,*", 0, -1), ("b", "!a,*", 0, 1), ("a", "*,!a", 0, -1),
    ("b", "*,!a", 0, 1), ("a", "a,!*", 0, -1), ("b", "a,!*", 0, -1), ("a", "a,!a", 0, -1), ("b", "a,!a", 0, 0),
    ("a", "!*,a", 0, -1), ("b", "!*,a", 0, -1),
    ("abc", "ABC", 0, 0), ("ABC", "abc", 0, 0), ("abc", "ABC", 1, 1), ("ABC", "abc", 1, 0),
]


@pytest.mark.parametrize(("s", "pattern", "expected"), PATTERN_CASES)
def test_match_pattern_as_openssh(s: str, pattern: str, expected: bool) -> None:
    assert match_pattern(s.encode(), pattern.encode()) is expected


@pytest.mark.parametrize(("s", "patterns", "dolower", "expected"), LIST_CASES)
def test_match_pattern_list_as_openssh(s: str, patterns: str, dolower: int, expected: int) -> None:
    assert match_pattern_list(s.encode(), patterns.encode(), dolower=bool(dolower)) == expected


NAMES = ["[127.0.0.1]:2222", "[127.0.0.1]:2223", "127.0.0.1", "127.0.0.12", "node1.example.com",
         "Node1.Example.COM", "other", "db.example.org", "2001:db8::1", "[2001:db8::1]:2222", "a.example.com"]


def _line_forms(tmp: Path, key: str) -> list[str]:
    """Every host-field form kvgate accepts, with OpenSSH's own hashing for the hashed ones."""
    plain = [
        "[127.0.0.?]:2222", "[127.0.0.*]:2222", "*,!other", "!other,*", "127.0.0.1", "127.0.0.?",
        "[127.0.0.1]:22", "*.example.com,!db.example.com", "NODE1.example.com", "node?.*.com",
        "2001:db8::*", "[2001:db8::1]:*", "**", "*,!*", ",other", "other,", "!", "*.EXAMPLE.ORG",
        "[127.0.0.1]:2222,[127.0.0.1]:2223",
    ]
    lines = [f"{p} {key}" for p in plain] + [f"a.example.com\t{key}"]
    lines += [f"@cert-authority *.example.com {key}", f"@revoked [127.0.0.1]:222? {key}",
              f"@revoked\t127.0.0.1 {key}", f"@bogus * {key}", f"@revoked @revoked * {key}",
              f"  \t node1.example.com {key} a comment", "# [127.0.0.1]:2222 commented out",
              "|1|bad|hash " + key, "|2|abc|def " + key, "other"]
    lines += hashed_lines(tmp, f"[127.0.0.1]:2222,node1.example.com,2001:db8::1 {key}\n")
    return lines


def test_covering_lines_agree_with_ssh_keygen(tmp_path: Path, ssh_keys: KeyStore) -> None:
    key = key_text(Path(f"{ssh_keys.host_keys(0)[0]}.pub"))
    kh = tmp_path / "known_hosts"
    kh.write_text("\n".join(_line_forms(tmp_path, key)) + "\n")
    found_any = 0
    for name in NAMES:
        expected = keygen_found(kh, name)
        assert kvgate_found(kh, name) == expected, name
        found_any += bool(expected)
    assert found_any >= 8  # the names do exercise the lines


def _policy(kh: Path, accept_new: bool = True) -> KnownHostsPolicy:
    return KnownHostsPolicy("n1", str(kh), accept_new, read_known_hosts(str(kh)))


def _pkey(pub: Path) -> paramiko.PKey:
    kind, b64 = pub.read_text().split()[:2]
    return paramiko.PKey.from_type_string(kind, base64.b64decode(b64))


@pytest.mark.parametrize("pattern", ["[127.0.0.?]:2222", "[127.0.0.*]:2222", "*,!other", "hashed"])
def test_a_pattern_pinning_the_host_to_another_key_refuses_it(tmp_path: Path, ssh_keys: KeyStore,
                                                              pattern: str) -> None:
    pinned, attacker = (Path(f"{ssh_keys.host_keys(i)[0]}.pub") for i in (0, 1))
    kh = tmp_path / "known_hosts"
    line = (hashed_lines(tmp_path, f"[127.0.0.1]:2222 {key_text(pinned)}\n")[0] if pattern == "hashed"
            else f"{pattern} {key_text(pinned)}")
    kh.write_text(f"# pinned\n{line}\n")
    assert keygen_found(kh, "[127.0.0.1]:2222") == {2}  # OpenSSH says the line covers the host
    before = kh.read_text()
    with pytest.raises(HostKeyError, match="HOST KEY CHANGED") as ei:
        _policy(kh).missing_host_key(paramiko.SSHClient(), "[127.0.0.1]:2222", _pkey(attacker))
    assert f"{kh}:2" in str(ei.value)
    assert kh.read_text() == before  # nothing appended


def test_a_ca_or_other_type_line_covering_the_host_blocks_accept_new(tmp_path: Path, ssh_keys: KeyStore) -> None:
    ed_pinned, rsa_pinned = (Path(f"{k}.pub") for k in ssh_keys.host_keys(0))
    presented = _pkey(Path(f"{ssh_keys.host_keys(1)[0]}.pub"))  # ed25519
    kh = tmp_path / "known_hosts"
    for line, what in ((f"@cert-authority * {key_text(ed_pinned)}", "@cert-authority"),
                       (f"[127.0.0.?]:2222 {key_text(rsa_pinned)}", "host key ssh-rsa"),
                       ("[127.0.0.1]:2222 ssh-foo AAAAB3Nz", "host key of type ssh-foo, which kvgate cannot read")):
        kh.write_text(line + "\n")
        with pytest.raises(HostKeyError, match="could cover this host") as ei:
            _policy(kh).missing_host_key(paramiko.SSHClient(), "[127.0.0.1]:2222", presented)
        assert f"{kh}:1 ({what}" in str(ei.value)
        assert kh.read_text() == line + "\n"


@pytest.mark.parametrize("pattern", ["*.example.com", "*,![127.0.0.1]:2222", "!other,[127.0.0.1]:2223",
                                     "127.0.0.1", "[127.0.0.1]:22", "|1|bad|hash"])
def test_a_line_that_does_not_cover_the_host_lets_accept_new_record(tmp_path: Path, ssh_keys: KeyStore,
                                                                   pattern: str) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text(f"{pattern} {key_text(Path(f'{ssh_keys.host_keys(0)[0]}.pub'))}\n")
    assert keygen_found(kh, "[127.0.0.1]:2222") == set()  # OpenSSH: the host is new
    key = _pkey(Path(f"{ssh_keys.host_keys(1)[0]}.pub"))
    with pytest.raises(HostKeyError, match="unknown host key"):
        _policy(kh, accept_new=False).missing_host_key(paramiko.SSHClient(), "[127.0.0.1]:2222", key)
    _policy(kh).missing_host_key(paramiko.SSHClient(), "[127.0.0.1]:2222", key)
    assert kh.read_text().splitlines()[1] == f"[127.0.0.1]:2222 {key.get_name()} {key.get_base64()}"


def test_a_mixed_case_host_is_recorded_lowercase_and_found_again(tmp_path: Path, ssh_keys: KeyStore) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text("")
    key = _pkey(Path(f"{ssh_keys.host_keys(0)[0]}.pub"))
    _policy(kh).missing_host_key(paramiko.SSHClient(), "[Node1.Example.COM]:2222", key)
    assert kh.read_text().startswith("[node1.example.com]:2222 ")  # as ssh writes it
    _policy(kh, accept_new=False).missing_host_key(paramiko.SSHClient(), "[NODE1.example.com]:2222", key)


# --- against a real sshd ------------------------------------------------------------------------

def _wait_for_log(cluster: SshCluster, markers: tuple[str, ...], timeout: float = 20.0) -> str:
    """The node's sshd log once one of ``markers`` is in it (the server finished with the
    connection: it logs that after the client went away)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log = cluster.log("node0")
        if any(m in log for m in markers):
            return log
        time.sleep(0.05)
    raise AssertionError(f"sshd never logged any of {markers}:\n{cluster.log('node0')[-2000:]}")


@pytest.mark.ssh
def test_a_revoked_key_is_refused_before_authentication(ssh_cluster: Factory) -> None:
    cluster = ssh_cluster(1)
    node = cluster.nodes[0]
    good = node.host_key_lines()
    revoked = [f"@revoked {line}" for line in good]
    cluster.known_hosts.write_text("\n".join(good + revoked) + "\n")
    with pytest.raises(HostKeyError) as ei:
        SSHExecutor.from_inventory(cluster.inventory, "node0", accept_new_host_keys=True).run(["true"])
    msg = str(ei.value)
    assert "marked @revoked" in msg and f"[{node.host}]:{node.port}" in msg
    # the server saw no authentication attempt: the client left during key exchange
    log = _wait_for_log(cluster, ("[preauth]", "Accepted publickey", "Disconnected from user"))
    assert "Accepted publickey" not in log and "Postponed publickey" not in log
    assert "Failed publickey" not in log
    assert f"{cluster.known_hosts}:3" in msg or f"{cluster.known_hosts}:4" in msg  # the line is named
    # OpenSSH's client refuses the same file
    assert not ssh_accept_new(cluster.known_hosts, node.host, node.port, cluster.user, cluster.client_key)


def _scenarios(cluster: SshCluster, tmp: Path) -> dict[str, str]:
    own, other = (cluster.nodes[i].host_key_lines() for i in (0, 1))
    host = f"[{cluster.nodes[0].host}]:{cluster.nodes[0].port}"
    wild = "[127.0.0.?]:" + str(cluster.nodes[0].port)

    def with_field(lines: list[str], field: str) -> str:
        return "".join(f"{field} {line.split(maxsplit=1)[1]}\n" for line in lines)

    return {
        "own keys through a wildcard": with_field(own, wild),
        "own keys through a negation list": with_field(own, f"!other,*,!{host}x"),
        "own keys hashed": "\n".join(hashed_lines(tmp, with_field(own, host))) + "\n",
        "another node's keys through a wildcard": with_field(other, wild),
        "another node's keys hashed": "\n".join(hashed_lines(tmp, with_field(other, host))) + "\n",
        "another node's keys, host negated": with_field(other, f"!{host},*"),
        "another node's keys for other names": with_field(other, "*.example.com,[127.0.0.1]:1"),
        "own keys listed and revoked by a wildcard": with_field(own, host) + with_field(own, "@revoked *"),
    }


@pytest.mark.ssh
def test_kvgate_decides_as_the_ssh_client_on_a_real_server(ssh_cluster: Factory, tmp_path: Path) -> None:
    """For each known_hosts file, kvgate --accept-new-host-keys connects exactly when OpenSSH's
    client with StrictHostKeyChecking=accept-new does, and records a key exactly when it does."""
    cluster = ssh_cluster(2)
    node = cluster.nodes[0]
    outcomes = {}
    for name, text in _scenarios(cluster, tmp_path).items():
        mine, theirs = tmp_path / f"{len(outcomes)}.kvgate", tmp_path / f"{len(outcomes)}.ssh"
        mine.write_text(text)
        theirs.write_text(text)
        ssh_ok = ssh_accept_new(theirs, node.host, node.port, cluster.user, cluster.client_key)
        try:
            with SSHExecutor.from_inventory(cluster.inventory_with(known_hosts=str(mine)), "node0",
                                            accept_new_host_keys=True) as ex:
                kvgate_ok = ex.run(["true"]).ok
        except HostKeyError:
            kvgate_ok = False
        recorded = (len(mine.read_text().splitlines()) > len(text.splitlines()),
                    len(theirs.read_text().splitlines()) > len(text.splitlines()))
        outcomes[name] = (kvgate_ok, ssh_ok, recorded)
        assert kvgate_ok == ssh_ok and recorded[0] == recorded[1], (name, outcomes[name])
    # the scenarios cover each answer: connect known, refuse, and record new
    assert {o[0] for o in outcomes.values()} == {True, False}
    assert any(o[2][0] for o in outcomes.values()) and any(o[0] and not o[2][0] for o in outcomes.values())

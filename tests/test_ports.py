"""``harness.ports``: loopback ports below the ephemeral range, never handed to two processes at once.

The race it closes was seen in CI: a test picked a free port by binding port 0, the engine started
34 s later (after G4's fio probes) and found it taken by someone's outgoing connection."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from harness import ports
from harness.ports import free_port, free_ports, picking_range

REPO = Path(__file__).resolve().parents[1]
# prints its ports, then holds its slot until its stdin closes: a process that has ended has given
# its slot back, and a later one may take it (rightly; the bind check guards the ports' reuse)
PICK = ("import sys; from harness.ports import free_port; "
        "print(' '.join(str(free_port()) for _ in range(40)), flush=True); sys.stdin.read()")


def test_ports_are_outside_the_ephemeral_range_and_free() -> None:
    low, high = picking_range()
    eph_low, eph_high = ports.ephemeral_range()
    assert high <= eph_low or low > eph_high
    for _ in range(20):
        base = free_ports(3)
        assert low <= base and base + 3 <= high
        for p in range(base, base + 3):
            with socket.socket() as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("127.0.0.1", p))


@pytest.mark.parametrize(("ephemeral", "expected"), [
    ("32768\t60999\n", (10000, 32768)),   # Linux's default: below it
    ("1024 60999\n", (61000, 65536)),      # a range that starts low: above it
    ("15000 65000\n", (10000, 15000)),     # the larger gap (5000 ports below, 535 above)
    ("1024 65535\n", (10000, 65536)),      # no room outside it: everything, the bind check alone
    ("garbage\n", (10000, 32768)),         # unreadable: as Linux's default
])
def test_the_ports_handed_out_avoid_the_ephemeral_range(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        ephemeral: str, expected: tuple[int, int]) -> None:
    fake = tmp_path / "ip_local_port_range"
    fake.write_text(ephemeral)
    monkeypatch.setattr(ports, "EPHEMERAL_RANGE", fake)
    assert picking_range() == expected


def _away_from_the_slot_end() -> int:
    """A port whose next two in this process's slot do not wrap round to the slot's start."""
    while True:
        port = free_port()
        assert ports._slot is not None
        if port + 2 < ports._slot.high:
            return port


def test_a_port_something_listens_on_is_not_handed_out() -> None:
    first = _away_from_the_slot_end()
    with socket.socket() as busy:  # the port this process would hand out next
        busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        busy.bind(("127.0.0.1", first + 1))
        busy.listen(1)
        assert free_port() == first + 2


def test_processes_picking_at_once_never_get_the_same_port() -> None:
    procs = [subprocess.Popen([sys.executable, "-c", PICK], cwd=REPO, stdin=subprocess.PIPE,  # noqa: S603
                              stdout=subprocess.PIPE, text=True)
             for _ in range(4)]
    try:
        picks = [set(map(int, _first_line(p).split())) for p in procs]
        mine = {free_port() for _ in range(40)}  # while all four still hold their slots
    finally:
        for p in procs:
            p.kill()
            p.communicate()  # reaps it and closes its pipes
    assert all(len(s) == 40 for s in picks)
    every = [mine, *picks]
    assert sum(len(s) for s in every) == len(set().union(*every))


def _first_line(proc: subprocess.Popen[str]) -> str:
    """The process's first line of output, or a failure naming its exit code if it ends without one
    (the test process's own timeout bounds the wait)."""
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.endswith("\n"), f"the picking process ended without its ports (exit {proc.poll()})"
    return line


def test_a_forked_child_takes_a_slot_of_its_own() -> None:
    before = _away_from_the_slot_end()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its first port, through the pipe
        try:
            os.write(w, str(free_port()).encode())
        finally:
            os._exit(0)
    os.close(w)
    try:
        child = int(os.read(r, 32))
    finally:
        os.close(r)
        os.waitpid(pid, 0)
    # the parent's next port would be before + 1; the child's slot is another share of the range
    assert child != before + 1 and free_port() == before + 1

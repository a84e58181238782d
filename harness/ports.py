"""Loopback ports for the servers kvgate starts on this machine (the demo's engine), and that the
tests start: picked so that nothing else takes them between the pick and the server's bind.

A port found free by binding port 0 comes from the kernel's ephemeral range, from which every
outgoing connection on the machine takes its local port at any moment; a server started tens of
seconds later (after a gate's fio probes) found it taken (seen in CI: "port ... is already in use").
So ports are picked outside that range: below it (Linux's default, 32768-60999, leaves 10000-32767),
or above it where a range that starts low leaves more room there. Two processes picking at once (two
demos, the parallel test workers) would still meet there, so each process first locks one slot of
that range (``flock`` on a slot file, released by the kernel when the process ends) and hands out the
ports of its own slot in turn, each checked free by a bind.
"""

from __future__ import annotations

import fcntl
import os
import random
import socket
import threading
from pathlib import Path
from typing import Optional

EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST = 10000  # below: well-known services' ports (and a range the tests' own fixed ports avoid)
HIGHEST = 65535
SLOTS = 48
MIN_SLOT = 16  # ports a slot needs to serve a test's servers; with less outside the range, the bind check alone


class _Slot:
    def __init__(self, pid: int, fd: Optional[int], low: int, high: int) -> None:
        self.pid, self.fd, self.low, self.high = pid, fd, low, high
        self.next = low


_lock = threading.Lock()
_slot: Optional[_Slot] = None


def ephemeral_range() -> tuple[int, int]:
    """The kernel's ephemeral range, first and last port (Linux's default where it cannot be read)."""
    try:
        low, high = (int(v) for v in EPHEMERAL_RANGE.read_text().split()[:2])
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def picking_range() -> tuple[int, int]:
    """The ports handed out, ``[low, high)``: the larger of the gaps below and above the ephemeral
    range; with neither wide enough for the slots, everything from LOWEST up, the bind check alone
    guarding it."""
    eph_low, eph_high = ephemeral_range()
    below = (LOWEST, max(LOWEST, eph_low))
    above = (max(LOWEST, eph_high + 1), HIGHEST + 1)
    low, high = max(below, above, key=lambda r: r[1] - r[0])
    if high - low < SLOTS * MIN_SLOT:
        return LOWEST, HIGHEST + 1
    return low, high


def _lock_dir() -> Path:
    d = Path.home() / ".cache" / "kvgate" / "ports"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _take_slot() -> _Slot:
    """Lock a free slot (a process's own share of the ports outside the ephemeral range); with every
    slot taken, the whole range, the bind check alone guarding it."""
    low, high = picking_range()
    width = (high - low) // SLOTS
    first = random.randrange(SLOTS)
    directory = _lock_dir()
    for k in range(SLOTS):
        n = (first + k) % SLOTS
        fd = os.open(directory / f"slot-{n}", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return _Slot(os.getpid(), fd, low + n * width, low + (n + 1) * width)
    return _Slot(os.getpid(), None, low, high)


def _bindable(ports: range) -> bool:
    socks: list[socket.socket] = []
    try:
        for p in ports:
            s = socket.socket()
            socks.append(s)
            # as the servers bind (asyncio, sshd, PostgreSQL): a port with a closed connection in
            # TIME_WAIT is usable
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind(("127.0.0.1", p))
        return True
    except OSError:
        return False
    finally:
        for s in socks:
            s.close()


def free_ports(n: int = 1) -> int:
    """The first of ``n`` consecutive loopback ports, free now, that no other kvgate process on this
    machine is handed out (module docstring)."""
    global _slot
    with _lock:
        if _slot is None or _slot.pid != os.getpid():  # a forked child takes a slot of its own
            _slot = _take_slot()
        slot = _slot
        for _ in range(slot.high - slot.low):
            base = slot.next if slot.next + n <= slot.high else slot.low
            slot.next = base + n
            if _bindable(range(base, base + n)):
                return base
    raise OSError(f"no {n} consecutive free loopback ports in {slot.low}-{slot.high - 1}")


def free_port() -> int:
    """One loopback port (:func:`free_ports`)."""
    return free_ports(1)

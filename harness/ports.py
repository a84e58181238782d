"""Loopback ports for the servers kvgate starts on this machine (the demo's engine), and that the
tests start: picked so that nothing else takes them between the pick and the server's bind.

A port found free by binding port 0 comes from the kernel's ephemeral range, from which every
outgoing connection on the machine takes its local port at any moment; a server started tens of
seconds later (after a gate's fio probes) found it taken (seen in CI: "port ... is already in use").
So ports are picked below that range. Two processes picking at once (two demos, the parallel test
workers) would still meet there, so each process first locks one slot of that range (``flock`` on a
slot file, released by the kernel when the process ends) and hands out the ports of its own slot in
turn, each checked free by a bind.
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
SLOTS = 48


class _Slot:
    def __init__(self, pid: int, fd: Optional[int], low: int, high: int) -> None:
        self.pid, self.fd, self.low, self.high = pid, fd, low, high
        self.next = low


_lock = threading.Lock()
_slot: Optional[_Slot] = None


def ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (32768 where it cannot be read)."""
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _lock_dir() -> Path:
    d = Path.home() / ".cache" / "kvgate" / "ports"
    d.mkdir(parents=True, exist_ok=True)
    return d


def _take_slot() -> _Slot:
    """Lock a free slot (a process's own share of the ports below the ephemeral range); with every
    slot taken, the whole range, the bind check alone guarding it."""
    low, high = LOWEST, max(ephemeral_low(), LOWEST + 2 * SLOTS)
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

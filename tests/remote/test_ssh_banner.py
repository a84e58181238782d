"""A port that accepts TCP connections but where no SSH server speaks is named as such: "no SSH banner
from HOST:PORT within N s", an Unreachable (exit 4), not a later handshake error."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.config.inventory import Inventory
from harness.remote.base import Unreachable
from harness.remote.ssh import SSHExecutor


@pytest.fixture()
def silent_port() -> Iterator[int]:
    """A real listener on 127.0.0.1 that accepts and never writes a byte."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        srv.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
                held.append(conn)
            except OSError:
                continue

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        yield srv.getsockname()[1]
    finally:
        stop.set()
        t.join(5)
        for c in held:
            c.close()
        srv.close()


def test_a_silent_server_is_named(silent_port: int, tmp_path: Path) -> None:
    inv = Inventory.model_validate({
        "cluster": "t",
        "defaults": {"known_hosts": str(tmp_path / "known_hosts"), "connect_timeout": "1s"},
        "nodes": [{"name": "mute", "host": "127.0.0.1", "port": silent_port}],
    })
    ex = SSHExecutor.from_inventory(inv, "mute")
    t0 = time.monotonic()
    with pytest.raises(Unreachable, match=rf"no SSH banner from 127\.0\.0\.1:{silent_port} within 1 s"):
        ex.run(["true"])
    assert time.monotonic() - t0 < 30
    ex.close()

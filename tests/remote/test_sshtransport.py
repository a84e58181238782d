"""harness.remote.sshtransport against a real sshd: a connection that drops while a channel is
being opened ends its transport cleanly, and the executor reconnects for the next command."""

from __future__ import annotations

from collections.abc import Callable

import paramiko
import pytest

from harness.remote.ssh import SSHExecutor
from harness.remote.sshtransport import Transport
from tests.support.sshd import SshCluster

pytestmark = pytest.mark.ssh


def test_a_drop_while_a_channel_is_half_opened_ends_the_transport_and_the_next_command_reconnects(
        ssh_cluster: Callable[..., SshCluster]) -> None:
    cluster = ssh_cluster(1)
    with SSHExecutor.from_inventory(cluster.inventory, "node0") as ex:
        assert ex.run(["true"]).ok
        transport = ex._connection()
        assert isinstance(transport, Transport)
        # the state open_channel leaves for a moment: registered, transport not yet attached
        half_made = paramiko.Channel(transport._next_channel())
        transport._channels.put(half_made.chanid, half_made)
        cluster.kill("node0")
        transport.join(timeout=60)  # the reader thread ends on the dropped connection
        assert not transport.is_alive()
        # paramiko's own thread died on the half-made channel before this (an unhandled thread
        # exception, which fails the test by itself) and the transport stayed "active"
        assert not transport.is_active()
        cluster.restart("node0")
        assert ex.run(["echo", "back"]).stdout == "back\n"
        assert ex.connect_count == 2

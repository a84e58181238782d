"""The paramiko transport kvgate connects with: paramiko's, minus a race that left a dead
connection looking alive.

``Transport.open_channel`` registers a new channel in the transport's channel map and only then
attaches the transport to it (both under the transport's lock). The transport's reader thread, on
its way out after the connection dropped, unlinks every registered channel without that lock; a
channel caught in between has no transport yet, and the thread died on it (``AttributeError:
'NoneType' object has no attribute '_unlink_channel'``) before it marked the transport inactive.
The opener then waited out its whole timeout on a transport that still said it was active, and
kvgate, seeing a live connection refuse a channel, did not reconnect. Seen once in the test suite
(a command issued just as sshd was killed, on a loaded machine), paramiko 5.1.0.

Here the map hands the exiting thread only channels already attached: the half-made one is left to
its opener, which then sees the transport inactive and fails at once, and kvgate reconnects."""

from __future__ import annotations

from typing import Any

import paramiko
from paramiko.transport import ChannelMap


class _AttachedChannels(ChannelMap):
    def values(self) -> list[paramiko.Channel]:
        return [c for c in super().values() if c.transport is not None]


class Transport(paramiko.Transport):
    """A paramiko transport whose reader thread never dies on a channel still being opened."""

    def __init__(self, sock: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(sock, *args, **kwargs)
        self._channels = _AttachedChannels()

"""The CRC-32 a chunk file's header carries for its payload: written when a chunk is stored, checked
with one pass when it is read back, so a tier that returns other bytes than were stored is seen (the
emulator's output then changes, as a real engine's would). Shared by the emulator's in-process
tiers (kvstore) and its multiprocess LMCache server (mpserver)."""

from __future__ import annotations

import zlib

from harness.sim import directio

# Where a chunk file's header records the CRC-32 of its payload (after the magic and the hash).
_CRC_AT = len(directio.MAGIC) + 32


def with_crc(data: bytes) -> bytes:
    """``data`` (a chunk file) with the CRC-32 of its payload in the header, computed when it is
    stored (off the request path), so a read checks the bytes it got with one pass."""
    out = bytearray(data)
    out[_CRC_AT:_CRC_AT + 4] = zlib.crc32(memoryview(out)[directio.HEADER:]).to_bytes(4, "little")
    return bytes(out)


def expected_crc(digest: bytes, chunk_bytes: int) -> int:
    """CRC-32 of a correct chunk's payload, for a file whose header records none."""
    return zlib.crc32(memoryview(directio.chunk_payload(digest, chunk_bytes))[directio.HEADER:])


class ChunkCrc:
    """What a chunk read returned (``directio.read_chunk``'s ``content``): the CRC-32 of its payload
    and the one its header recorded (0: a file from before the header carried one)."""

    def __init__(self) -> None:
        self.crc = 0
        self.recorded = 0

    def update(self, data: memoryview) -> None:
        self.recorded = int.from_bytes(bytes(data[_CRC_AT:_CRC_AT + 4]), "little")
        self.crc = zlib.crc32(data[directio.HEADER:])

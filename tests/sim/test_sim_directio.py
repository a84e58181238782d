"""Chunk files: real bytes, page-cache bypass, the fadvise fallback, atomic writes."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from harness.sim import directio


def test_roundtrip_with_odirect_reads_every_byte(tmp_path: Path) -> None:
    digest = bytes(range(32))
    data = directio.chunk_payload(digest, 3 * 4096 + 100)
    assert len(data) == 4 * 4096  # rounded up to the O_DIRECT alignment
    path = tmp_path / "c.kvchunk"
    directio.write_chunk(str(path), data)
    n, mode = directio.read_chunk(str(path), digest)
    assert n == len(data)
    assert mode == directio.MODE_ODIRECT  # tmp_path is on ext4 here
    assert not list(tmp_path.glob("*.tmp"))


def test_fadvise_fallback_when_odirect_is_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "c.kvchunk"
    digest = b"\x07" * 32
    directio.write_chunk(str(path), directio.chunk_payload(digest, 8192))
    real_open = os.open

    def no_direct(p: str, flags: int, *a: int) -> int:
        if flags & os.O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument")  # what tmpfs/NFS without O_DIRECT answer
        return real_open(p, flags, *a)

    monkeypatch.setattr(os, "open", no_direct)
    n, mode = directio.read_chunk(str(path), digest)
    assert (n, mode) == (8192, directio.MODE_FADVISE)


def test_header_mismatch_is_detected(tmp_path: Path) -> None:
    path = tmp_path / "c.kvchunk"
    directio.write_chunk(str(path), directio.chunk_payload(b"\x01" * 32, 4096))
    with pytest.raises(ValueError, match="header does not match"):
        directio.read_chunk(str(path), b"\x02" * 32)


def test_failed_write_leaves_no_temp_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def enospc(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", enospc)
    with pytest.raises(OSError) as info:
        directio.write_chunk(str(tmp_path / "c.kvchunk"), b"x" * 4096)
    assert info.value.errno == errno.ENOSPC
    assert list(tmp_path.iterdir()) == []

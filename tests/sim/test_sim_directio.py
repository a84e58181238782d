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


def _vma_fields(addr: int) -> dict[str, str]:
    """The /proc/self/smaps fields of the mapping that holds ``addr``."""
    fields: dict[str, str] = {}
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()[0]
        if "-" in head and ":" not in head:
            lo, hi = (int(x, 16) for x in head.split("-"))
            inside = lo <= addr < hi
        elif inside and ":" in head:
            fields[head.rstrip(":")] = line.split(None, 1)[1].strip()
    return fields


def test_read_buffer_is_huge_page_aligned_and_advised() -> None:
    # the destination of a direct read decides its speed on a VM (docs/estimator.md: 16 chunk
    # reads took 17 ms into huge pages, 35-95 ms into 4 KiB pages): the buffer must start on a
    # 2 MiB boundary, be private (shared anonymous memory gets no transparent huge pages), and be
    # advised for them wherever the kernel grants them on request
    import ctypes
    import threading

    out: dict[str, object] = {}

    def in_fresh_thread() -> None:  # buffers are per thread: this one starts with none
        view = directio._buffer(4 << 20)
        addr = ctypes.addressof(ctypes.c_char.from_buffer(view))
        view[:] = b"\1" * len(view)  # touched, so the kernel has decided its pages
        out["addr"], out["len"], out["vma"] = addr, len(view), _vma_fields(addr)
        directio._BUFFERS.buf.close()
        del directio._BUFFERS.buf

    t = threading.Thread(target=in_fresh_thread)
    t.start()
    t.join()
    assert out["len"] == 4 << 20
    assert int(out["addr"]) % directio.HUGE_PAGE == 0  # type: ignore[call-overload]
    vma = out["vma"]
    assert isinstance(vma, dict) and vma, "the buffer's mapping is not in /proc/self/smaps"
    assert "sh" not in vma["VmFlags"].split()
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if thp.exists() and "[never]" not in thp.read_text():
        assert "hg" in vma["VmFlags"].split()  # MADV_HUGEPAGE took
        assert vma.get("THPeligible") == "1"

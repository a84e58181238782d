"""Where fio's I/O buffers live: on transparent huge pages, as an engine's pinned pool and kvgate's
emulator (``harness.readbuffer``) read into.

Why: a direct read's time follows how many pieces its destination memory is made of. fio allocates
its buffers with ``malloc``; on 4 KiB pages which physical pages a run gets is luck, and a 1 MiB
direct read lands in anything from one piece to 256. Measured on this project's VM (virtio-blk, 2 x
64 MiB, 2 jobs, iodepth 8): six separate 4-s fio runs over the same files read 0.57, 0.76, 0.77,
0.81, 0.92 and 1.14 GB/s into fio's default buffers, and 1.68-1.77 GB/s with the buffers on huge
pages. Each run is flat on its own, so the protocol's rounds stayed steady inside a probe while two
probes minutes apart (G4 before and after the soak) differed by up to 40%: a false FAIL of the
retention check that came from the measuring tool, not the storage.

How: glibc's ``glibc.malloc.hugetlb=1`` tunable (glibc >= 2.35) makes fio's large ``malloc`` regions
``madvise(MADV_HUGEPAGE)``, in fio's own environment only: no node setting changes. Where
transparent huge pages are off (``never``) or glibc is older, the tunable does nothing; the record
says so, and that figures of separate fio runs may then differ by where their buffers land.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from harness.remote.base import Executor

TUNABLE = "GLIBC_TUNABLES=glibc.malloc.hugetlb=1"
THP_ENABLED = "/sys/kernel/mm/transparent_hugepage/enabled"
GLIBC_MIN = (2, 35)  # the first glibc with glibc.malloc.hugetlb


def with_huge_page_buffers(argv: list[str]) -> list[str]:
    """``argv`` run with fio's buffers requested on huge pages (an argument list, never a shell)."""
    return ["env", TUNABLE, *argv]


@dataclass(frozen=True)
class BufferPages:
    """What the node grants fio's buffers: its THP mode and glibc version, as read."""

    thp_mode: Optional[str]  # always | madvise | never; None: unreadable
    glibc: Optional[tuple[int, ...]]

    @property
    def huge(self) -> bool:
        return self.thp_mode in ("always", "madvise") and self.glibc is not None and self.glibc >= GLIBC_MIN

    def describe(self) -> str:
        mode = self.thp_mode or "unreadable"
        libc = ".".join(map(str, self.glibc)) if self.glibc else "unknown"
        if self.huge:
            return f"I/O buffers on transparent huge pages ({TUNABLE.split('=', 1)[1]}, THP {mode}, glibc {libc})"
        return (f"I/O buffers on 4 KiB pages (THP {mode}, glibc {libc}: huge pages not granted), so figures of "
                "separate fio runs may differ by where their buffers land")

    def to_json(self) -> dict[str, object]:
        return {"thp_mode": self.thp_mode, "glibc": ".".join(map(str, self.glibc)) if self.glibc else None,
                "huge_pages": self.huge, "text": self.describe()}


def parse_thp_mode(text: str) -> Optional[str]:
    """The bracketed choice of ``transparent_hugepage/enabled`` (``always [madvise] never``)."""
    m = re.search(r"\[(\w+)\]", text)
    return m.group(1) if m else None


def parse_glibc(text: str) -> Optional[tuple[int, ...]]:
    """``getconf GNU_LIBC_VERSION`` output (``glibc 2.36``) as a tuple."""
    m = re.search(r"glibc\s+(\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def buffer_pages(executor: Executor) -> BufferPages:
    """Read the node's THP mode and glibc version (two bounded commands)."""
    thp = executor.run(["cat", THP_ENABLED], check=False, timeout=30)
    libc = executor.run(["getconf", "GNU_LIBC_VERSION"], check=False, timeout=30)
    return BufferPages(parse_thp_mode(thp.stdout[:256]) if thp.ok else None,
                       parse_glibc(libc.stdout[:256]) if libc.ok else None)

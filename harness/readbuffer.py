"""A read buffer for O_DIRECT reads: page-aligned, its window on a 2 MiB boundary, advised for
transparent huge pages. One class, used by the KV emulator (``harness.sim.directio``) and shipped
as source inside the node helper of the checkpoint and model-load probes (``harness.probes.node_io``,
which runs with ``python3 -c`` on a node that has no kvgate installed), so the emulator and the
probes read into the same kind of memory. Stdlib only, and written for Python >= 3.6 (no
``from __future__`` import: the helper pastes this class into its own script).
"""

import ctypes
import mmap

HUGE_PAGE = 2 << 20


class ReadBuffer:
    """A private anonymous map with a window starting on a 2 MiB boundary, advised for transparent
    huge pages. Why: a direct read's time follows how many pieces its destination is made of, and
    4 KiB pages from a fragmented free list make a 4 MiB read 1,024 of them. On this project's VMs
    (virtio-blk) the same 16 chunk reads took 17 ms into huge pages and 35-95 ms into 4 KiB ones,
    by the luck of which pages a thread's buffer got, so the emulator's restore speed was an
    allocation lottery, and a probe's threads and the emulator's differed 2-3x. Engines read into
    pinned pools allocated once; this is the emulator's stand-in. Where huge pages are not granted
    (THP off, no ``madvise``) it is a plain page-aligned buffer."""

    def __init__(self, size: int) -> None:
        self.raw = mmap.mmap(-1, size + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        base = ctypes.addressof(ctypes.c_char.from_buffer(self.raw))
        start = (-base) % HUGE_PAGE
        if hasattr(mmap, "MADV_HUGEPAGE"):
            try:
                self.raw.madvise(mmap.MADV_HUGEPAGE, start, size)
            except OSError:
                pass  # THP compiled out or refused: 4 KiB pages, still page-aligned
        self.view = memoryview(self.raw)[start:start + size]

    def close(self) -> None:
        self.view.release()
        self.raw.close()

"""Where fio's I/O buffers live (harness.probes.iobuffers): the node's THP mode and glibc read back,
and what the record says when huge pages are not granted."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from harness.probes.iobuffers import (
    THP_ENABLED,
    BufferPages,
    buffer_pages,
    parse_glibc,
    parse_thp_mode,
    with_huge_page_buffers,
)
from harness.remote.local import LocalExecutor


def test_the_tunable_reaches_fio_by_environment_in_an_argument_list() -> None:
    assert with_huge_page_buffers(["fio", "--output=x", "job.fio"]) == [
        "env", "GLIBC_TUNABLES=glibc.malloc.hugetlb=1", "fio", "--output=x", "job.fio"]


def test_parsers_read_the_kernels_and_getconfs_formats() -> None:
    assert parse_thp_mode("always [madvise] never\n") == "madvise"
    assert parse_thp_mode("[always] madvise never") == "always"
    assert parse_thp_mode("garbage") is None
    assert parse_glibc("glibc 2.36\n") == (2, 36)
    assert parse_glibc("musl") is None


def test_huge_pages_only_where_thp_is_on_and_glibc_knows_the_tunable() -> None:
    assert BufferPages("madvise", (2, 36)).huge
    assert BufferPages("always", (2, 35)).huge
    for pages in (BufferPages("never", (2, 36)), BufferPages("madvise", (2, 31)), BufferPages(None, (2, 36)),
                  BufferPages("madvise", None)):
        assert not pages.huge
        assert "4 KiB pages" in pages.describe() and "may differ" in pages.describe()
    assert BufferPages("madvise", (2, 36)).to_json() == {
        "thp_mode": "madvise", "glibc": "2.36", "huge_pages": True,
        "text": "I/O buffers on transparent huge pages (glibc.malloc.hugetlb=1, THP madvise, glibc 2.36)"}


def test_this_node_is_read_as_it_is() -> None:
    pages = buffer_pages(LocalExecutor("n1"))
    want_thp = parse_thp_mode(Path(THP_ENABLED).read_text()) if os.path.exists(THP_ENABLED) else None
    assert pages.thp_mode == want_thp
    libc = subprocess.run(["getconf", "GNU_LIBC_VERSION"], capture_output=True, text=True, check=False)
    assert pages.glibc == parse_glibc(libc.stdout)

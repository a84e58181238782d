"""The node-side helper of the checkpoint and model-load probes, and how to call it.

The helper is one stdlib-only Python program (``SCRIPT``, Python >= 3.6) passed to the node's
interpreter with ``python3 -c SCRIPT <command> <args>``: nothing is installed on the node. It
prints one JSON object on stdout. Commands:

* ``write DIR FILES TOTAL_BYTES WRITERS BLOCK [MODE]``: write FILES files (TOTAL_BYTES in all) with
  WRITERS parallel threads, fsync each file, then fsync DIR; times with ``perf_counter``. MODE
  ``buffered`` (default) or ``direct`` (O_DIRECT from page-aligned buffers: every file's size a
  multiple of 4 KiB).
* ``drop-caches``: ``sync`` then ``echo 3 > /proc/sys/vm/drop_caches`` when root; says whether it
  happened and why not.
* ``read MODE READERS BLOCK PATH...``: read every regular file under the PATHs with READERS
  parallel threads; MODE ``buffered`` or ``direct`` (O_DIRECT into ``harness.readbuffer.ReadBuffer``
  buffers, 2 MiB-aligned and advised for huge pages, the emulator's own;
  falls back to buffered, and says so, where the filesystem refuses O_DIRECT).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping, Sequence
from typing import Any

from harness.probes.errors import ProbeError
from harness.readbuffer import HUGE_PAGE, ReadBuffer
from harness.remote.base import Executor

_SCRIPT = r"""
import ctypes, json, mmap, os, struct, sys, threading, time

# READ_BUFFER

def out(obj):
    sys.stdout.write(json.dumps(obj))
    sys.stdout.flush()

def cmd_write(d, files, total, writers, block, mode="buffered"):
    files, total, writers, block = int(files), int(total), int(writers), int(block)
    direct = mode == "direct"
    os.makedirs(d, exist_ok=True)
    sizes = [total // files + (1 if i < total % files else 0) for i in range(files)]
    names = [os.path.join(d, "shard-%05d.bin" % i) for i in range(files)]
    results = [None] * files
    errors = []
    lock = threading.Lock()
    todo = list(range(files))
    nthreads = max(1, min(writers, files))
    # random data made before the clock starts: only the writes are timed
    # direct: page-aligned buffers (mmap), as O_DIRECT requires; sizes are multiples of 4 KiB then
    bufs = [bytearray(os.urandom(block)) for _ in range(nthreads)] if not direct else []
    for _ in range(nthreads if direct else 0):
        m = mmap.mmap(-1, block)
        m.write(os.urandom(block))
        bufs.append(m)
    t0 = time.perf_counter()

    def worker(wid):
        buf = bufs[wid]
        while True:
            with lock:
                if not todo or errors:
                    return
                i = todo.pop(0)
            try:
                start = time.perf_counter()
                flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | (getattr(os, "O_DIRECT", 0) if direct else 0)
                fd = os.open(names[i], flags, 0o644)
                try:
                    left, n = sizes[i], 0
                    while left > 0:
                        # a distinct header per block, so dedup/compression cannot shrink the write
                        buf[0:16] = struct.pack("<QQ", i, n)
                        view = memoryview(buf)[:min(block, left)]
                        while view:
                            k = os.write(fd, view)
                            view = view[k:]
                        left -= min(block, left)
                        n += 1
                    f0 = time.perf_counter()
                    os.fsync(fd)
                    f1 = time.perf_counter()
                finally:
                    os.close(fd)
                results[i] = {"path": names[i], "bytes": sizes[i], "start_s": start - t0,
                              "end_s": f1 - t0, "fsync_s": f1 - f0}
            except OSError as exc:
                with lock:
                    errors.append("%s: %s" % (names[i], exc))

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(nthreads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        out({"ok": False, "error": errors[0], "errors": errors[:20]})
        return 3
    dfd = os.open(d, os.O_RDONLY)
    try:
        d0 = time.perf_counter()
        os.fsync(dfd)
        d1 = time.perf_counter()
    finally:
        os.close(dfd)
    out({"ok": True, "total_bytes": total, "files": files, "writers": len(threads), "block": block, "mode": mode,
         "total_s": d1 - t0, "dir_fsync_s": d1 - d0, "per_file": results})
    return 0

def cmd_drop_caches():
    if os.geteuid() != 0:
        out({"ok": True, "dropped": False, "reason": "not root (euid %d)" % os.geteuid()})
        return 0
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as fh:
            fh.write("3\n")
    except OSError as exc:
        out({"ok": True, "dropped": False, "reason": "cannot write /proc/sys/vm/drop_caches: %s" % exc})
        return 0
    out({"ok": True, "dropped": True, "reason": "sync; echo 3 > /proc/sys/vm/drop_caches"})
    return 0

def walk(paths):
    found = []
    for p in paths:
        if os.path.isfile(p):
            found.append(p)
            continue
        for root, dirs, files in os.walk(p):
            dirs.sort()
            for f in sorted(files):
                full = os.path.join(root, f)
                if os.path.isfile(full) and not os.path.islink(full):
                    found.append(full)
    return found

def cmd_read(mode, readers, block, *paths):
    readers, block = int(readers), int(block)
    files = walk(paths)
    if not files:
        out({"ok": False, "error": "no files under %s" % ", ".join(paths)})
        return 3
    sizes = {f: os.path.getsize(f) for f in files}
    order = sorted(files, key=lambda f: -sizes[f])
    lock = threading.Lock()
    results, errors, notes, aligned = [], [], [], []
    direct_flag = getattr(os, "O_DIRECT", 0)
    t0 = time.perf_counter()

    def read_one(path, buf):
        used_direct = False
        fd = None
        if mode == "direct" and direct_flag:
            try:
                fd = os.open(path, os.O_RDONLY | direct_flag)
                used_direct = True
            except OSError as exc:
                with lock:
                    notes.append("%s: O_DIRECT refused (%s); read buffered" % (path, exc))
        if fd is None:
            fd = os.open(path, os.O_RDONLY)
        start = time.perf_counter()
        total = 0
        try:
            while True:
                try:
                    n = os.readv(fd, [buf])
                except OSError as exc:
                    if used_direct and total == 0:
                        os.close(fd)
                        with lock:
                            notes.append("%s: O_DIRECT read failed (%s); read buffered" % (path, exc))
                        fd = os.open(path, os.O_RDONLY)
                        used_direct = False
                        continue
                    raise
                if n <= 0:
                    break
                total += n
        finally:
            os.close(fd)
        end = time.perf_counter()
        return {"path": path, "bytes": total, "start_s": start - t0, "end_s": end - t0, "direct": used_direct}

    def worker():
        # the emulator's buffer (harness.readbuffer): a 4 KiB-page mmap made a direct read's speed
        # depend on which pages the thread happened to get
        rb = ReadBuffer(block)
        buf = rb.view
        with lock:
            aligned.append(ctypes.addressof(ctypes.c_char.from_buffer(buf)) % HUGE_PAGE == 0)
        try:
            while True:
                with lock:
                    if not order or errors:
                        return
                    path = order.pop(0)
                try:
                    r = read_one(path, buf)
                    with lock:
                        results.append(r)
                except OSError as exc:
                    with lock:
                        errors.append("%s: %s" % (path, exc))
        finally:
            rb.close()

    threads = [threading.Thread(target=worker) for _ in range(max(1, min(readers, len(files))))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total_s = time.perf_counter() - t0
    if errors:
        out({"ok": False, "error": errors[0], "errors": errors[:20]})
        return 3
    total = sum(r["bytes"] for r in results)
    out({"ok": True, "mode": mode, "readers": len(threads), "files": len(results), "total_bytes": total,
         "expected_bytes": sum(sizes.values()), "total_s": total_s,
         "all_direct": all(r["direct"] for r in results), "buffers_on_huge_page": all(aligned),
         "notes": notes[:20],
         "per_file": sorted(results, key=lambda r: r["path"])})
    return 0

def main(argv):
    cmd = argv[0]
    if cmd == "write":
        return cmd_write(*argv[1:])
    if cmd == "drop-caches":
        return cmd_drop_caches()
    if cmd == "read":
        return cmd_read(*argv[1:])
    out({"ok": False, "error": "unknown command %r" % cmd})
    return 2

sys.exit(main(sys.argv[1:]))
"""

# The helper carries kvgate's one read buffer class as source (the node has no kvgate installed).
SCRIPT = _SCRIPT.replace("# READ_BUFFER\n", f"HUGE_PAGE = {HUGE_PAGE}\n\n\n{inspect.getsource(ReadBuffer)}\n", 1)

DEFAULT_BLOCK = 8 * 2**20  # a multiple of every O_DIRECT alignment


def run_helper(
    executor: Executor, python: str, args: Sequence[str], *, target: str | None, timeout: float | None = None
) -> Mapping[str, Any]:
    """Run one helper command on the node and return its JSON; a failure is a ProbeError carrying
    the command's output."""
    res = executor.run([python, "-c", SCRIPT, *args], check=False, timeout=timeout)
    try:
        data = json.loads(res.stdout) if res.stdout.strip() else None
    except json.JSONDecodeError:
        data = None
    if not isinstance(data, dict):
        raise ProbeError(
            f"the probe helper ({args[0]}) printed no result (exit {res.exit_code})",
            node=executor.node,
            target=target,
            detail=(res.stderr or res.stdout)[-2000:],
        )
    if not data.get("ok") or res.exit_code != 0:
        raise ProbeError(
            f"the probe helper ({args[0]}) failed: {data.get('error', 'unknown error')}",
            node=executor.node,
            target=target,
            detail=res.stderr[-2000:],
        )
    return data


def find_python(executor: Executor, python: str = "python3") -> str:
    """The node's Python interpreter (absolute path), or a ProbeError."""
    path = python if python.startswith("/") else executor.which(python)
    if not path:
        raise ProbeError(
            f"{python} is not installed on the node (the checkpoint and model-load probes run a "
            "stdlib-only helper with it)",
            node=executor.node,
        )
    return path

"""The emulated LMCache server's L2 capacity behaves as lmcache 0.5.6's fs_native adapter does
(harness/sim/l2evict.py names the sources): without an ``eviction`` block ``max_capacity_gb`` is
accounting only and files accumulate past it; with one, a background pass evicts 20% of the keys
once usage reaches 80% of the capacity, least recently used first and a request's last chunks
first, so its prefix stays usable. Run against a real ``kvgate sim lmcache-server`` process."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Optional

from harness.ports import free_port
from harness.sim.mpserver import MPClient
from tests.sim.simhelpers import REPO

CHUNK = 64 * 1024
GIB = 1024**3


def _keys(tag: str, n: int) -> list[bytes]:
    return [hashlib.sha256(f"{tag}{i}".encode()).digest() for i in range(n)]


@contextmanager
def _server(l2: Path, adapter_extra: dict[str, object]) -> Iterator[tuple[MPClient, int, subprocess.Popen[str]]]:
    port, http_port = free_port(), free_port()
    adapter = {"type": "fs_native", "base_path": str(l2), **adapter_extra}
    proc = subprocess.Popen(  # noqa: S603
        [sys.executable, "-m", "harness.sim.cli", "lmcache-server", "--port", str(port), "--http-port",
         str(http_port), "--chunk-size", "16", "--l1-size-gb", "1", "--l2-adapter", json.dumps(adapter)],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        client = MPClient("127.0.0.1", port, timeout=30)
        client.wait_info(30)
        yield client, http_port, proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        assert proc.stderr is not None
        proc.stderr.close()


def _metric(http_port: int, name: str) -> Optional[float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=10) as resp:  # noqa: S310
        for line in resp.read().decode().splitlines():
            if line.startswith(name) and line[len(name)] in " {":
                return float(line.rsplit(" ", 1)[1])
    return None


def _wait_metric(http_port: int, name: str, value: float, timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while _metric(http_port, name) != value:
        assert time.monotonic() < end, f"{name} never reached {value} (now {_metric(http_port, name)})"
        time.sleep(0.05)


def _store(client: MPClient, http_port: int, keys: list[bytes], done: int) -> None:
    client.call({"op": "store", "digests": [k.hex() for k in keys], "chunk_bytes": CHUNK})
    _wait_metric(http_port, "lmcache_mp_l2_store_completed_objects_chunks_total", done)


def _files(l2: Path, keys: list[bytes]) -> list[bool]:
    return [(l2 / (k.hex() + ".kvchunk")).exists() for k in keys]


def test_capacity_without_an_eviction_block_is_accounting_only(tmp_path: Path) -> None:
    l2 = tmp_path / "l2"
    keys = _keys("a", 12)
    with _server(l2, {"max_capacity_gb": 10 * CHUNK / GIB}) as (client, http_port, _):
        _store(client, http_port, keys, 12)
        # LMCache: "files accumulate past the declared capacity"; a store is never refused for it
        assert _files(l2, keys) == [True] * 12
        assert _metric(http_port, 'lmcache_mp_l2_usage_bytes{l2_name="fs_native"}') == 12 * CHUNK
        assert _metric(http_port, "lmcache_mp_l2_evicted_objects_chunks_total") is None


def test_eviction_block_evicts_at_the_watermark_least_recent_and_last_chunks_first(tmp_path: Path) -> None:
    l2 = tmp_path / "l2"
    a, b, c = _keys("a", 8), _keys("b", 6), _keys("c", 3)
    with _server(l2, {"max_capacity_gb": 20 * CHUNK / GIB, "eviction": {"eviction_policy": "LRU"}}) as (
            client, http_port, _):
        _store(client, http_port, a, 8)
        _store(client, http_port, b, 14)  # 70% of the capacity: below the 0.8 watermark, nothing goes
        # request a is read back from L2 (L1 emptied first), which makes it more recently used than b
        urllib.request.urlopen(urllib.request.Request(  # noqa: S310
            f"http://127.0.0.1:{http_port}/cache/clear", data=b'{"tier": "l1", "force": true}',
            method="POST"), timeout=10).close()
        served = client.call({"op": "lookup", "digests": [k.hex() for k in a], "chunk_bytes": CHUNK})["served"]
        assert served == ["l2"] * 8
        assert _metric(http_port, "lmcache_mp_l2_evicted_objects_chunks_total") is None
        _store(client, http_port, c, 17)  # 85%: the next pass evicts int(17 x 0.2) = 3 keys, leaving 70%
        _wait_metric(http_port, "lmcache_mp_l2_evicted_objects_chunks_total", 3)
        assert _metric(http_port, 'lmcache_mp_l2_usage_bytes{l2_name="fs_native"}') == 14 * CHUNK
        assert _files(l2, a) == [True] * 8 and _files(l2, c) == [True] * 3
        assert _files(l2, b) == [True] * 3 + [False] * 3  # b's prefix kept, its last chunks gone
        time.sleep(1.5)  # a further pass (one a second) finds 70% < 80%: nothing more goes
        assert _metric(http_port, "lmcache_mp_l2_evicted_objects_chunks_total") == 3

"""The emulator's retrieval timing and its memory-serving fault mode (issue 52 item 5).

``lmcache:time_to_retrieve`` must be LMCache's metric: name, type, unit (seconds per retrieve),
help text and buckets as lmcache 0.5.6's ``observability.py`` creates it (read from the installed
LMCache when the real-engine environment has it, else the copy below)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from harness.engines.prometheus import MetricsSnapshot
from harness.sim.cli import MEMORY_RESTORE_ENV, _memory_restore_bps, _UsageError
from harness.sim.kvstore import KVStore, StoreSettings, chunk_hashes
from harness.sim.lmcache_config import LMCacheConfig
from harness.sim.metrics import RETRIEVE_TIME_BUCKETS, SimMetrics

LMCACHE_0_5_6 = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)
REAL = Path.home() / ".cache/kvgate/real-engine/venv/lib/python3.11/site-packages/lmcache/observability.py"


def test_time_to_retrieve_is_lmcaches_histogram() -> None:
    m = SimMetrics("tiny")
    with m.lock:
        m.lmc_time_to_retrieve.observe(m.lmc_labels, 0.03)
    snap = MetricsSnapshot.from_text(m.render())
    fam = snap.family("lmcache:time_to_retrieve")
    assert fam is not None and fam.type == "histogram" and fam.help == "Time to retrieve from lmcache (seconds)"
    hist = snap.histogram("lmcache:time_to_retrieve")
    assert hist is not None and hist.count == 1 and hist.sum == pytest.approx(0.03)
    assert RETRIEVE_TIME_BUCKETS == LMCACHE_0_5_6
    if REAL.exists():  # the installed LMCache's own buckets, where the real-engine venv is built
        text = REAL.read_text()
        block = text[text.index("time_to_retrieve_buckets = ["):]
        real = tuple(float(x) for x in re.findall(r"[\d.]+", block[:block.index("]")]))
        assert real == RETRIEVE_TIME_BUCKETS
        assert 'name="lmcache:time_to_retrieve"' in text


@pytest.mark.parametrize("raw", ["fast", "-1", "inf", "nan"])
def test_a_bad_memory_restore_rate_is_a_usage_error_naming_the_variable(raw: str) -> None:
    with pytest.raises(_UsageError, match=MEMORY_RESTORE_ENV):
        _memory_restore_bps({MEMORY_RESTORE_ENV: raw})


def test_the_fault_mode_is_off_unless_set() -> None:
    assert _memory_restore_bps({}) == 0.0
    assert _memory_restore_bps({MEMORY_RESTORE_ENV: "1.5e9"}) == 1.5e9


def test_the_fault_serves_disk_hits_from_memory_timed_exactly_at_its_rate(tmp_path: Path) -> None:
    metrics = SimMetrics("tiny")
    cfg = LMCacheConfig(chunk_size=16, local_disk=str(tmp_path), max_local_disk_size=1.0)
    store = KVStore(StoreSettings(model="tiny", prefill_tokens_per_s=1e9, hbm_tokens=0, kv_bytes_per_token=4096,
                                  kv_scale=1.0, prefix_caching=False, connector=True, lmcache=cfg), metrics)
    prompt = list(range(4 * 16 + 1))
    try:
        store.store_now(chunk_hashes("tiny", prompt, 16))
        honest = asyncio.run(store.prefill(prompt))
        before = MetricsSnapshot.from_text(metrics.render())
        store.s.memory_restore_bps = 1e8
        res = asyncio.run(store.prefill(prompt))
        after = MetricsSnapshot.from_text(metrics.render())
    finally:
        store.close()
    read = "kvgate_sim:tier_read_bytes"
    assert honest.tiers == {"local_disk": 4} and (before.value(read) or 0) >= 4 * store.s.chunk_bytes
    # reported as the disk tier's hits, never read, and timed as 4 chunks at 1e8 B/s (not the
    # sleep's wake-up lag: a loaded machine would make the fault slower than it says)
    assert res.tiers == {"local_disk": 4} and res.external_hit_tokens == 4 * 16
    assert after.value(read) == before.value(read)
    assert res.read_seconds == pytest.approx(4 * store.s.chunk_bytes / 1e8, rel=1e-9)
    got, had = after.histogram("lmcache:time_to_retrieve"), before.histogram("lmcache:time_to_retrieve")
    assert got is not None and had is not None and got.count == had.count + 1
    assert got.sum - had.sum == pytest.approx(res.read_seconds, rel=1e-9)

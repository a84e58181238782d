"""The emulator's retrieval timing and its memory-serving fault mode (issue 52 item 5).

``lmcache:time_to_retrieve`` must be LMCache's metric: name, type, unit (seconds per retrieve),
help text and buckets as lmcache 0.5.6's ``observability.py`` creates it (read from the installed
LMCache when the real-engine environment has it, else the copy below)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.engines.prometheus import MetricsSnapshot
from harness.sim.cli import MEMORY_RESTORE_ENV, _memory_restore_bps, _UsageError
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

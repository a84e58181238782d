"""The one list of platforms. Adding a platform: a module beside this one exporting ``PLATFORM``,
one line in ``_PLATFORMS`` below, its facts parser in ``harness/facts/parsers/`` with captured output
in ``tests/data/facts/`` (see ``docs/ARCHITECTURE.md``, "Where to add things")."""

from __future__ import annotations

from harness.errors import InputError
from harness.platforms import ascend910b, cpu, cuda, mi308x
from harness.platforms.base import Platform

_PLATFORMS: tuple[Platform, ...] = (mi308x.PLATFORM, ascend910b.PLATFORM, cuda.PLATFORM, cpu.PLATFORM)
PLATFORMS: dict[str, Platform] = {p.name: p for p in _PLATFORMS}


def platform_names() -> tuple[str, ...]:
    return tuple(PLATFORMS)


def get_platform(name: str) -> Platform:
    try:
        return PLATFORMS[name]
    except KeyError:
        raise InputError(f"unknown platform {name!r}; known: {', '.join(PLATFORMS)}") from None


def register_platform(platform: Platform) -> None:
    """Add a platform at run time (tests, plug-ins); a name is registered once."""
    if platform.name in PLATFORMS:
        raise ValueError(f"platform {platform.name!r} is already registered")
    PLATFORMS[platform.name] = platform


def unregister_platform(name: str) -> None:
    PLATFORMS.pop(name, None)

"""The engine registry: ``get_engine(kind)``; an unknown kind lists the known ones."""

from __future__ import annotations

from typing import Callable

from harness.engines.base import Engine
from harness.errors import InputError


def _vllm() -> Engine:
    from harness.engines.vllm import VllmEngine

    return VllmEngine()


def _sim() -> Engine:
    from harness.engines.sim import SimEngine

    return SimEngine()


ENGINES: dict[str, Callable[[], Engine]] = {"vllm": _vllm, "sim": _sim}


def engine_kinds() -> list[str]:
    return sorted(ENGINES)


def get_engine(kind: str) -> Engine:
    try:
        factory = ENGINES[kind]
    except KeyError:
        raise InputError(f"unknown engine kind {kind!r}; known: {', '.join(engine_kinds())}") from None
    return factory()

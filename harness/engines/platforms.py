"""Which accelerators an instance gets, and the environment that pins it to them, per platform.

- mi308x (ROCm): ``HIP_VISIBLE_DEVICES``; vLLM refuses to start when ``CUDA_VISIBLE_DEVICES`` is
  also set and differs, so both are set to the same list.
- ascend910b (CANN): ``ASCEND_RT_VISIBLE_DEVICES``.
- cuda: ``CUDA_VISIBLE_DEVICES``.
- cpu: nothing to pin.
"""

from __future__ import annotations

from typing import Optional

from harness.errors import InputError

DEVICE_VARS: dict[str, tuple[str, ...]] = {
    "mi308x": ("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"),
    "ascend910b": ("ASCEND_RT_VISIBLE_DEVICES",),
    "cuda": ("CUDA_VISIBLE_DEVICES",),
    "cpu": (),
}
MANAGED_VARS = frozenset(v for names in DEVICE_VARS.values() for v in names)


def devices_for(
    platform: str, instance_index: int, devices_per_instance: int, device_count: Optional[int], *, node: str
) -> tuple[int, ...]:
    """Instance ``i`` gets devices ``[i*n, (i+1)*n)`` (TP4x2: 0-3 and 4-7)."""
    if platform not in DEVICE_VARS:
        raise InputError(f"unknown platform {platform!r}; known: {', '.join(DEVICE_VARS)}")
    if platform == "cpu":
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
    return {var: value for var in DEVICE_VARS.get(platform, ())} if devices else {}

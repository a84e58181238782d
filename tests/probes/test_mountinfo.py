"""The mount table as this kernel (6.18) writes it: lines captured from /proc/self/mountinfo here,
octal escapes and an overlay's layer list (a ':' or ',' inside a layer's path kept backslash-escaped
as the mounter wrote it) included."""

from __future__ import annotations

from harness.probes.mountinfo import find_mount, overlay_layers, parse_mountinfo

CAPTURED = (
    "25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24683784k\n"
    "30 25 0:27 / /dev/shm rw,relatime - tmpfs tmpfs rw,size=24683784k\n"
    "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard\n"
    "48 27 0:40 / /tmp/t/m rw,relatime - overlay overlay rw,lowerdir=/tmp/t/lo\\134:w:/tmp/t/l\\134\\0542,"
    "upperdir=/tmp/t/up,workdir=/tmp/t/wk,uuid=on\n"
    "49 27 0:41 / /tmp/t/m\\040x rw,relatime - overlay overlay rw,lowerdir=/a/low\\0402::/a/data\n"
    "garbage line\n"
)


def test_devices_mount_points_and_types() -> None:
    mounts = parse_mountinfo(CAPTURED)
    assert len(mounts) == 5
    shm = find_mount(mounts, (0, 27))
    assert shm is not None and (shm.fstype, shm.mountpoint) == ("tmpfs", "/dev/shm")
    root = find_mount(mounts, (254, 0))
    assert root is not None and root.source == "/dev/vda" and root.options == ("rw", "discard")
    assert find_mount(mounts, (0, 99)) is None  # unmounted (umount -l) or another namespace's
    spaced = find_mount(mounts, (0, 41))
    assert spaced is not None and spaced.mountpoint == "/tmp/t/m x"


def test_overlay_layers_with_escaped_colon_comma_and_data_only_layers() -> None:
    mounts = parse_mountinfo(CAPTURED)
    first, second = find_mount(mounts, (0, 40)), find_mount(mounts, (0, 41))
    assert first is not None and second is not None
    layers = overlay_layers(first)
    assert layers.lower == ("/tmp/t/lo:w", "/tmp/t/l,2")
    assert (layers.upper, layers.work) == ("/tmp/t/up", "/tmp/t/wk")
    assert overlay_layers(second).lower == ("/a/low 2", "/a/data") and overlay_layers(second).upper is None

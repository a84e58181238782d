"""Network: ``ethtool IFACE`` link speed (with ``/sys/class/net/IFACE/speed`` as fallback),
``ibv_devinfo`` and the sysfs GID types of RDMA ports (``grep -H`` over
``/sys/class/infiniband/*/ports/*/gid_attrs/{types,ndevs}/*``)."""

from __future__ import annotations

import re

from harness.facts.model import LinkInfo, RdmaPort
from harness.facts.parsers.common import FactsParseError

_SPEED = re.compile(r"^\s*Speed:\s*(\S+)", re.MULTILINE)
_LINK = re.compile(r"^\s*Link detected:\s*(yes|no)", re.MULTILINE)
_UNIT = {"Mb/s": 10**6, "Gb/s": 10**9, "Kb/s": 10**3}

GID_SCRIPT = ("grep -Hs . /sys/class/infiniband/*/ports/*/gid_attrs/types/* "
              "/sys/class/infiniband/*/ports/*/gid_attrs/ndevs/* || true")


def parse_ethtool(interface: str, text: str) -> LinkInfo:
    m = _SPEED.search(text)
    if m is None and "Settings for" not in text:
        raise FactsParseError("ethtool", f"{interface}: no 'Settings for' block")
    speed: int | None = None
    if m:
        sm = re.fullmatch(r"(\d+)(Mb/s|Gb/s|Kb/s)", m.group(1))
        if sm:
            speed = int(sm.group(1)) * _UNIT[sm.group(2)]
    lm = _LINK.search(text)
    detected = (lm.group(1) == "yes") if lm else None
    return LinkInfo(interface=interface, speed_bps=speed, link_detected=detected)


def parse_sysfs_speed(interface: str, text: str) -> LinkInfo:
    """``/sys/class/net/IFACE/speed``: Mb/s, or -1 / an error when the link is down."""
    value = text.strip()
    try:
        mbps = int(value)
    except ValueError:
        return LinkInfo(interface=interface, speed_bps=None)
    return LinkInfo(interface=interface, speed_bps=mbps * 10**6 if mbps > 0 else None)


def parse_ibv_devinfo(text: str) -> list[RdmaPort]:
    if "No IB devices found" in text:
        return []
    out: list[RdmaPort] = []
    device: str | None = None
    current: RdmaPort | None = None
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("hca_id:"):
            device = s.split(":", 1)[1].strip()
            current = None
        elif s.startswith("port:") and device is not None:
            current = RdmaPort(device=device, port=int(s.split(":", 1)[1].strip()))
            out.append(current)
        elif current is not None and s.startswith("state:"):
            current.state = s.split(":", 1)[1].strip()
        elif current is not None and s.startswith("link_layer:"):
            current.link_layer = s.split(":", 1)[1].strip()
    if text.strip() and device is None:
        raise FactsParseError("ibv_devinfo", "no 'hca_id:' in the output")
    return out


_GID = re.compile(r"^/sys/class/infiniband/([^/]+)/ports/(\d+)/gid_attrs/(types|ndevs)/(\d+):(.*)$")


def apply_gid_attrs(ports: list[RdmaPort], text: str) -> list[RdmaPort]:
    """Add the GID types and netdevs from the ``grep -H`` lines to ``ports`` (creating ports the
    sysfs shows but ibv_devinfo did not)."""
    by_key = {(p.device, p.port): p for p in ports}
    for line in text.splitlines():
        m = _GID.match(line.strip())
        if not m:
            continue
        dev, port, what, _, value = m.groups()
        value = value.strip()
        if not value:
            continue
        p = by_key.get((dev, int(port)))
        if p is None:
            p = by_key[(dev, int(port))] = RdmaPort(device=dev, port=int(port))
            ports.append(p)
        target = p.gid_types if what == "types" else p.netdevs
        if value not in target:
            target.append(value)
    return ports

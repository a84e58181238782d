"""Storage: ``nvme list -o json`` (both nvme-cli shapes), ``mdadm --detail --export``,
``/proc/mounts`` and ``df -B1 --output=source,fstype,size,used,avail,target``."""

from __future__ import annotations

from typing import Any

from harness.facts.model import FsUsage, Mount, NvmeDrive, RaidArray
from harness.facts.parsers.common import FactsParseError, load_json_after_noise

DF_FIELDS = ("source", "fstype", "size", "used", "avail", "target")
DF_ARGV_PREFIX = ("df", "-B1", f"--output={','.join(DF_FIELDS)}")


def _num(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v if v >= 0 else None  # nvme-cli 2.5 printed 32-bit overflowed negatives (issue 2028)
    return None


def parse_nvme_list(text: str) -> list[NvmeDrive]:
    """nvme-cli 1.x/2.0-2.10: ``{"Devices": [{"DevicePath", "ModelNumber", ...}]}``;
    nvme-cli 2.11+: ``{"Devices": [{"HostNQN", "Subsystems": [{"Controllers": [{"Namespaces"}]}]}]}``."""
    if not text.strip():
        return []  # nvme-cli prints nothing at all when there is no NVMe device
    doc = load_json_after_noise("nvme", text)
    if not isinstance(doc, dict) or not isinstance(doc.get("Devices", []), list):
        raise FactsParseError("nvme", "expected an object with a 'Devices' list")
    out: list[NvmeDrive] = []
    for dev in doc.get("Devices", []):
        if not isinstance(dev, dict):
            raise FactsParseError("nvme", "a 'Devices' entry is not an object")
        if "Subsystems" in dev:
            for sub in dev.get("Subsystems") or []:
                for ctrl in sub.get("Controllers") or []:
                    for ns in ctrl.get("Namespaces") or []:
                        out.append(NvmeDrive(
                            device="/dev/" + str(ns.get("NameSpace")), controller=ctrl.get("Controller"),
                            model=str(ctrl.get("ModelNumber", "")).strip(),
                            serial=str(ctrl.get("SerialNumber", "")).strip(),
                            firmware=str(ctrl.get("Firmware", "")).strip(),
                            size_bytes=_num(ns.get("PhysicalSize")), transport=ctrl.get("Transport")))
                ctrls = sub.get("Controllers") or [{}]
                # multipath (NVMe-oF) namespaces hang off the subsystem
                for ns in sub.get("Namespaces") or []:
                    out.append(NvmeDrive(
                        device="/dev/" + str(ns.get("NameSpace")), controller=ctrls[0].get("Controller"),
                        model=str(ctrls[0].get("ModelNumber", "")).strip(),
                        serial=str(ctrls[0].get("SerialNumber", "")).strip(),
                        firmware=str(ctrls[0].get("Firmware", "")).strip(),
                        size_bytes=_num(ns.get("PhysicalSize")), transport=ctrls[0].get("Transport")))
        elif "DevicePath" in dev:
            out.append(NvmeDrive(
                device=str(dev["DevicePath"]), model=str(dev.get("ModelNumber", "")).strip(),
                serial=str(dev.get("SerialNumber", "")).strip(),
                firmware=str(dev.get("Firmware", "")).strip(),
                size_bytes=_num(dev.get("PhysicalSize"))))
        else:
            raise FactsParseError("nvme", "a device has neither 'DevicePath' nor 'Subsystems'")
    return out


def parse_mdadm_export(device: str, text: str) -> RaidArray:
    kv: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep:
            kv[key] = value
    if "MD_LEVEL" not in kv:
        raise FactsParseError("mdadm", f"{device}: no MD_LEVEL in the --export output")
    roles: list[tuple[int, str]] = []
    for key, value in kv.items():
        if key.startswith("MD_DEVICE_") and key.endswith("_DEV"):
            role_key = key[: -len("_DEV")] + "_ROLE"
            role = kv.get(role_key, "")
            roles.append((int(role) if role.isdigit() else 10**6, value))
    members = [dev for _, dev in sorted(roles)]
    n = kv.get("MD_DEVICES", "")
    return RaidArray(device=device, level=kv["MD_LEVEL"], n_devices=int(n) if n.isdigit() else None,
                     members=members)


def _unescape_mount(field: str) -> str:
    # /proc/mounts escapes space, tab, newline and backslash as octal (\040 ...)
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 3 < len(field) + 0 and field[i + 1:i + 4].isdigit():
            out.append(chr(int(field[i + 1:i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def parse_proc_mounts(text: str) -> list[Mount]:
    out: list[Mount] = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) < 4:
            raise FactsParseError("/proc/mounts", f"line {n}: expected 'source target fstype options ...'")
        out.append(Mount(source=_unescape_mount(parts[0]), target=_unescape_mount(parts[1]), fstype=parts[2],
                         options=parts[3].split(",")))
    return out


def mount_for(path: str, mounts: list[Mount]) -> Mount | None:
    """The mount holding ``path``: the longest mount point that is a prefix of it (last one wins
    when the same point is mounted twice, as the kernel shows the top one last)."""
    best: Mount | None = None
    clean = path.rstrip("/") or "/"
    for m in mounts:
        t = m.target.rstrip("/") or "/"
        if clean == t or clean.startswith(t + "/") or t == "/":
            if best is None or len(t) >= len(best.target.rstrip("/") or "/"):
                best = m
    return best


def parse_df(text: str) -> list[FsUsage]:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        raise FactsParseError("df", "no output")
    head = lines[0].split()
    if not head or head[0].lower() not in ("filesystem", "source"):
        raise FactsParseError("df", f"unexpected header {lines[0]!r}")
    out: list[FsUsage] = []
    for n, line in enumerate(lines[1:], 2):
        parts = line.split(None, 5)
        if len(parts) != 6:
            raise FactsParseError("df", f"line {n}: expected {len(DF_FIELDS)} columns: {line!r}")
        source, fstype, size, used, avail, target = parts
        try:
            out.append(FsUsage(source=source, fstype=fstype, size_bytes=int(size), used_bytes=int(used),
                               avail_bytes=int(avail), target=target))
        except ValueError:
            raise FactsParseError("df",
                                  f"line {n}: sizes are not byte counts (run with -B1): {line!r}") from None
    return out


LSBLK_MODELS_ARGV_PREFIX = ("lsblk", "--inverse", "--json", "--output", "NAME,TYPE,MODEL")


def parse_lsblk_models(text: str) -> list[str]:
    """The distinct model names in ``lsblk --inverse --json -o NAME,TYPE,MODEL DEV``: the device and
    every device it is built on (a partition's disk, a RAID's or a device mapper's members),
    sorted; [] when none reports a model (a virtual disk)."""
    doc = load_json_after_noise("lsblk", text)
    devices = doc.get("blockdevices") if isinstance(doc, dict) else None
    if not isinstance(devices, list):
        raise FactsParseError("lsblk", "no 'blockdevices' list")
    models: set[str] = set()
    stack: list[Any] = list(devices)
    while stack:
        dev = stack.pop()
        if not isinstance(dev, dict):
            raise FactsParseError("lsblk", "a block device entry is not an object")
        model = dev.get("model")
        if isinstance(model, str) and model.strip():
            models.add(" ".join(model.split()))
        stack.extend(dev.get("children") or [])
    return sorted(models)

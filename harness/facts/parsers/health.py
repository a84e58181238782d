"""Node health during a soak: kernel log lines (``dmesg``, ``journalctl -k -o short-iso``),
``nvme smart-log -o json`` (nvme-cli 1.x and 2.x shapes), ``/proc/mdstat`` and the accelerators'
own fault counters (``amd-smi metric --ecc --json``: ECC error totals per GPU; ``npu-smi info``:
each chip's Health column). Pure functions of text; the node agent records the raw text and the
G4 pipeline classifies it here.

Kernel lines are classified by kind: ``storage`` (NVMe timeouts, aborts, resets and controller
failures, block-layer and buffer I/O errors, md member failures, filesystem errors on a block
device), ``network`` (mlx5/RoCE link down, NIC health or firmware faults, NETDEV watchdog) and
``accelerator`` (NVIDIA Xid, amdgpu resets and RAS errors, Ascend/davinci faults). A line that
matches no pattern is not a fault: benign messages of the same drivers (queue set-up, mounts,
resync done, ``Link up``) are listed in the tests as must-not-match.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Optional

from harness.facts.parsers.amd import amdsmi_gpus
from harness.facts.parsers.ascend import parse_npusmi_info
from harness.facts.parsers.common import FactsParseError, is_na, load_json_after_noise

_STORAGE = [
    r"\bnvme\d+: I/O .*\btimeout\b",
    r"\bnvme\d+: I/O timeout\b",
    r"\bnvme\d+: .*\breset controller\b",
    r"\bnvme\d+: controller is down\b",
    r"\bnvme\d+: Device not ready\b",
    r"\bnvme\d+: Disabling device\b",
    r"\bnvme\d+: Removing after probe failure\b",
    r"\bnvme\d+: Abort status\b",
    r"\bnvme\d+: .*\bcritical medium error\b",
    r"\bI/O error, dev \S+",  # blk_update_request (<= 5.x) and the 6.x form
    r"\bBuffer I/O error on dev\b",
    r"\bcritical medium error, dev\b",
    r"\bprotection error, dev\b",
    r"\bno available path - failing I/O\b",
    r"\bmd/raid\w*:\s*md\w+: Disk failure on\b",
    r"\bmd/raid\w*md\w+: Disk failure on\b",  # raid0's message has no colon between the two
    r"\bmd: super_written gets error\b",
    r"\b(EXT4-fs|XFS|BTRFS)\b.*\b(error|corruption|I/O error)\b",
    r"\bRemounting filesystem read-only\b",
]
_NETWORK = [
    r"\bmlx5_core\b.*\bLink down\b",
    r"\bmlx5_core\b.*\bhealth compromised\b",
    r"\bmlx5_core\b.*\b(firmware internal error|cmd_work_handler.*failed|FW fatal)\b",
    r"\bNETDEV WATCHDOG\b",
    r"\b(ib|rdma|roce|bnxt_re|irdma)\w*\b.*\b(port .* (down|error)|link down)\b",
]
_ACCELERATOR = [
    r"\bNVRM: Xid\b",
    r"\bamdgpu\b.*\b(GPU reset begin|ring \S+ timeout|RAS|uncorrectable|ECC error)\b",
    r"\b(davinci|devdrv|ascend)\w*\b.*\b(error|fault|heartbeat lost)\b",
]
_KINDS = [("storage", [re.compile(p, re.IGNORECASE) for p in _STORAGE]),
          ("network", [re.compile(p, re.IGNORECASE) for p in _NETWORK]),
          ("accelerator", [re.compile(p, re.IGNORECASE) for p in _ACCELERATOR])]
# Lines that look like a fault to the patterns above but are not.
_BENIGN = [re.compile(p, re.IGNORECASE) for p in (r"\bLink up\b", r"\bresync done\b", r"\bEnding clean mount\b")]


@dataclass(frozen=True)
class KernelFault:
    kind: str  # storage | network | accelerator
    line: str


def classify_kernel_line(line: str) -> Optional[str]:
    """The fault kind of one kernel log line, or None when it is not a fault."""
    text = line.strip()
    if not text or any(b.search(text) for b in _BENIGN):
        return None
    for kind, patterns in _KINDS:
        if any(p.search(text) for p in patterns):
            return kind
    return None


def kernel_faults(lines: list[str] | str) -> list[KernelFault]:
    """Every fault line of a kernel log (``dmesg`` or ``journalctl -k`` output), in order."""
    items = lines.splitlines() if isinstance(lines, str) else lines
    out: list[KernelFault] = []
    for line in items:
        kind = classify_kernel_line(line)
        if kind is not None:
            out.append(KernelFault(kind, line.rstrip("\n")))
    return out


@dataclass(frozen=True)
class SmartLog:
    media_errors: int
    critical_warning: int
    temperature_c: Optional[float]
    num_err_log_entries: Optional[int]
    percent_used: Optional[int]


def _int(doc: dict[str, Any], key: str) -> Optional[int]:
    v = doc.get(key)
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str) and v.strip().replace(",", "").isdigit():
        return int(v.strip().replace(",", ""))
    return None


def parse_smart_log(text: str) -> SmartLog:
    """``nvme smart-log DEV -o json``: 1.x has ``critical_warning`` as an integer, 2.x as an object
    with ``value``; ``temperature`` is in kelvin in both."""
    doc = load_json_after_noise("nvme smart-log", text)
    if not isinstance(doc, dict):
        raise FactsParseError("nvme smart-log", "expected a JSON object")
    media = _int(doc, "media_errors")
    if media is None:
        raise FactsParseError("nvme smart-log", "no integer 'media_errors' field")
    cw = doc.get("critical_warning")
    crit = _int(cw, "value") if isinstance(cw, dict) else _int(doc, "critical_warning")
    if crit is None:
        raise FactsParseError("nvme smart-log", "no 'critical_warning' value")
    kelvin = _int(doc, "temperature")
    return SmartLog(media_errors=media, critical_warning=crit,
                    temperature_c=round(kelvin - 273.15, 1) if kelvin is not None and kelvin > 0 else None,
                    num_err_log_entries=_int(doc, "num_err_log_entries"), percent_used=_int(doc, "percent_used"))


@dataclass
class MdArray:
    name: str
    state: str  # active | inactive
    level: Optional[str]
    members: list[str] = field(default_factory=list)
    failed_members: list[str] = field(default_factory=list)
    expected: Optional[int] = None  # [n/m]: n
    working: Optional[int] = None  # [n/m]: m
    status: Optional[str] = None  # [UU_]
    action: Optional[str] = None  # recovery | resync | reshape | check | repair (in progress or DELAYED)

    @property
    def degraded(self) -> bool:
        """A member failed or missing (``(F)``, ``[2/1]``, ``_`` in ``[U_]``) or the array is inactive."""
        if self.state == "inactive" or self.failed_members:
            return True
        if self.expected is not None and self.working is not None and self.working < self.expected:
            return True
        return self.status is not None and "_" in self.status


_MD_HEAD = re.compile(r"^(md\w+)\s*:\s*(active|inactive)\s*(?:\([^)]*\)\s*)?(.*)$")
_MEMBER = re.compile(r"^([\w.-]+)\[\d+\](\([A-Z]\))?$")
_COUNTS = re.compile(r"\[(\d+)/(\d+)\]\s*\[([U_]+)\]")
_ACTION = re.compile(r"\b(recovery|resync|reshape|check|repair)\s*=")


def parse_mdstat(text: str) -> list[MdArray]:
    """``/proc/mdstat``: every md array with its members, failed members, counts and any rebuild."""
    out: list[MdArray] = []
    cur: Optional[MdArray] = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("Personalities", "unused devices", "read_ahead")):
            continue
        m = _MD_HEAD.match(line)
        if m:
            name, state, rest = m.groups()
            words = rest.split()
            level = words[0] if words and not _MEMBER.match(words[0]) else None
            cur = MdArray(name=name, state=state, level=level)
            for w in words[1 if level else 0:]:
                mm = _MEMBER.match(w)
                if mm:
                    cur.members.append(mm.group(1))
                    if mm.group(2) == "(F)":
                        cur.failed_members.append(mm.group(1))
            out.append(cur)
            continue
        if cur is None:
            continue
        c = _COUNTS.search(line)
        if c:
            cur.expected, cur.working, cur.status = int(c.group(1)), int(c.group(2)), c.group(3)
        a = _ACTION.search(line) or (re.search(r"\b(resync|recovery)=DELAYED\b", line))
        if a:
            cur.action = a.group(1)
    return out


# -- accelerator fault counters ----------------------------------------------------------------

# ``amd-smi metric --ecc --json`` (amd-smi 24.x: a list of GPUs; 26.x: ``{"gpu_data": [...]}``),
# per GPU ``"ecc": {"total_correctable_count", "total_uncorrectable_count", "total_deferred_count",
# "cache_correctable_count", "cache_uncorrectable_count"}``; a counter the GPU does not support is
# the string ``"N/A"``. Uncorrectable and deferred errors are faults (deferred: an uncorrectable
# error whose handling the hardware postponed); correctable ones are recorded, not counted.
ECC_FAULT_KEYS = ("total_uncorrectable_count", "total_deferred_count", "cache_uncorrectable_count")


@dataclass(frozen=True)
class GpuEcc:
    gpu: int
    correctable: Optional[int]
    faults: dict[str, int]  # the ECC_FAULT_KEYS the GPU reports (N/A ones left out)


def parse_amdsmi_ecc(text: str) -> list[GpuEcc]:
    """Every GPU's ECC totals from ``amd-smi metric --ecc --json`` (both root shapes). A GPU that
    reports no fault counter at all (every one N/A) is an error: it could never show a fault."""
    out: list[GpuEcc] = []
    for i, gpu in enumerate(amdsmi_gpus(text)):
        ecc = gpu.get("ecc")
        if not isinstance(ecc, dict):
            raise FactsParseError("amd-smi", f"GPU entry {i} has no 'ecc' object (was --ecc given?)")
        idx = _int(gpu, "gpu")
        faults = {k: v for k in ECC_FAULT_KEYS if not is_na(ecc.get(k)) and (v := _int(ecc, k)) is not None}
        if not faults:
            raise FactsParseError("amd-smi", f"GPU {idx if idx is not None else i}: every uncorrectable/deferred "
                                  "ECC counter is N/A")
        corr = None if is_na(ecc.get("total_correctable_count")) else _int(ecc, "total_correctable_count")
        out.append(GpuEcc(gpu=idx if idx is not None else i, correctable=corr, faults=faults))
    return out


def ecc_increases(before: list[GpuEcc], after: list[GpuEcc]) -> list[str]:
    """One line per GPU and counter that grew between two samples (a GPU that vanished is one too)."""
    now = {g.gpu: g for g in after}
    lines: list[str] = []
    for g in before:
        cur = now.get(g.gpu)
        if cur is None:
            lines.append(f"amd-smi: GPU {g.gpu} no longer reported")
            continue
        for key, old in g.faults.items():
            new = cur.faults.get(key)
            if new is not None and new > old:
                lines.append(f"amd-smi: GPU {g.gpu} {key} {old} -> {new}")
    return lines


_NPU_OK = "ok"


def npu_unhealthy(text: str) -> list[str]:
    """One line per NPU chip whose ``npu-smi info`` Health is not ``OK`` (Warning, Alarm,
    Critical...); an empty list when every chip is OK. No chip in the table is an error."""
    devs = parse_npusmi_info(text)
    if not devs:
        raise FactsParseError("npu-smi", "no NPU in the 'npu-smi info' table")
    return [f"npu-smi: NPU {d.card} chip {d.chip} ({d.model}) health {d.health}" for d in devs
            if (d.health or "").strip().lower() != _NPU_OK]

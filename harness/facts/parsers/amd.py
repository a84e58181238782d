"""AMD accelerators: ``amd-smi static --json`` and, as a fallback, ``rocm-smi --showproductname
--showmeminfo vram --showbus --json``.

amd-smi prints either a top-level list of GPUs (amd-smi 24.x/25.x) or ``{"gpu_data": [...]}``
(amd-smi 26). Sizes are ``{"value": N, "unit": "MB"}`` (MiB in fact) or, in older releases, a
string such as ``"196592 MB"``. Newer releases put a generic string in ``asic.market_name``;
``board.product_name`` carries the product, so it is preferred when it names one.

Partitioned GPUs (MI300X/MI308X in DPX/QPX/CPX) list one entry per partition; the first
partition of each physical GPU (``partition_id`` 0) carries the mode, its siblings print N/A. The
parser numbers physical cards from those primaries so both counts are available.
"""

from __future__ import annotations

import re
from typing import Any

from harness.facts.model import Accelerator
from harness.facts.parsers.common import FactsParseError, binary_size, is_na, load_json_after_noise

_GENERIC = re.compile(r"series|graphics|device|generic|^amd$|^amd instinct$", re.IGNORECASE)


def _name_ok(name: Any) -> bool:
    return not is_na(name) and any(ch.isdigit() for ch in str(name)) and not _GENERIC.search(str(name))


def _best_name(names: list[str]) -> str:
    for n in names:
        if _name_ok(n):
            return n
    for n in names:
        if not is_na(n):
            return n
    return "unknown"


def _int_or_none(v: Any) -> int | None:
    if isinstance(v, bool) or is_na(v):
        return None
    try:
        return int(str(v), 0) if isinstance(v, str) else int(v)
    except ValueError:
        return None


def amdsmi_gpus(text: str) -> list[dict[str, Any]]:
    """The per-GPU objects of any ``amd-smi ... --json`` output: a top-level list (amd-smi 24.x)
    or an object with ``gpu_data`` (26.x), after any warning lines printed before it."""
    doc = load_json_after_noise("amd-smi", text)
    if isinstance(doc, dict):
        if "gpu_data" not in doc:
            raise FactsParseError("amd-smi", "expected a list of GPUs or an object with 'gpu_data'")
        doc = doc["gpu_data"]
    if not isinstance(doc, list):
        raise FactsParseError("amd-smi", "expected a list of GPUs")
    for i, gpu in enumerate(doc):
        if not isinstance(gpu, dict):
            raise FactsParseError("amd-smi", f"GPU entry {i} is not an object")
    return doc


def parse_amdsmi_static(text: str) -> list[Accelerator]:
    out: list[Accelerator] = []
    card = -1
    chip = 0
    for i, gpu in enumerate(amdsmi_gpus(text)):
        asic = gpu.get("asic") or {}
        board = gpu.get("board") or {}
        vram = gpu.get("vram") or {}
        part = gpu.get("partition") or {}
        bus = gpu.get("bus") or {}
        names = [str(board.get("product_name") or ""), str(asic.get("market_name") or "")]
        names = [n for n in names if not is_na(n)]
        pid = _int_or_none(part.get("partition_id"))
        if pid in (None, 0) or card < 0:
            card += 1
            chip = 0
        else:
            chip = pid
        compute = part.get("compute_partition")
        memory = part.get("memory_partition")
        size = vram.get("size") if isinstance(vram, dict) else None
        index = _int_or_none(gpu.get("gpu"))
        out.append(Accelerator(
            index=index if index is not None else i,
            card=card, chip=chip, model=_best_name(names), names=names,
            memory_bytes=binary_size(size, "MB"),
            bus_id=None if is_na(bus.get("bdf")) else str(bus.get("bdf")),
            compute_partition=None if is_na(compute) else str(compute),
            memory_partition=None if is_na(memory) else str(memory),
        ))
    return out


def parse_rocmsmi_json(text: str) -> list[Accelerator]:
    doc = load_json_after_noise("rocm-smi", text)
    if not isinstance(doc, dict):
        raise FactsParseError("rocm-smi", "expected an object keyed by card")
    out: list[Accelerator] = []
    cards = [k for k in doc if re.fullmatch(r"card\d+", k)]
    for n, key in enumerate(sorted(cards, key=lambda k: int(k[4:]))):
        info = doc[key]
        if not isinstance(info, dict):
            raise FactsParseError("rocm-smi", f"{key} is not an object")
        keys = ("Card Series", "Device Name", "Card Model")
        names = [str(info.get(k)) for k in keys if not is_na(info.get(k))]
        mem = info.get("VRAM Total Memory (B)")
        out.append(Accelerator(
            index=int(key[4:]), card=n, model=_best_name(names), names=names,
            memory_bytes=_int_or_none(mem),
            bus_id=None if is_na(info.get("PCI Bus")) else str(info.get("PCI Bus")),
        ))
    return out

"""Ascend NPUs: the ``npu-smi info`` table and ``npu-smi info -t board -i N``.

The table prints two lines per chip::

    | NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
    | Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
    | 0     910B3               | OK            | 93.6        36                0    / 0             |
    | 0                         | 0000:C1:00.0  | 0           0    / 0          3161 / 65536         |

A card with several chips (Atlas 300I Duo, the A3 "Ascend910" with ``Chip Phy-ID``) repeats the
NPU id with chip 0, 1...; the second header names the extra column (``Phy-ID`` or ``Device``),
which is the logical device id. Inference cards without HBM (310/310P) carry their memory in
``Memory-Usage``. A process table may follow; parsing stops at its header.
"""

from __future__ import annotations

import re

from harness.facts.model import Accelerator
from harness.facts.parsers.common import FactsParseError

_HEALTH = {"ok", "warning", "alarm", "critical", "unknown", "general warning", "major warning",
           "minor warning", "critical warning"}
_BUS = re.compile(r"^[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]$")
_PAIR = re.compile(r"(\d+)\s*/\s*(\d+)")


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def parse_npusmi_info(text: str) -> list[Accelerator]:
    lines = [ln for ln in text.splitlines() if ln.strip().startswith("|")]
    if not lines and text.strip():
        if "npu-smi" not in text and "NPU" not in text:
            raise FactsParseError("npu-smi", "no table in the output")
    has_hbm = any("HBM-Usage" in ln for ln in lines)
    out: list[Accelerator] = []
    pending: tuple[int, str, str] | None = None
    for line in lines:
        cells = _cells(line)
        joined = " ".join(cells)
        if "Process id" in joined or "Process name" in joined:
            break  # the process table
        if len(cells) < 3 or cells[0].startswith(("NPU ", "Chip")) or "npu-smi" in joined:
            continue
        first = cells[0].split()
        if pending is None:
            if len(first) >= 2 and first[0].isdigit() and cells[1].lower() in _HEALTH:
                pending = (int(first[0]), " ".join(first[1:]), cells[1])
            continue
        npu, name, health = pending
        pending = None
        if not first or not first[0].isdigit() or not _BUS.match(cells[1]):
            raise FactsParseError("npu-smi",
                                  f"NPU {npu}: second line is not 'Chip | Bus-Id | ...': {line.strip()}")
        chip = int(first[0])
        logical = int(first[1]) if len(first) > 1 and first[1].isdigit() else len(out)
        pairs = _PAIR.findall(cells[2])
        mem_mb = None
        if pairs:
            mem_mb = int(pairs[-1][1]) if has_hbm else int(pairs[0][1])
        out.append(Accelerator(
            index=logical, card=npu, chip=chip, model=name, names=[name],
            memory_bytes=mem_mb * 2**20 if mem_mb else None, bus_id=cells[1], health=health,
        ))
    if pending is not None:
        raise FactsParseError("npu-smi", f"NPU {pending[0]}: the table ends after its first line")
    return out


def parse_npusmi_board(text: str) -> dict[str, str]:
    """``Key : Value`` lines of ``npu-smi info -t board -i N`` (and other ``-t`` queries)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        if ":" not in line:
            continue
        key, _, value = line.partition(":")
        key = key.strip()
        if key:
            out[key] = value.strip()
    if not out:
        raise FactsParseError("npu-smi", "no 'Key : Value' lines in the board information")
    return out

"""NVIDIA GPUs: ``nvidia-smi --query-gpu=index,name,memory.total,pci.bus_id,driver_version
--format=csv,noheader,nounits`` (also accepted: with a header line and with units, e.g.
``81559 MiB``). nvidia-smi's MiB is 2**20 bytes."""

from __future__ import annotations

import csv
import io

from harness.facts.model import Accelerator
from harness.facts.parsers.common import FactsParseError, binary_size, is_na

QUERY_FIELDS = ("index", "name", "memory.total", "pci.bus_id", "driver_version")
QUERY_ARGV = ("nvidia-smi", f"--query-gpu={','.join(QUERY_FIELDS)}", "--format=csv,noheader,nounits")


def parse_nvidia_smi_csv(text: str) -> tuple[list[Accelerator], str | None]:
    """The GPUs and the driver version."""
    if "No devices were found" in text:
        return [], None
    reader = csv.reader(io.StringIO(text), skipinitialspace=True)
    rows = [r for r in reader if r and any(c.strip() for c in r)]
    if rows and rows[0][0].strip().lower() == "index":
        rows = rows[1:]  # a header line (format=csv without noheader)
    out: list[Accelerator] = []
    driver: str | None = None
    for n, row in enumerate(rows):
        if len(row) != len(QUERY_FIELDS):
            raise FactsParseError("nvidia-smi",
                                  f"line {n + 1}: expected {len(QUERY_FIELDS)} fields, got {len(row)}")
        index, name, mem, bus, drv = (c.strip() for c in row)
        if not index.isdigit():
            raise FactsParseError("nvidia-smi", f"line {n + 1}: index {index!r} is not a number")
        out.append(Accelerator(index=int(index), card=int(index), model=name, names=[name],
                               memory_bytes=binary_size(mem, "MiB"), bus_id=None if is_na(bus) else bus))
        driver = driver or (None if is_na(drv) else drv)
    return out, driver

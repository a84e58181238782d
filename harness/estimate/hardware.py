"""Accelerator presets: memory and dense BF16/FP16 peak per device, each with its public source.

Peaks are *dense* tensor figures (vendors often print the 2:4-sparsity figure, twice as large).
A part whose vendor publishes no peak has ``peak_flops = None`` (the estimator then needs the
user's figure, ``--peak-tflops``, or a calibration from a measured recompute arm, and says so), or
a ``stand_in`` figure: a published peak of a named other part that bounds it, used with the bound's
direction stated in every output (MI308X: see its entry).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Accelerator:
    name: str
    memory_bytes: Optional[float]
    peak_flops: Optional[float]  # dense BF16/FP16 FLOP/s per device
    source: str
    # the peak is not this part's own published figure but another part's that bounds it from above;
    # the text says which and what that means for the estimate
    stand_in: Optional[str] = None


_GB = 1e9

ACCELERATORS: dict[str, Accelerator] = {a.name.lower(): a for a in (
    Accelerator("A100", 80 * _GB, 312e12,
                "NVIDIA A100 Tensor Core GPU datasheet (80GB SXM): BF16 312 TFLOPS dense (624 with sparsity)"),
    Accelerator("A800", 80 * _GB, 312e12,
                "NVIDIA A800 80GB product brief: the A100's compute (BF16 312 TFLOPS dense), NVLink 400 GB/s"),
    Accelerator("H100", 80 * _GB, 989e12,
                "NVIDIA H100 Tensor Core GPU datasheet (SXM5): BF16 989 TFLOPS dense (1,979 with sparsity)"),
    Accelerator("H800", 80 * _GB, 989e12,
                "NVIDIA H800 SXM5 product brief: the H100 SXM's compute (BF16 989 TFLOPS dense), NVLink 400 GB/s"),
    Accelerator("MI300X", 192 * _GB, 1307.4e12,
                "AMD Instinct MI300X datasheet: 192 GB HBM3, FP16/BF16 1,307.4 TFLOPS dense (2,614.9 with sparsity)"),
    Accelerator("MI308X", 192 * _GB, 1307.4e12,
                "memory: 192 GB HBM3 (the vendor articles and the inventory example); peak: the MI300X "
                "datasheet's, as a stand-in upper bound (no published MI308X figure)",
                stand_in=("AMD publishes no peak figure for the MI308X (no datasheet or product page gives "
                          "one; the part is reported as the export variant of the MI300X: same CDNA 3 design "
                          "and 192 GB HBM3, less compute enabled). The MI300X datasheet's dense BF16 1,307.4 "
                          "TFLOPS is used as an upper bound of its peak: the real recompute is no faster than "
                          "assumed, so the break-even bandwidth printed is an upper bound (a tier that reaches "
                          "it beats recompute). Give --peak-tflops for a measured or vendor-supplied figure, "
                          "or calibrate with --campaign from a recompute arm")),
    Accelerator("Ascend910B", 64 * _GB, 320e12,
                "Huawei Ascend 910B: 64 GB HBM2e; FP16 about 320 TFLOPS as widely reported (Huawei's own figure "
                "varies by SKU 910B1-B4; not a datasheet value: override with --peak-tflops)"),
)}

_ALIASES = {"mi308": "mi308x", "910b": "ascend910b", "ascend 910b": "ascend910b", "ascend910b3": "ascend910b",
            "ascend910b4": "ascend910b", "ascend910b2": "ascend910b", "ascend910b1": "ascend910b",
            "a100-sxm4-80gb": "a100", "h100-sxm5-80gb": "h100", "h100 80gb hbm3": "h100"}


def find_accelerator(model: str) -> Optional[Accelerator]:
    """The preset for a model name as vendor tools or inventories spell it, or None."""
    key = model.strip().lower().replace("nvidia ", "").replace("amd instinct ", "").replace("amd ", "")
    key = _ALIASES.get(key, key)
    if key in ACCELERATORS:
        return ACCELERATORS[key]
    for name, acc in ACCELERATORS.items():
        if key.startswith(name):
            return acc
    return None

"""mi308x: AMD Instinct MI308X on ROCm.

vLLM refuses to start when ``CUDA_VISIBLE_DEVICES`` is also set and differs from
``HIP_VISIBLE_DEVICES``, so both are set to the same list. Accelerators come from ``amd-smi static
--json``, or ``rocm-smi`` when amd-smi is missing or fails.
"""

from __future__ import annotations

from harness.facts.parsers import amd, system
from harness.platforms.base import FactsCollector, Platform, PlatformDefaults

ROCM_SMI_ARGV = ("rocm-smi", "--showproductname", "--showmeminfo", "vram", "--showbus", "--json")


def collect_accelerators(c: FactsCollector) -> None:
    devs = c.run_parse(("amd-smi", "static", "--json"), amd.parse_amdsmi_static)
    source = "amd-smi"
    if devs is None:
        devs, source = c.run_parse(ROCM_SMI_ARGV, amd.parse_rocmsmi_json), "rocm-smi"
    if devs is not None:
        c.facts.accelerators, c.facts.accelerator_source = devs, source


def collect_rocm_version(c: FactsCollector) -> None:
    c.facts.versions["rocm"] = c.run_parse(("cat", "/opt/rocm/.info/version"), system.parse_rocm_version)


PLATFORM = Platform(
    name="mi308x",
    description="AMD Instinct MI308X (ROCm)",
    device_vars=("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"),
    accelerator_tools=("amd-smi", "rocm-smi"),
    collect_accelerators=collect_accelerators,
    software_key="rocm",
    collect_software_version=collect_rocm_version,
    gds_backend="hipfile",  # lmcache storage_backend/gds_backend.py loads hipfile_shim for it
    defaults=PlatformDefaults(accelerator_model="MI308X", accelerator_count=8, accelerator_memory="192 GB",
                              software={"rocm": "*", "vllm": "*", "lmcache": "*"}),
)

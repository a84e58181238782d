"""cuda: NVIDIA GPUs on CUDA (``nvidia-smi --query-gpu`` CSV; CUDA version from nvcc or nvidia-smi)."""

from __future__ import annotations

from harness.facts.parsers import nvidia, system
from harness.platforms.base import FactsCollector, Platform, PlatformDefaults


def collect_accelerators(c: FactsCollector) -> None:
    parsed = c.run_parse(nvidia.QUERY_ARGV, nvidia.parse_nvidia_smi_csv)
    if parsed is not None:
        c.facts.accelerators, c.facts.accelerator_source = parsed[0], "nvidia-smi"
        if parsed[1]:
            c.facts.versions["nvidia-driver"] = parsed[1]


def collect_cuda_version(c: FactsCollector) -> None:
    if c.has("nvcc"):
        c.facts.versions["cuda"] = c.run_parse(("nvcc", "--version"), system.parse_nvcc_version)
    else:
        c.facts.versions["cuda"] = c.run_parse(("nvidia-smi",), system.parse_nvidia_smi_cuda)


PLATFORM = Platform(
    name="cuda",
    description="NVIDIA GPUs (CUDA)",
    device_vars=("CUDA_VISIBLE_DEVICES",),
    accelerator_tools=("nvidia-smi",),
    collect_accelerators=collect_accelerators,
    software_key="cuda",
    collect_software_version=collect_cuda_version,
    defaults=PlatformDefaults(accelerator_model="H100", accelerator_count=8, accelerator_memory="80 GB",
                              software={"cuda": "*", "vllm": "*", "lmcache": "*"}),
)

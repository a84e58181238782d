"""ascend910b: Huawei Ascend 910B on CANN, vLLM through vllm-ascend and LMCache-Ascend.

Devices are pinned by ``ASCEND_RT_VISIBLE_DEVICES``. LMCache chunk keys must agree across
processes, so every engine runs with ``PYTHONHASHSEED=0``. The connector: vllm-ascend 0.17 ships
its own registration ("builtin"); otherwise LMCache-Ascend's documented dynamic form is loaded by
module path. Accelerators come from ``npu-smi info``; the driver and firmware versions from the
first card's board page.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Optional

from harness.facts.parsers import ascend, system
from harness.platforms.base import FactsCollector, Platform, PlatformDefaults

# LMCache-Ascend's dynamic connector, loaded by module path (vllm-ascend with the LMCache-Ascend plugin)
ASCEND_DYNAMIC_CONNECTOR = {
    "kv_connector": "LMCacheAscendConnectorV1Dynamic",
    "kv_role": "kv_both",
    "kv_connector_module_path": "lmcache_ascend.integration.vllm.lmcache_ascend_connector_v1",
}
# vllm-ascend 0.17 ships its own registration of the LMCache-Ascend connector
ASCEND_BUILTIN_CONNECTOR = {"kv_connector": "LMCacheAscendConnector", "kv_role": "kv_both"}
_CANN_SCRIPT = ("cat /usr/local/Ascend/ascend-toolkit/latest/*/ascend_toolkit_install.info 2>/dev/null "
                "|| cat /usr/local/Ascend/ascend-toolkit/latest/version.cfg")


def ascend_connector_for(vllm_ascend_version: Optional[str]) -> str:
    """'builtin' for vllm-ascend 0.17.x, else 'dynamic' (LMCache-Ascend's documented form)."""
    if vllm_ascend_version and re.match(r"^v?0\.17(\.|$|rc)", vllm_ascend_version.strip()):
        return "builtin"
    return "dynamic"


def choose_connector(software: Mapping[str, str], override: Optional[str]) -> tuple[str, str]:
    choice = override or ascend_connector_for(software.get("vllm-ascend"))
    return choice, (f"Ascend LMCache connector: {choice} "
                    f"(vllm-ascend {software.get('vllm-ascend', 'version not given')})")


def collect_accelerators(c: FactsCollector) -> None:
    npus = c.run_parse(("npu-smi", "info"), ascend.parse_npusmi_info)
    if npus is not None:
        c.facts.accelerators, c.facts.accelerator_source = npus, "npu-smi"
    if npus:
        board = c.run_parse(("npu-smi", "info", "-t", "board", "-i", str(npus[0].card)), ascend.parse_npusmi_board)
        for key, name in (("Software Version", "npu-driver"), ("Firmware Version", "npu-firmware")):
            if board and board.get(key):
                c.facts.versions[name] = board[key]


def collect_cann_version(c: FactsCollector) -> None:
    c.facts.versions["cann"] = c.run_parse(("sh", "-c", _CANN_SCRIPT), system.parse_cann_version, key="cann version")


PLATFORM = Platform(
    name="ascend910b",
    description="Huawei Ascend 910B (CANN, vllm-ascend, LMCache-Ascend)",
    device_vars=("ASCEND_RT_VISIBLE_DEVICES",),
    accelerator_tools=("npu-smi",),
    collect_accelerators=collect_accelerators,
    software_key="cann",
    collect_software_version=collect_cann_version,
    engine_env={"PYTHONHASHSEED": "0"},
    kv_connectors={"dynamic": ASCEND_DYNAMIC_CONNECTOR, "builtin": ASCEND_BUILTIN_CONNECTOR},
    choose_connector=choose_connector,
    lmcache_multiprocess=False,  # LMCache-Ascend's NPUCacheContext.__init__ raises NotImplementedError
    # lmcache 0.5.6 ships NPU support itself (lmcache/v1/platform/devices/npu/; 0.5.5 has none)
    lmcache_multiprocess_since="0.5.6",
    engine_block_size=128,  # vllm-ascend's default KV block size
    defaults=PlatformDefaults(accelerator_model="Ascend910B3", accelerator_count=8, accelerator_memory="64 GB",
                              software={"cann": "*", "vllm": "*", "vllm-ascend": "*", "lmcache": "*"}),
)

"""Which KV connector wiring is proven for which software: the one table that maps (vLLM version
range, LMCache version range, LMCache mode, platform) to the connector vLLM loads, the module path
where vLLM's built-in connector does not match, and the adapter's arguments, each row naming the
real-engine test that proves it or, for rows that need an accelerator, the source it follows.

A profile declares ``engine.versions``; ``kvgate plan`` and ``kvgate validate`` refuse a
combination no row covers (``UnprovenWiring``: the versions, the mode and the rows there are).
Why a table (issue 48): vLLM 0.20.1's built-in ``LMCacheMPConnector`` builds
``LMCacheMPSchedulerAdapter(server_url=...)`` and a 7-field ``ParallelStrategy``; lmcache 0.5
takes ``server_urls: list[str]`` (0.5.0) and 0.4.7 made ParallelStrategy 5 fields, so the pair
0.20.1 + 0.5.6 fails at engine start (tests/real_engine/test_matrix.py::
test_the_seeds_vllm_with_lmcache_056_fails_at_the_connector) while 0.32 + 0.5.6 works. Only a
tested pair is planned.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Optional

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from harness.config.profile import EngineVersions
from harness.engines.lmcache import MP_TRANSFER_FLAGS
from harness.errors import InputError

ALL_GPU = ("cuda", "mi308x")
MP_CONNECTOR = "LMCacheMPConnector"
V1_CONNECTOR = "LMCacheConnectorV1"
_MP_ARGS_0_4 = {"server_url": "tcp://HOST:PORT (lmcache.mp.host, lmcache.mp.port)",
                "parallel_strategy": "ParallelStrategy, 7 fields (use_mla, kv_world_size, kv_worker_id, "
                "actual_world_size, actual_worker_id, tp_size, pp_size)"}
_MP_ARGS_0_5 = {"server_urls": "[tcp://HOST:PORT] (lmcache.mp.host, lmcache.mp.port)",
                "parallel_strategy": "lmcache 0.5 ParallelStrategy, built by LMCache's own connector"}
_V1_ARGS = {"config": "LMCACHE_CONFIG_FILE (the arm's YAML, written by kvgate)"}
# lmcache 0.4 `lmcache server`: --transfer-mode (gpu: CUDA IPC; non_gpu: pickled CPU chunks) instead of
# 0.5's --supported-transfer-mode; a standalone Prometheus exporter on 9090 unless told (0: any free
# port; /metrics is served on the HTTP port too); L1 emptied by POST /clear-cache
# (lmcache 0.4.6 v1/multiprocess/config.py, http_apis/cache_api.py:44)
_SERVER_0_4_GPU = ("--transfer-mode", "gpu", "--prometheus-port", "0")
_SERVER_0_4_CPU = ("--transfer-mode", "non_gpu", "--prometheus-port", "0")
_L1_CLEAR_0_4 = ("/clear-cache", "")
_T = "tests/real_engine/test_matrix.py"
# No CPU row runs LMCache in-process: its engine has no CPU connector in 0.4.6 or 0.5.6 (CreateGPUConnector
# raises "No supported cpu connector found"; test_matrix.py::test_in_process_on_cpu_has_no_proven_row).


@dataclass(frozen=True)
class WiringRow:
    """One proven combination and the wiring kvgate plans for it."""

    vllm: str  # a PEP 440 specifier set, e.g. ">=0.20,<0.21"
    lmcache: str
    mode: str  # "in_process" or "multiprocess"
    platforms: tuple[str, ...]
    connector: str
    proof: str  # the real-engine test, or for accelerator rows the source file and line
    module_path: Optional[str] = None  # kv_connector_module_path, where vLLM's built-in one does not match
    adapter_args: Mapping[str, str] = field(default_factory=dict)
    vllm_ascend: Optional[str] = None  # specifier of vllm-ascend (Ascend rows)
    # multiprocess: the `lmcache server` flags of this release, and the HTTP call that empties its L1
    server_flags: tuple[str, ...] = MP_TRANSFER_FLAGS
    l1_clear: tuple[str, str] = ("/cache/clear", '{"tier": "l1"}')

    def describe(self) -> str:
        asc = f", vllm-ascend {self.vllm_ascend}" if self.vllm_ascend else ""
        path = f" from {self.module_path}" if self.module_path else ""
        return (f"vllm {self.vllm}, lmcache {self.lmcache}{asc}, {self.mode} on {'/'.join(self.platforms)}: "
                f"{self.connector}{path} (proof: {self.proof})")

    def kv_transfer_config(self, extra: Optional[Mapping[str, object]] = None) -> dict[str, object]:
        """vLLM's ``--kv-transfer-config`` for this row (``extra``: kv_connector_extra_config)."""
        cfg: dict[str, object] = {"kv_connector": self.connector, "kv_role": "kv_both"}
        if self.module_path:
            cfg["kv_connector_module_path"] = self.module_path
        if extra:
            cfg["kv_connector_extra_config"] = dict(extra)
        return cfg


ROWS: tuple[WiringRow, ...] = (
    # the seeds' stack: vLLM 0.20.1 with the LMCache its built-in connectors were written against
    WiringRow(">=0.20.1,<0.21", ">=0.4.4,<0.4.7", "multiprocess", ("cpu",), MP_CONNECTOR,
              f"{_T}::test_multiprocess_cold_restore_from_l2[vllm-0.20.1]", adapter_args=_MP_ARGS_0_4,
              server_flags=_SERVER_0_4_CPU, l1_clear=_L1_CLEAR_0_4),
    WiringRow(">=0.20.1,<0.21", ">=0.4.4,<0.4.7", "multiprocess", ALL_GPU, MP_CONNECTOR,
              "vllm 0.20.1 vllm/distributed/kv_transfer/kv_connector/v1/lmcache_mp_connector.py:121-140 "
              "(ParallelStrategy with 7 arguments, LMCacheMPSchedulerAdapter(server_url=...)); lmcache 0.4.6 "
              "lmcache/integration/vllm/vllm_multi_process_adapter.py (the same 7 fields and server_url)",
              adapter_args=_MP_ARGS_0_4, server_flags=_SERVER_0_4_GPU, l1_clear=_L1_CLEAR_0_4),
    WiringRow(">=0.20.1,<0.21", ">=0.4.4,<0.4.7", "in_process", ALL_GPU, V1_CONNECTOR,
              "vllm 0.20.1 vllm/distributed/kv_transfer/kv_connector/v1/lmcache_connector.py:107 (imports "
              "lmcache.integration.vllm.vllm_v1_adapter, which lmcache 0.4.6 ships)", adapter_args=_V1_ARGS),
    # the current pair (tools/ensure-real-engine.sh): vLLM 0.32 resolves the name to LMCache's own connector
    WiringRow(">=0.32,<0.33", ">=0.5.6,<0.6", "multiprocess", ("cpu",), MP_CONNECTOR,
              "tests/real_engine/test_cold_restore.py::"
              "test_multiprocess_cold_restore_is_served_from_storage_and_the_emulator_conforms (a served cold "
              "restore through this row)", adapter_args=_MP_ARGS_0_5),
    WiringRow(">=0.32,<0.33", ">=0.5.6,<0.6", "multiprocess", ALL_GPU, MP_CONNECTOR,
              "vllm 0.32 vllm/distributed/kv_transfer/kv_connector/v1/lmcache_mp_connector.py:1191-1217 "
              "(_resolve_lmcache_mp_connector: LMCache's own lmcache/integration/vllm/lmcache_mp_connector.py); "
              "the code path of the cpu row",
              adapter_args=_MP_ARGS_0_5),
    WiringRow(">=0.32,<0.33", ">=0.5.6,<0.6", "in_process", ALL_GPU, V1_CONNECTOR,
              "vllm 0.32 vllm/distributed/kv_transfer/kv_connector/v1/lmcache_connector.py:102 (imports "
              "lmcache.integration.vllm.vllm_v1_adapter, which lmcache 0.5.6 ships)", adapter_args=_V1_ARGS),
    # Ascend: vllm-ascend registers LMCache-Ascend's connector (0.17) or loads it by module path
    WiringRow(">=0.11", ">=0.3", "in_process", ("ascend910b",), "LMCacheAscendConnector",
              "vllm-ascend 0.17 registers LMCacheAscendConnector (harness/platforms/ascend910b.py)",
              adapter_args=_V1_ARGS, vllm_ascend=">=0.17.0rc0,<0.18"),
    WiringRow(">=0.11", ">=0.3", "in_process", ("ascend910b",), "LMCacheAscendConnectorV1Dynamic",
              "LMCache-Ascend's documented dynamic form (lmcache_ascend/integration/vllm/"
              "lmcache_ascend_connector_v1.py)",
              module_path="lmcache_ascend.integration.vllm.lmcache_ascend_connector_v1",
              adapter_args=_V1_ARGS, vllm_ascend="!=0.17.*"),
    WiringRow(">=0.32,<0.33", ">=0.5.6,<0.6", "multiprocess", ("ascend910b",), MP_CONNECTOR,
              "lmcache 0.5.6 lmcache/v1/platform/devices/npu/cache_context.py (the first release with NPU support "
              "in LMCache itself; 0.5.5 ships no platform/devices/npu)", adapter_args=_MP_ARGS_0_5),
)


class UnprovenWiring(InputError):
    """No row of the table covers the declared software, mode and platform."""


def _version(text: str, what: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        raise InputError(f"engine.versions.{what} {text!r} is not a version (e.g. 0.20.1)") from None


def _within(spec: Optional[str], version: Optional[Version]) -> bool:
    if spec is None:
        return True
    if version is None:
        return False
    try:
        return SpecifierSet(spec).contains(version, prereleases=True)
    except InvalidSpecifier:
        return False


def matching_rows(versions: EngineVersions, mode: str, platform: str) -> list[WiringRow]:
    vllm, lmc = _version(versions.vllm, "vllm"), _version(versions.lmcache, "lmcache")
    asc = _version(versions.vllm_ascend, "vllm_ascend") if versions.vllm_ascend else None
    return [r for r in ROWS if r.mode == mode and platform in r.platforms and _within(r.vllm, vllm)
            and _within(r.lmcache, lmc) and (r.vllm_ascend is None or _within(r.vllm_ascend, asc))]


def rows_for(mode: str, platform: str) -> list[WiringRow]:
    return [r for r in ROWS if r.mode == mode and platform in r.platforms]


def _refusal(versions: EngineVersions, mode: str, where: str, rows: Sequence[WiringRow]) -> str:
    asc = f", vllm-ascend {versions.vllm_ascend}" if versions.vllm_ascend else ""
    listed = "\n  - ".join(r.describe() for r in (rows or ROWS))
    return (f"engine.versions vllm {versions.vllm}, lmcache {versions.lmcache}{asc} in LMCache {mode} mode {where}: "
            f"no proven connector wiring (harness/engines/connectorwiring.py). Proven rows"
            f"{'' if rows else ' (none for this mode and platform; all)'}:\n  - {listed}")


def proven_wiring(versions: EngineVersions, mode: str, platform: str) -> WiringRow:
    """The row for the declared software, or ``UnprovenWiring`` naming what exists."""
    rows = matching_rows(versions, mode, platform)
    if rows:
        return rows[0]
    raise UnprovenWiring(_refusal(versions, mode, f"on {platform}", rows_for(mode, platform)))


def unproven_problems(versions: Optional[EngineVersions], modes: Sequence[str],
                      platforms: Optional[Sequence[str]]) -> list[str]:
    """Every (mode, platform) of a plan with no row, as messages (empty: all proven or undeclared).
    ``platforms`` None (no inventory): a mode is refused only when no platform has a row."""
    if versions is None:
        return []
    out: list[str] = []
    for mode in dict.fromkeys(modes):
        if platforms is None:
            if not any(matching_rows(versions, mode, p) for r in ROWS for p in r.platforms):
                out.append(_refusal(versions, mode, "on any platform", [r for r in ROWS if r.mode == mode]))
            continue
        out += [_refusal(versions, mode, f"on {p}", rows_for(mode, p))
                for p in dict.fromkeys(platforms) if not matching_rows(versions, mode, p)]
    return out


def planned_row(versions: Optional[EngineVersions], mode: str, platform: str) -> tuple[Optional[WiringRow], str]:
    """The proven row of the declared software and the plan's note; (None, note) when the profile
    declares no versions (the caller then plans the current stack's wiring, said unproven)."""
    if versions is None:
        return None, ("engine.versions not declared: the connector wiring of the current stack (vllm 0.32, "
                      "lmcache 0.5.6) is planned, proven for no declared software, and G1 cannot check what runs")
    row = proven_wiring(versions, mode, platform)
    return row, f"connector wiring: {row.describe()}"

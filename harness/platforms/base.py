"""What a platform (an accelerator family) is: one frozen object that every layer reads.

A platform says which environment variables pin an engine instance to its devices, which vendor
tools report its accelerators (and how their output is parsed into facts), which software version
it implies (ROCm, CANN, CUDA), what it adds to an engine's environment, which LMCache connector
vLLM loads on it, and the starting values ``kvgate init`` writes. Code elsewhere looks these up on
the object (``get_platform(node.platform)``); it never compares platform names.

Rules: the facts hooks only call the collector they are given (argv lists, pure parsers from
``harness.facts.parsers``); nothing here touches a node by itself.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Optional, Protocol, TypeVar

from harness.facts.model import NodeFacts

T = TypeVar("T")

# vLLM's built-in LMCache connector (ROCm and CUDA builds of vLLM)
LMCACHE_CONNECTOR: Mapping[str, str] = {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}


class FactsCollector(Protocol):
    """What a platform's facts hooks may use (``harness.facts.collect`` provides it)."""

    facts: NodeFacts

    def has(self, tool: str) -> bool: ...

    def run_parse(self, argv: Sequence[str], fn: Callable[..., T], *args: object, tool: Optional[str] = None,
                  key: Optional[str] = None, ok_codes: tuple[int, ...] = (0,)) -> Optional[T]: ...


@dataclass(frozen=True)
class PlatformDefaults:
    """Starting values ``kvgate init`` writes for a node of this platform (edit them to the hardware)."""

    accelerator_model: Optional[str] = None
    accelerator_count: int = 0
    accelerator_memory: Optional[str] = None
    software: Mapping[str, str] = field(default_factory=dict)
    engine_image_hint: str = ""


@dataclass(frozen=True)
class Platform:
    name: str
    description: str
    # environment variables that pin an engine instance to its devices; () = nothing to pin
    device_vars: tuple[str, ...] = ()
    # vendor tools whose absence explains missing accelerator facts; () = no accelerators
    accelerator_tools: tuple[str, ...] = ()
    # fills facts.accelerators / accelerator_source (and any driver versions) through the collector
    collect_accelerators: Optional[Callable[[FactsCollector], None]] = None
    # the software name whose version this platform implies (facts.versions key), and its collector
    software_key: Optional[str] = None
    collect_software_version: Optional[Callable[[FactsCollector], None]] = None
    # added to every engine instance's environment on this platform
    engine_env: Mapping[str, str] = field(default_factory=dict)
    # LMCache connectors vLLM can load here, by choice name; the first is the default
    kv_connectors: Mapping[str, Mapping[str, str]] = field(default_factory=lambda: {"dynamic": LMCACHE_CONNECTOR})
    # picks a connector from the node's software versions: (choice, note for the plan) or None
    choose_connector: Optional[Callable[[Mapping[str, str], Optional[str]], tuple[str, str]]] = None
    defaults: PlatformDefaults = field(default_factory=PlatformDefaults)
    # can LMCache's multiprocess server (`lmcache server` + LMCacheMPConnector) run here?
    lmcache_multiprocess: bool = True
    # where it cannot by default: the LMCache release from which it can (the profile's engine.versions)
    lmcache_multiprocess_since: Optional[str] = None
    # vLLM's KV block size here when --block-size is not given: its prefix cache hits whole blocks
    # (vllm config/cache.py DEFAULT_BLOCK_SIZE 16 on CUDA and ROCm)
    engine_block_size: int = 16
    # the GDS library LMCache loads here (lmcache gds_backend; its own default, cufile, is NVIDIA's)
    gds_backend: str = "cufile"

    def connector(self, software: Mapping[str, str], override: Optional[str] = None) -> tuple[str, Optional[str]]:
        """The connector choice for a node (and a note saying why, when there is a choice to make)."""
        if self.choose_connector is None:
            return next(iter(self.kv_connectors)), None
        return self.choose_connector(software, override)

    def kv_transfer_config(self, choice: Optional[str] = None) -> dict[str, str]:
        """vLLM's ``--kv-transfer-config`` for ``choice`` (ignored when the platform has one connector)."""
        if len(self.kv_connectors) == 1:
            return dict(next(iter(self.kv_connectors.values())))
        if choice is None or choice not in self.kv_connectors:
            known = "' or '".join(self.kv_connectors)
            raise ValueError(f"{self.name} connector must be '{known}', not {choice!r}")
        return dict(self.kv_connectors[choice])

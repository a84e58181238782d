"""The engine vocabulary: a plan (exact command, environment, files), a running instance, the
errors, and the protocol every engine kind implements."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Protocol, Union

from harness.errors import InfraError, InputError
from harness.remote.base import DetachedHandle, Executor, ProcessState, tail

if TYPE_CHECKING:
    from harness.config.inventory import Node
    from harness.config.profile import Arm, Profile
    from harness.engines.prometheus import MetricsSnapshot

DEFAULT_WORKDIR = "/tmp/kvgate"


class EngineError(InfraError):
    """An engine failed; carries the node, the command and the tail of its log."""

    def __init__(self, message: str, *, node: str, command: Sequence[str] = (), log_tail: str = "") -> None:
        self.node = node
        self.command = tuple(command)
        self.log_tail = log_tail
        text = f"{node}: {message}"
        if self.command:
            text += f"\n  command: {shlex.join(self.command)}"
        if log_tail.strip():
            text += "\n  last lines of the engine log:\n    " + tail(log_tail, 20).replace("\n", "\n    ")
        super().__init__(text)


class EngineStartError(EngineError):
    """The engine did not start or did not become ready in time."""


class EngineStopError(EngineError):
    """The engine could not be stopped, or its port stayed busy."""


@dataclass(frozen=True)
class RayClusterPlan:
    """A Ray cluster for one engine spanning several nodes (vLLM's Ray backend)."""

    head_node: str
    head_address: str  # host:port workers join
    commands: tuple[tuple[str, tuple[str, ...]], ...]  # (node, argv), head first
    env: tuple[tuple[str, tuple[tuple[str, str], ...]], ...]  # (node, env items) for ray start
    stop_argv: tuple[str, ...] = ("ray", "stop", "--force")

    def nodes(self) -> list[str]:
        return [n for n, _ in self.commands]

    def env_for(self, node: str) -> dict[str, str]:
        for n, items in self.env:
            if n == node:
                return dict(items)
        return {}


@dataclass(frozen=True)
class SidecarPlan:
    """A process of one instance started before the engine and stopped after it: LMCache's
    multiprocess server (``lmcache server``), which holds L1 in its memory and L2 on storage."""

    name: str
    argv: tuple[str, ...]
    host: str
    port: int  # request port (the engine's connector connects here)
    http_port: int  # HTTP API (POST /cache/clear empties L1)
    metrics_port: int  # its own Prometheus /metrics
    env: Mapping[str, str] = field(default_factory=dict)
    l2_sharers: int = 1  # LMCache servers on the node sharing its L2 directory (mp_shared_l2)
    # the HTTP call that empties L1 (its path and JSON body), by LMCache release (engines/connectorwiring.py)
    l1_clear_path: str = "/cache/clear"
    l1_clear_body: str = '{"tier": "l1"}'

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> SidecarPlan:
        return cls(name=str(d["name"]), argv=tuple(d["argv"]), host=str(d["host"]), port=int(d["port"]),
                   http_port=int(d["http_port"]), metrics_port=int(d["metrics_port"]), env=dict(d.get("env") or {}),
                   l2_sharers=int(d.get("l2_sharers") or 1),
                   l1_clear_path=str(d.get("l1_clear_path", "/cache/clear")),
                   l1_clear_body=str(d.get("l1_clear_body", '{"tier": "l1"}')))

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "argv": list(self.argv), "host": self.host, "port": self.port,
                "http_port": self.http_port, "metrics_port": self.metrics_port, "env": dict(self.env),
                "l2_sharers": self.l2_sharers,
                "l1_clear_path": self.l1_clear_path, "l1_clear_body": self.l1_clear_body}


@dataclass(frozen=True)
class EnginePlan:
    """Everything needed to start one engine instance, decided before any node is touched."""

    kind: str
    node: str
    profile: str
    arm: str
    instance_index: int
    argv: tuple[str, ...]
    env: Mapping[str, str]
    files: Mapping[str, str]  # path on the node -> content (the LMCache YAML)
    host: str  # listen address
    port: int
    external_host: str  # address clients on other nodes use
    devices: tuple[int, ...]
    platform: str
    instance_dir: str  # on the node: logs, pid, files of this instance
    name: str  # detached process name
    served_model_name: str
    kv_dirs: tuple[str, ...] = ()  # LMCache disk directories (removed on stop only when asked)
    ready_timeout: float = 900.0
    python: str = "python3"
    offload: bool = True
    cpu_tier: bool = False  # LMCache holds KV in the engine's host memory (survives no restart)
    ray: Optional[RayClusterPlan] = None
    notes: tuple[str, ...] = ()  # decisions worth recording (e.g. the Ascend connector chosen)
    sidecar: Optional[SidecarPlan] = None  # LMCache multiprocess server of this instance
    lmcache_mode: str = "in_process"  # "in_process" | "multiprocess" | "none" (recompute arm)
    reset_endpoint: bool = False  # VLLM_SERVER_DEV_MODE=1: POST /reset_prefix_cache is served

    @property
    def endpoint_url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "::", "") else self.host
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    @property
    def external_url(self) -> str:
        host = self.external_host
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    def url_for(self, client_node: str) -> str:
        """The URL a load client on ``client_node`` uses: the engine's own loopback on its node,
        else its external address, which must not be a loopback address (the client's loopback is
        not the engine's node)."""
        if client_node == self.node:
            return self.endpoint_url
        host = self.external_host
        if host in ("", "localhost", "::1") or host.startswith("127."):
            raise InputError(
                f"the load runs on node {client_node} but the engine on {self.node} listens on "
                f"{self.host or 'loopback'} (external address {host or 'none'}): a remote client cannot "
                "reach it. Set engine.host: 0.0.0.0 (kvgate then uses the node's inventory host)"
            )
        return self.external_url

    def command_line(self) -> str:
        """The exact command as one shell line, environment first (for evidence and humans)."""
        env = [f"{k}={v}" for k, v in sorted(self.env.items())]
        return shlex.join([*(["env", *env] if env else []), *self.argv])

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> EnginePlan:
        """The plan saved by ``to_json`` (reattaching after a controller restart)."""
        d: dict[str, Any] = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        for key in ("argv", "devices", "kv_dirs", "notes"):
            d[key] = tuple(d.get(key) or ())
        d["env"] = dict(d.get("env") or {})
        d["files"] = dict(d.get("files") or {})
        if isinstance(d.get("sidecar"), Mapping):
            d["sidecar"] = SidecarPlan.from_json(d["sidecar"])
        ray = d.get("ray")
        if isinstance(ray, Mapping):
            d["ray"] = RayClusterPlan(
                head_node=str(ray["head_node"]),
                head_address=str(ray["head_address"]),
                commands=tuple((str(n), tuple(a)) for n, a in ray["commands"]),
                env=tuple((str(n), tuple((str(k), str(v)) for k, v in items)) for n, items in ray["env"]),
                stop_argv=tuple(ray["stop_argv"]),
            )
        return cls(**d)

    def to_json(self) -> dict[str, object]:
        d = asdict(self)
        d["argv"] = list(self.argv)
        d["env"] = dict(self.env)
        d["files"] = dict(self.files)
        d["devices"] = list(self.devices)
        d["kv_dirs"] = list(self.kv_dirs)
        d["notes"] = list(self.notes)
        d["sidecar"] = self.sidecar.to_json() if self.sidecar else None
        d["command_line"] = self.command_line()
        d["endpoint_url"] = self.endpoint_url
        return d


@dataclass
class EngineInstance:
    """A started engine: its plan, its detached process, and the executor of its node."""

    plan: EnginePlan
    handle: DetachedHandle
    executor: Executor = field(repr=False)
    peer_executors: Mapping[str, Executor] = field(default_factory=dict, repr=False)
    started_at: float = 0.0
    ready_at: Optional[float] = None
    sidecar_handle: Optional[DetachedHandle] = None
    # the disk tier the engine reported at readiness, against the plan (engines/tierreadback.py)
    tier_readback: Optional[Mapping[str, object]] = None
    # what the LMCache server's L2 directory held when it started and the capacity it got for the
    # rest (engines/l2count.py); None: no bounded fs_native L2
    l2_at_start: Optional[Mapping[str, object]] = None

    @property
    def endpoint_url(self) -> str:
        """The URL on the engine's node (probes and node agents use it)."""
        return self.plan.endpoint_url

    @property
    def external_url(self) -> str:
        """The URL from other nodes (meaningful when the engine listens beyond loopback)."""
        return self.plan.external_url

    @property
    def node(self) -> str:
        return self.plan.node

    def to_json(self) -> dict[str, object]:
        return {
            "plan": self.plan.to_json(),
            "handle": self.handle.to_json(),
            "sidecar_handle": self.sidecar_handle.to_json() if self.sidecar_handle else None,
            "started_at": self.started_at,
            "ready_at": self.ready_at,
            "tier_readback": dict(self.tier_readback) if self.tier_readback is not None else None,
            "l2_at_start": dict(self.l2_at_start) if self.l2_at_start is not None else None,
        }

    @classmethod
    def from_json(
        cls,
        data: Mapping[str, Any],
        executor: Executor,
        *,
        peer_executors: Optional[Mapping[str, Executor]] = None,
    ) -> EngineInstance:
        """Reattach to an instance saved with ``to_json`` (poll it with ``executor.poll(handle)``)."""
        ready = data.get("ready_at")
        side = data.get("sidecar_handle")
        return cls(
            plan=EnginePlan.from_json(data["plan"]),
            handle=DetachedHandle.from_json(data["handle"]),
            executor=executor,
            peer_executors=dict(peer_executors or {}),
            started_at=float(data.get("started_at") or 0.0),
            ready_at=float(ready) if ready is not None else None,
            sidecar_handle=DetachedHandle.from_json(side) if side else None,
        )


@dataclass(frozen=True)
class EvictResult:
    """How an instance's in-engine KV was dropped for a cold restore."""

    instance: EngineInstance  # the same instance, or the restarted one
    method: str  # "admin-endpoint" (emulator), "reset_prefix_cache", "restart", ...
    detail: str = ""
    steps: tuple[dict[str, object], ...] = ()  # each cold-restore step with counters before/after
    reset_verified: Optional[bool] = None  # a re-sent cached prompt found 0 prefix-cache hits


class Engine(Protocol):
    """One engine kind (contract). ``harness.engines.get_engine(kind)`` returns one."""

    kind: str

    def plan(
        self,
        node: Node,
        profile: Profile,
        arm: Union[Arm, str],
        instance_index: int = 0,
        platform: Optional[str] = None,
        *,
        workdir: str = DEFAULT_WORKDIR,
        python: str = "python3",
        peers: Sequence[Node] = (),
        agent_path: Optional[str] = None,
    ) -> EnginePlan: ...

    def start(
        self, executor: Executor, plan: EnginePlan, *, peer_executors: Optional[Mapping[str, Executor]] = None
    ) -> EngineInstance: ...

    def wait_ready(self, instance: EngineInstance, timeout: Optional[float] = None) -> float: ...

    def scrape_metrics(self, instance: EngineInstance) -> MetricsSnapshot: ...

    def evict(self, instance: EngineInstance) -> EvictResult: ...

    def collect_logs(self, instance: EngineInstance, dest_dir: Path) -> list[Path]: ...

    def stop(
        self, instance: EngineInstance, *, remove_kv_files: bool = False, grace: float = 30.0
    ) -> ProcessState: ...

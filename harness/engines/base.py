"""The engine vocabulary: a plan (exact command, environment, files), a running instance, the
errors, and the protocol every engine kind implements."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, Protocol, Union

from harness.errors import InfraError
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
            "started_at": self.started_at,
            "ready_at": self.ready_at,
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
        return cls(
            plan=EnginePlan.from_json(data["plan"]),
            handle=DetachedHandle.from_json(data["handle"]),
            executor=executor,
            peer_executors=dict(peer_executors or {}),
            started_at=float(data.get("started_at") or 0.0),
            ready_at=float(ready) if ready is not None else None,
        )


@dataclass(frozen=True)
class EvictResult:
    """How an instance's in-engine KV was dropped for a cold restore."""

    instance: EngineInstance  # the same instance, or the restarted one
    method: str  # "admin-endpoint" (emulator) or "restart"
    detail: str = ""


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

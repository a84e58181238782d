"""The inventory: which nodes a campaign uses, how to reach them, and what they should contain."""

from __future__ import annotations

import getpass
import re
from typing import Any, Literal, Optional

from pydantic import Field, SecretStr, field_validator, model_validator

from harness.config.common import Bandwidth, BitRate, Bytes, Duration, StrictModel
from harness.config.paths import NodePath, OptionalNodePath
from harness.platforms import PLATFORMS


def _platform_schema(schema: dict[str, Any]) -> None:
    schema["enum"] = list(PLATFORMS)


Role = Literal["server", "client", "storage"]
StorageKind = Literal["local-nvme", "nvmeof-raid", "nfs", "tmpfs", "memory", "other"]
RaidLevel = Literal["raid0", "raid1", "raid5", "raid6", "raid10", "none"]


class AcceleratorSpec(StrictModel):
    """Accelerators a node is expected to carry (checked in G1)."""

    model: str = Field(description="Product name as the vendor tool reports it, e.g. 'MI308X', 'Ascend910B3'")
    count: int = Field(ge=0, description="Number of devices (cards or NPUs) on the node")
    memory: Optional[Bytes] = Field(default=None, description="Memory per device, e.g. '192 GB'")


class ProvisionedRate(StrictModel):
    """The rates a storage target is sold at (a cloud block volume, an array with QoS)."""

    read: Optional[Bandwidth] = Field(default=None, gt=0, description="Declared read rate, e.g. '150 MB/s'")
    write: Optional[Bandwidth] = Field(default=None, gt=0, description="Declared write rate, e.g. '100 MB/s'")

    @model_validator(mode="after")
    def _some_rate(self) -> ProvisionedRate:
        if self.read is None and self.write is None:
            raise ValueError("provisioned needs a read or a write rate (e.g. {read: 150 MB/s})")
        return self


Enforcement = Literal["blk-throttle"]


class StorageTarget(StrictModel):
    """A storage tier on a node: where fio probes run and where LMCache's disk tier can live."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
                      description="Name the profile's arms use to refer to it (letters, digits, . _ -)")
    path: NodePath = Field(min_length=1, description="Mount point or directory on the node, e.g. /mnt/fx100 "
                          "(absolute and normalised)")
    kind: StorageKind = Field(default="other", description="What the tier is")
    device: Optional[str] = Field(default=None, description="Block device behind it (e.g. /dev/md0)")
    capacity: Optional[Bytes] = Field(default=None, description="Expected capacity, e.g. '14 TB'")
    drives: Optional[int] = Field(default=None, ge=0, description="Expected number of NVMe drives")
    drive_models: list[str] = Field(default_factory=list, description="Expected drive model names")
    raid: Optional[RaidLevel] = Field(default=None, description="Expected RAID level")
    raid_members: list[str] = Field(default_factory=list, description="Expected RAID member devices")
    allow_destructive: bool = Field(
        default=False, description="Allow raw-device writes (fio on the device itself). Off by default."
    )
    min_free: Optional[Bytes] = Field(default=None, description="Refuse probes when less than this is free")
    cache_size: Optional[Bytes] = Field(default=None, description="Cache in front of the media (array "
                                        "controller, host page cache of a VM disk): read probes use a working "
                                        "set of at least twice this size")
    provisioned: Optional[ProvisionedRate] = Field(
        default=None, description="Rates the target is provisioned at; G1 compares the measured read with the "
        "declared one (a volume delivering much less is a FAIL)")
    enforce: Optional[Enforcement] = Field(
        default=None, description="Who enforces the provisioned rates: 'blk-throttle' makes kvgate cap them "
        "itself in a cgroup of its own on the node (root and an io controller needed, else the run is refused)")

    @model_validator(mode="after")
    def _enforce_needs_rate(self) -> StorageTarget:
        if self.enforce is not None and self.provisioned is None:
            raise ValueError(f"enforce: {self.enforce} needs the rates it enforces: add provisioned: {{read: ...}}")
        return self


class NetworkSpec(StrictModel):
    """A network interface a node is expected to have (storage fabric, RoCE)."""

    interface: str = Field(description="Interface name, e.g. ens1f0")
    speed: Optional[BitRate] = Field(default=None, description="Expected link speed, e.g. '200 Gb/s'")
    roce: Optional[Literal["v1", "v2"]] = Field(default=None, description="Expected RoCE version")
    rdma_device: Optional[str] = Field(default=None, description="RDMA device name, e.g. mlx5_0")


Connection = Literal["ssh", "local", "ray"]
_RAY_ADDRESS = r"^(auto|(ray://)?[A-Za-z0-9._\[\]:-]+:[0-9]{1,5})$"
_RAY_NAME = r"^[A-Za-z0-9][A-Za-z0-9._:/-]*$"


class RaySettings(StrictModel):
    """A node reached through a Ray cluster (``connection: ray``): the cluster's address, and which
    Ray node is this inventory node. Set ``address`` once under ``defaults.ray``; each node names
    its Ray node by ``node_ip`` (the default: the node's ``host``), ``node_id`` or ``resource`` (a
    custom resource the operator declared with ``ray start --resources='{"NAME": 1}'``)."""

    address: Optional[str] = Field(default=None, pattern=_RAY_ADDRESS,
                                   description="The cluster's GCS address (host:port, ray://host:port "
                                   "for Ray Client, or auto)", examples=["10.0.0.1:6379"])
    namespace: Optional[str] = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
                                     description="Ray namespace of kvgate's node actors (kvgate)")
    node_ip: Optional[str] = Field(default=None, pattern=r"^[0-9A-Fa-f.:]+$",
                                   description="The Ray node with this IP address (default: the node's host)")
    node_id: Optional[str] = Field(default=None, pattern=r"^[0-9a-f]{8,64}$",
                                   description="The Ray node with this id (hex, as `ray list nodes` shows)")
    resource: Optional[str] = Field(default=None, pattern=_RAY_NAME,
                                    description="The Ray node that declares this custom resource")

    @model_validator(mode="after")
    def _one_mapping(self) -> RaySettings:
        given = [k for k in ("node_ip", "node_id", "resource") if getattr(self, k) is not None]
        if len(given) > 1:
            raise ValueError(f"name the Ray node one way only, not by {' and '.join(given)}")
        return self

    def mapping(self) -> tuple[str, str]:
        """How the Ray node is named: ("resource" | "node_id" | "node_ip", value)."""
        for key in ("resource", "node_id", "node_ip"):
            value = getattr(self, key)
            if value is not None:
                return key, str(value)
        raise ValueError("this Ray node mapping names no Ray node")


class ConnectionSettings(StrictModel):
    """How to reach a node; every field may be set once under ``defaults`` and per node."""

    user: Optional[str] = Field(default=None, description="SSH user")
    port: Optional[int] = Field(default=None, ge=1, le=65535, description="SSH port (22)")
    identity_file: Optional[str] = Field(default=None, description="Private key file; '~' is expanded")
    use_agent: Optional[bool] = Field(default=None, description="Also try keys from the SSH agent")
    passphrase: Optional[SecretStr] = Field(default=None, description="Key passphrase (prefer _env/_file)")
    passphrase_env: Optional[str] = Field(default=None, description="Environment variable holding the passphrase")
    passphrase_file: Optional[str] = Field(default=None, description="File holding the passphrase")
    known_hosts: Optional[str] = Field(default=None, description="known_hosts file used to verify host keys")
    accept_new_host_keys: Optional[bool] = Field(
        default=None,
        description="Trust-on-first-use: accept and record an unknown host key. Off by default; a "
        "changed key is always refused.",
    )
    connect_timeout: Optional[Duration] = Field(default=None, description="TCP connect and banner timeout")
    command_timeout: Optional[Duration] = Field(default=None, description="Default timeout per command")
    keepalive: Optional[Duration] = Field(default=None, description="Interval of the liveness check")
    python: Optional[str] = Field(default=None, description="Python interpreter on the node (python3)")
    workdir: OptionalNodePath = Field(default=None, description="Scratch directory on the node (absolute; created 0700 "
                                      "and refused when another user owns it or a parent is unsafe)")


class Defaults(ConnectionSettings):
    """Values every node inherits unless it sets its own."""

    connection: Optional[Connection] = Field(default=None, description="How nodes that name none are "
                                             "reached: ssh (the default), local or ray")
    ray: Optional[RaySettings] = Field(default=None, description="The Ray cluster of `connection: ray` "
                                       "nodes (address, namespace)")

    @field_validator("ray")
    @classmethod
    def _no_shared_mapping(cls, v: Optional[RaySettings]) -> Optional[RaySettings]:
        if v is not None and (v.node_id is not None or v.resource is not None or v.node_ip is not None):
            raise ValueError("node_ip, node_id and resource name one node's Ray node: set them per node")
        return v


CONNECTION_DEFAULTS: dict[str, object] = {
    "user": None,
    "port": 22,
    "identity_file": None,
    "use_agent": True,
    "known_hosts": "~/.ssh/known_hosts",
    "accept_new_host_keys": False,
    "connect_timeout": 10.0,
    "command_timeout": 600.0,
    "keepalive": 5.0,
    "python": "python3",
    "workdir": None,  # per user: /var/tmp/kvgate-<user> (see Inventory.setting)
}


def default_workdir(user: Optional[str]) -> str:
    """The node workdir when the inventory names none: one per SSH user, so two users never share
    one, and kvgate refuses it when someone else created it first (never a shared /tmp/kvgate)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", user or getpass.getuser()) or "user"
    return f"/var/tmp/kvgate-{name}"


class Node(ConnectionSettings):
    """One machine of the cluster."""

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", description="Unique node name")
    host: str = Field(min_length=1, description="Address or DNS name")
    connection: Connection = Field(default="ssh", description="`local` runs on this machine; `ray` runs "
                                   "in a kvgate actor on the node's Ray node (see `ray`); default: "
                                   "`defaults.connection`, else ssh")
    ray: Optional[RaySettings] = Field(default=None, description="With `connection: ray`: which Ray node "
                                       "this node is (node_ip, node_id or resource); address and "
                                       "namespace override defaults.ray")
    jump: Optional[str] = Field(default=None, description="Name of the node to jump through (ProxyJump)")
    roles: list[Role] = Field(default_factory=lambda: ["server", "client"],  # type: ignore[arg-type]
                              description="What the node does")
    platform: str = Field(default="cpu", json_schema_extra=_platform_schema,
                          description="Accelerator platform (one of harness/platforms: mi308x, ascend910b, cuda, cpu)")
    accelerators: Optional[AcceleratorSpec] = Field(default=None, description="Expected accelerators")
    storage: list[StorageTarget] = Field(default_factory=list, description="Storage targets on this node")
    network: list[NetworkSpec] = Field(default_factory=list, description="Expected network interfaces")
    software: dict[str, str] = Field(
        default_factory=dict,
        description="Expected software versions (name -> version or '*' for present), e.g. vllm: 0.20.1",
    )

    @field_validator("platform")
    @classmethod
    def _known_platform(cls, v: str) -> str:
        if v not in PLATFORMS:
            raise ValueError(f"unknown platform {v!r}; expected one of: {', '.join(PLATFORMS)}")
        return v

    @field_validator("storage")
    @classmethod
    def _unique_targets(cls, v: list[StorageTarget]) -> list[StorageTarget]:
        seen: set[str] = set()
        for t in v:
            if t.name in seen:
                raise ValueError(f"storage target name {t.name!r} is used twice on this node")
            seen.add(t.name)
        return v

    def target(self, name: str) -> Optional[StorageTarget]:
        return next((t for t in self.storage if t.name == name), None)


class Inventory(StrictModel):
    """A cluster: the nodes of one campaign."""

    cluster: str = Field(min_length=1, description="Cluster name, shown in reports")
    defaults: Defaults = Field(default_factory=Defaults, description="Connection values every node inherits")
    nodes: list[Node] = Field(min_length=1, description="The nodes")
    allowed_signers: Optional[str] = Field(
        default=None, description="OpenSSH allowed_signers file (relative to this file) binding each key to "
        "<signer-id>@<role>: G3 uses a G2 baseline only when it is signed by every role with keys it trusts "
        "(--allowed-signers overrides it)")

    @model_validator(mode="after")
    def _unique_nodes(self) -> Inventory:
        seen: set[str] = set()
        for n in self.nodes:
            if n.name in seen:
                raise ValueError(f"node name {n.name!r} is used twice")
            seen.add(n.name)
        return self

    @model_validator(mode="after")
    def _default_connection(self) -> Inventory:
        # A node that names no connection takes the defaults' one (the field's own default is ssh).
        if self.defaults.connection is not None:
            for n in self.nodes:
                if "connection" not in n.model_fields_set:
                    n.connection = self.defaults.connection
        return self

    def ray_settings(self, node: Node) -> RaySettings:
        """The Ray settings of a ``connection: ray`` node: its own over ``defaults.ray``, with the
        node's host as its Ray node IP when it names no Ray node."""
        merged: dict[str, object] = {}
        for part in (self.defaults.ray, node.ray):
            if part is not None:
                merged.update({k: v for k, v in part.model_dump().items() if v is not None})
        if not any(k in merged for k in ("node_ip", "node_id", "resource")):
            merged["node_ip"] = node.host  # may be a DNS name: resolved when the cluster is asked
            return RaySettings.model_construct(**merged)  # type: ignore[arg-type]
        return RaySettings.model_validate(merged)

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(f"no node named {name!r}; known: {', '.join(n.name for n in self.nodes)}")

    def setting(self, node: Node, key: str) -> object:
        """A connection setting of ``node``: its own, else the inventory default, else kvgate's."""
        value = getattr(node, key)
        if value is None:
            value = getattr(self.defaults, key)
        if value is None:
            value = CONNECTION_DEFAULTS.get(key)
        if value is None and key == "workdir":
            user = self.setting(node, "user")
            value = default_workdir(user if isinstance(user, str) and node.connection == "ssh" else None)
        return value

    def nodes_with_role(self, role: str) -> list[Node]:
        return [n for n in self.nodes if role in n.roles]

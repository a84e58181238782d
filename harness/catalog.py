"""The metrics kvgate measures: the contract between the pipelines that produce measured results
and the gate files whose checks read them.

A metric path is dotted; a ``*`` segment stands for each node, storage target or concurrency
(``c8``, ``c16``...). A check on a path with ``*`` is evaluated for every match and passes only
when every match passes. ``validate`` refuses a gate check whose metric no pipeline produces.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.units import UnitKind


@dataclass(frozen=True)
class MetricInfo:
    path: str
    kind: UnitKind
    gate: str
    produced_by: str
    description: str
    sampled: bool = False  # True: the measured value carries samples, so an interval can be computed


_METRICS: list[MetricInfo] = [
    # G1: arrival acceptance. Booleans compare node facts with the inventory's expectations.
    MetricInfo("nodes.*.reachable", UnitKind.BOOL, "G1", "remote", "the node answered over its executor"),
    MetricInfo("nodes.*.accelerators.match", UnitKind.BOOL, "G1", "facts",
               "accelerator model, count and memory as in the inventory"),
    MetricInfo("nodes.*.storage.*.drives.match", UnitKind.BOOL, "G1", "facts", "NVMe drive count and models"),
    MetricInfo("nodes.*.storage.*.raid.match", UnitKind.BOOL, "G1", "facts", "RAID level and members"),
    MetricInfo("nodes.*.storage.*.capacity.match", UnitKind.BOOL, "G1", "facts", "capacity within 5%"),
    MetricInfo("nodes.*.storage.*.mounted", UnitKind.BOOL, "G1", "facts", "target path exists and is writable"),
    MetricInfo("nodes.*.network.*.speed.match", UnitKind.BOOL, "G1", "facts", "link speed"),
    MetricInfo("nodes.*.network.*.roce.match", UnitKind.BOOL, "G1", "facts", "RoCE version of the RDMA GIDs"),
    MetricInfo("nodes.*.software.match", UnitKind.BOOL, "G1", "facts", "expected software versions present"),
    MetricInfo("nodes.*.storage.*.fio.seq_read_bw", UnitKind.BANDWIDTH, "G1", "probes.fio",
               "sequential read bandwidth, 1 MiB, direct I/O", sampled=True),
    MetricInfo("nodes.*.storage.*.fio.seq_write_bw", UnitKind.BANDWIDTH, "G1", "probes.fio",
               "sequential write bandwidth, 1 MiB, direct I/O", sampled=True),
    MetricInfo("nodes.*.storage.*.fio.read_of_provisioned", UnitKind.PERCENT, "G1", "probes.fio",
               "sequential read as a share of the target's declared (provisioned) read rate", sampled=True),
    # G2: single-node baseline.
    MetricInfo("baseline.complete", UnitKind.BOOL, "G2", "pipeline.G2",
               "every sweep point and repetition was measured"),
    MetricInfo("baseline.failed_ratio", UnitKind.PERCENT, "G2", "load", "failed requests / all requests"),
    MetricInfo("baseline.ttft_p50_cv.*", UnitKind.PERCENT, "G2", "load",
               "coefficient of variation of TTFT p50 across repetitions, per concurrency"),
    MetricInfo("baseline.throughput_cv.*", UnitKind.PERCENT, "G2", "load",
               "coefficient of variation of output throughput across repetitions, per concurrency"),
    MetricInfo("baseline.fio.seq_read_bw", UnitKind.BANDWIDTH, "G2", "probes.fio", "baseline target read bandwidth",
               sampled=True),
    MetricInfo("baseline.checkpoint.write_bw", UnitKind.BANDWIDTH, "G2", "probes.checkpoint",
               "sustained checkpoint write bandwidth", sampled=True),
    MetricInfo("baseline.modelload.read_bw", UnitKind.BANDWIDTH, "G2", "probes.modelload",
               "model load bandwidth (cold reads in rounds)", sampled=True),
    # Cold-restore validity from the engine's counters (harness.pipelines.shared.coldrestore).
    MetricInfo("baseline.cold_restore.offload_hit_tokens.*", UnitKind.COUNT, "G2", "pipeline.G2",
               "prompt tokens served by the KV offload tiers during the measurement (lowest repetition)"),
    MetricInfo("baseline.cold_restore.offload_hit_vs_expected.*", UnitKind.RATIO, "G2", "pipeline.G2",
               "offload-tier hit share / the share the workload should hit (lowest repetition)"),
    MetricInfo("baseline.cold_restore.engine_prefix_hit_excess.*", UnitKind.COUNT, "G2", "pipeline.G2",
               "engine prefix-cache hit tokens beyond what measured requests share (highest repetition)"),
    MetricInfo("baseline.cold_restore.memory_tier_hit_requests.*", UnitKind.COUNT, "G2", "pipeline.G2",
               "measured requests served from a host-memory tier (CPU tier, LMCache L1), highest repetition"),
    MetricInfo("baseline.cold_restore.restore_bandwidth_ratio.*", UnitKind.RATIO, "G2", "pipeline.G2",
               "restored KV per request / TTFT p50 over the upper end of what the tier's own chunk files "
               "deliver with O_DIRECT (highest repetition)"),
    MetricInfo("candidate.cold_restore.memory_tier_hit_requests.*", UnitKind.COUNT, "G3", "pipeline.G3",
               "measured requests served from a host-memory tier (CPU tier, LMCache L1), highest repetition"),
    MetricInfo("candidate.cold_restore.restore_bandwidth_ratio.*", UnitKind.RATIO, "G3", "pipeline.G3",
               "restored KV per request / TTFT p50 over the upper end of what the tier's own chunk files "
               "deliver with O_DIRECT (highest repetition)"),
    MetricInfo("candidate.cold_restore.offload_hit_tokens.*", UnitKind.COUNT, "G3", "pipeline.G3",
               "prompt tokens served by the KV offload tiers during the measurement (lowest repetition)"),
    MetricInfo("candidate.cold_restore.offload_hit_vs_expected.*", UnitKind.RATIO, "G3", "pipeline.G3",
               "offload-tier hit share / the share the workload should hit (lowest repetition)"),
    MetricInfo("candidate.cold_restore.engine_prefix_hit_excess.*", UnitKind.COUNT, "G3", "pipeline.G3",
               "engine prefix-cache hit tokens beyond what measured requests share (highest repetition)"),
    MetricInfo("recompute.cold_restore.offload_hit_tokens.*", UnitKind.COUNT, "G3", "pipeline.G3",
               "offload-tier hit tokens of the recompute arm (must be 0)"),
    MetricInfo("compare.write_overhead.*", UnitKind.RATIO, "G3", "pipeline.G3",
               "candidate populate pass duration / the recompute arm's first pass (the write path's cost)"),
    MetricInfo("compare.output_divergence.*", UnitKind.PERCENT, "G3", "pipeline.G3",
               "share of the measured greedy outputs (every request, pooled over repetitions) that differ from "
               "the reference arm's over the first compared_tokens tokens (gate file, 16 by default)",
               sampled=True),
    # G3: candidate vs baseline.
    MetricInfo("compare.ttft_p50_reduction.*", UnitKind.PERCENT, "G3", "pipeline.G3",
               "1 - candidate TTFT p50 / baseline TTFT p50, per concurrency", sampled=True),
    MetricInfo("compare.throughput_gain_best", UnitKind.PERCENT, "G3", "pipeline.G3",
               "candidate / baseline output throughput - 1 at the candidate's best point", sampled=True),
    MetricInfo("compare.throughput_gain.*", UnitKind.PERCENT, "G3", "pipeline.G3",
               "candidate / baseline output throughput - 1, per concurrency", sampled=True),
    MetricInfo("compare.capacity_gain_at_slo", UnitKind.PERCENT, "G3", "pipeline.G3",
               "candidate / baseline output throughput - 1, each at its highest concurrency meeting load.slo",
               sampled=True),
    MetricInfo("compare.capacity_gain", UnitKind.PERCENT, "G3", "pipeline.G3",
               "candidate peak / baseline peak output throughput - 1, each arm at its own best concurrency",
               sampled=True),
    MetricInfo("compare.recompute_speedup.*", UnitKind.RATIO, "G3", "pipeline.G3",
               "recompute TTFT p50 / candidate TTFT p50, per concurrency", sampled=True),
    MetricInfo("candidate.fio.seq_read_bw", UnitKind.BANDWIDTH, "G3", "probes.fio",
               "candidate target read bandwidth", sampled=True),
    MetricInfo("candidate.failed_ratio", UnitKind.PERCENT, "G3", "load", "failed requests in the candidate arm"),
    # G2/G3: the estimator beside the measurement (harness/estimate); * is <arm>-c<concurrency>.
    MetricInfo("estimate.ttft_p50_factor.*", UnitKind.RATIO, "G3", "estimate",
               "max(measured / predicted, predicted / measured) TTFT p50, per arm and concurrency"),
    # G4: 72-hour stability.
    MetricInfo("soak.duration", UnitKind.DURATION, "G4", "pipeline.G4", "time under load"),
    MetricInfo("soak.failed_ratio", UnitKind.PERCENT, "G4", "load", "failed requests / all requests"),
    MetricInfo("soak.load_level", UnitKind.PERCENT, "G4", "load",
               "mean requests in flight / soak.concurrency (closed loop) or requests sent per second / "
               "soak.request_rate (open loop), after the warm-up"),
    MetricInfo("soak.engine_restarts", UnitKind.COUNT, "G4", "engines", "engine crashes or restarts"),
    MetricInfo("soak.ttft_p50_drift", UnitKind.PERCENT, "G4", "load",
               "TTFT p50 of the last third of the windows / of the first third - 1 (each third: the mean of its "
               "5 batches' median window TTFT p50)", sampled=True),
    MetricInfo("soak.throughput_drift", UnitKind.PERCENT, "G4", "load",
               "1 - throughput of the last third of the windows / of the first third (each third: the mean of "
               "its 5 batches' mean window throughput)", sampled=True),
    MetricInfo("soak.instance_drift.*.ttft_p50", UnitKind.PERCENT, "G4", "load",
               "per engine instance: its TTFT p50 drift from its own per-window figures", sampled=True),
    MetricInfo("soak.instance_drift.*.throughput", UnitKind.PERCENT, "G4", "load",
               "per engine instance: its throughput drift from its own per-window figures", sampled=True),
    MetricInfo("soak.read_bw_retention", UnitKind.PERCENT, "G4", "probes.fio",
               "read bandwidth after the soak / before", sampled=True),
    MetricInfo("soak.storage_errors", UnitKind.COUNT, "G4", "facts", "storage errors in the kernel log"),
    MetricInfo("soak.network_errors", UnitKind.COUNT, "G4", "facts", "network errors in the kernel log"),
    MetricInfo("soak.accelerator_errors", UnitKind.COUNT, "G4", "facts", "accelerator faults in the kernel log"),
    MetricInfo("soak.media_errors_delta", UnitKind.COUNT, "G4", "facts",
               "NVMe media errors at the end - at the start (nvme smart-log), summed over the drives"),
    MetricInfo("soak.raid_degraded", UnitKind.COUNT, "G4", "facts", "health samples with a degraded md array"),
    MetricInfo("soak.probe_identical", UnitKind.BOOL, "G4", "pipeline.G4",
               "greedy probe outputs identical at the soak's start and end"),
]

METRICS: dict[str, MetricInfo] = {m.path: m for m in _METRICS}


def metric_info(path: str) -> MetricInfo | None:
    """The catalog entry for ``path`` (a pattern with ``*`` or a concrete path), or None."""
    if path in METRICS:
        return METRICS[path]
    parts = path.split(".")
    for m in _METRICS:
        pat = m.path.split(".")
        if len(pat) == len(parts) and all(p == "*" or p == q for p, q in zip(pat, parts)):
            return m
    return None

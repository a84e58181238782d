"""The estimator: what a KV storage tier should deliver, before and beside every measurement.

Pure functions over plain inputs (``docs/estimator.md`` derives every formula):

    from harness.estimate import geometry_from_config, kv_sizes, prefill_flops, Compute
    g = geometry_from_config(json.load(open("config.json")))
    kv_sizes(g, request_tokens=65536, chunk_size=256, tp=8).per_request
    break_even_bandwidth(g, Compute(flops_per_s=8 * 312e12), 8192)

``loader`` (reading config.json, choosing a profile's geometry) is the only module doing I/O.
"""

from harness.estimate.calibration import Calibration, calibrate_curve, load_calibration
from harness.estimate.geometry import (
    DTYPE_BYTES,
    KVSizes,
    ModelGeometry,
    attention_pairs,
    dtype_bytes,
    kv_sizes,
    prefill_flops,
)
from harness.estimate.hardware import ACCELERATORS, Accelerator, find_accelerator
from harness.estimate.modelconfig import ModelConfigError, geometry_from_config
from harness.estimate.plan import Estimate, EstimateInputs, capacity_plan, estimate_profile
from harness.estimate.presets import PRESET_CONFIGS, preset_geometry
from harness.estimate.timing import (
    Compute,
    Engine,
    PointPrediction,
    Tier,
    Workload,
    bandwidth_for_reduction,
    break_even_bandwidth,
    closed_mva,
    predict_point,
)

__all__ = [
    "ACCELERATORS", "DTYPE_BYTES", "Accelerator", "Calibration", "Compute", "Engine", "Estimate", "EstimateInputs",
    "KVSizes", "ModelConfigError", "ModelGeometry", "PRESET_CONFIGS", "PointPrediction", "Tier", "Workload",
    "attention_pairs", "bandwidth_for_reduction", "break_even_bandwidth", "calibrate_curve", "capacity_plan",
    "closed_mva", "dtype_bytes", "estimate_profile", "find_accelerator", "geometry_from_config", "kv_sizes",
    "load_calibration", "predict_point", "prefill_flops", "preset_geometry",
]

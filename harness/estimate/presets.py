"""Model presets for profiles whose config.json is not at hand: the published config.json fields
the estimator reads, copied by hand from each model's Hugging Face repository (named in
``source``). ``tests/estimate`` checks that each preset's KV bytes per token equals the profile
preset of the same name (``harness/config/profile.py``)."""

from __future__ import annotations

from typing import Any

from harness.estimate.geometry import ModelGeometry
from harness.estimate.modelconfig import geometry_from_config

PRESET_CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    "moe-480b": ("Qwen/Qwen3-Coder-480B-A35B-Instruct config.json", {
        "model_type": "qwen3_moe", "hidden_size": 6144, "intermediate_size": 8192, "num_hidden_layers": 62,
        "num_attention_heads": 96, "num_key_value_heads": 8, "head_dim": 128, "num_experts": 160,
        "num_experts_per_tok": 8, "moe_intermediate_size": 2560, "decoder_sparse_step": 1, "mlp_only_layers": [],
        "vocab_size": 151936, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "sliding_window": None, "use_sliding_window": False}),
    # the FP8 checkpoint the seeds' TP4x2 runs served: the same model, weights in 1 byte (its
    # quantization_config); the KV cache keeps bf16
    "moe-480b-fp8": ("Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8 config.json", {
        "model_type": "qwen3_moe", "hidden_size": 6144, "intermediate_size": 8192, "num_hidden_layers": 62,
        "num_attention_heads": 96, "num_key_value_heads": 8, "head_dim": 128, "num_experts": 160,
        "num_experts_per_tok": 8, "moe_intermediate_size": 2560, "decoder_sparse_step": 1, "mlp_only_layers": [],
        "vocab_size": 151936, "tie_word_embeddings": False, "torch_dtype": "bfloat16",
        "sliding_window": None, "use_sliding_window": False,
        "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                "weight_block_size": [128, 128]}}),
    "deepseek-r1-distill-qwen-32b": ("deepseek-ai/DeepSeek-R1-Distill-Qwen-32B config.json (Qwen2.5-32B)", {
        "model_type": "qwen2", "hidden_size": 5120, "intermediate_size": 27648, "num_hidden_layers": 64,
        "num_attention_heads": 40, "num_key_value_heads": 8, "vocab_size": 152064, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "sliding_window": 131072, "use_sliding_window": False}),
    "deepseek-r1-distill-llama-70b": ("deepseek-ai/DeepSeek-R1-Distill-Llama-70B config.json (Llama-3.3-70B)", {
        "model_type": "llama", "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80,
        "num_attention_heads": 64, "num_key_value_heads": 8, "vocab_size": 128256, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16"}),
    "llama-3-8b": ("meta-llama/Meta-Llama-3-8B config.json", {
        "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256, "tie_word_embeddings": False,
        "torch_dtype": "bfloat16"}),
    "tiny": ("kvgate's emulator-only geometry (no real model): 4 layers x 2 KV heads x 64", {
        "model_type": "llama", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 1024,
        "tie_word_embeddings": True, "torch_dtype": "bfloat16"}),
}


def preset_geometry(name: str, *, kv_cache_dtype: str = "auto") -> ModelGeometry:
    """The geometry of a named preset; KeyError lists the known ones."""
    if name not in PRESET_CONFIGS:
        raise KeyError(f"no estimator preset {name!r}; known: {', '.join(PRESET_CONFIGS)}")
    source, cfg = PRESET_CONFIGS[name]
    return geometry_from_config(cfg, name=name, kv_cache_dtype=kv_cache_dtype, source=source)

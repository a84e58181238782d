"""A model's KV geometry and active parameters from its Hugging Face ``config.json`` fields.

Pure: takes the parsed JSON object (``loader.read_model_config`` reads the file). Families:

* dense and GQA (Llama, Qwen2/2.5/3, Mistral, Gemma): ``num_hidden_layers``,
  ``num_attention_heads``, ``num_key_value_heads`` (default: the attention heads, i.e. MHA),
  ``head_dim`` (default ``hidden_size / num_attention_heads``), ``intermediate_size``;
* MoE with GQA (Qwen2-MoE/Qwen3-MoE: ``num_experts``, ``num_experts_per_tok``,
  ``moe_intermediate_size``, ``shared_expert_intermediate_size``, ``decoder_sparse_step``,
  ``mlp_only_layers``; Mixtral: ``num_local_experts``);
* MLA (DeepSeek-V2/V3/R1): ``kv_lora_rank``, ``qk_rope_head_dim``, ``qk_nope_head_dim``,
  ``v_head_dim``, ``q_lora_rank``, ``n_routed_experts``, ``n_shared_experts``,
  ``first_k_dense_replace``, ``moe_layer_freq``;
* sliding windows: ``layer_types`` (``sliding_attention`` / ``full_attention``), Gemma-2's
  alternation (even layers local), Gemma-3's ``sliding_window_pattern``, and a plain
  ``sliding_window`` on every layer (Mistral v0.1) unless ``use_sliding_window`` is false
  (Qwen2 configs carry a window they do not use).

Multimodal configs nest the language model under ``text_config``; it is used when present.
Parameter counts ignore norms and biases (well under 0.1% of these models).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional

from harness.estimate.geometry import ModelGeometry, dtype_bytes


class ModelConfigError(ValueError):
    """A config.json that lacks a field the estimator needs, or has one of the wrong type."""


def _int(cfg: Mapping[str, Any], key: str, default: Optional[int] = None) -> int:
    v = cfg.get(key, default)
    if v is None:
        raise ModelConfigError(f"config.json: field {key!r} is missing (an integer is needed)")
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ModelConfigError(f"config.json: field {key!r} is {v!r}; expected a non-negative integer")
    return v


def _opt_int(cfg: Mapping[str, Any], key: str) -> Optional[int]:
    return _int(cfg, key) if cfg.get(key) is not None else None


def _windows(cfg: Mapping[str, Any], layers: int) -> tuple[Optional[int], ...]:
    window = _opt_int(cfg, "sliding_window")
    if window is None or cfg.get("use_sliding_window") is False:
        return ()
    types = cfg.get("layer_types")
    if isinstance(types, list):
        if len(types) != layers:
            raise ModelConfigError(f"config.json: layer_types has {len(types)} entries for {layers} layers")
        return tuple(window if t == "sliding_attention" else None for t in types)
    model_type = str(cfg.get("model_type", ""))
    if model_type == "gemma2":
        return tuple(window if i % 2 == 0 else None for i in range(layers))
    pattern = cfg.get("sliding_window_pattern")
    if isinstance(pattern, int) and not isinstance(pattern, bool) and pattern > 0:
        return tuple(None if (i + 1) % pattern == 0 else window for i in range(layers))
    return tuple(window for _ in range(layers))


def _moe_layer(cfg: Mapping[str, Any], layer: int, mla: bool) -> bool:
    if mla:
        first_dense = _int(cfg, "first_k_dense_replace", 0)
        freq = _int(cfg, "moe_layer_freq", 1) or 1
        return layer >= first_dense and layer % freq == 0
    only_mlp = cfg.get("mlp_only_layers") or []
    step = _int(cfg, "decoder_sparse_step", 1) or 1
    return layer not in only_mlp and (layer + 1) % step == 0


def geometry_from_config(cfg: Mapping[str, Any], *, name: str = "", kv_cache_dtype: str = "auto",
                         source: str = "") -> ModelGeometry:
    """The ``ModelGeometry`` of a parsed config.json. ``kv_cache_dtype`` is vLLM's
    ``--kv-cache-dtype``: ``auto`` keeps the model dtype (``torch_dtype``/``dtype``)."""
    if isinstance(cfg.get("text_config"), Mapping):
        cfg = cfg["text_config"]
    layers = _int(cfg, "num_hidden_layers")
    hidden = _int(cfg, "hidden_size")
    heads = _int(cfg, "num_attention_heads")
    if layers < 1 or hidden < 1 or heads < 1:
        raise ModelConfigError("config.json: num_hidden_layers, hidden_size and num_attention_heads must be >= 1")
    weight_bytes, kv_bytes = _dtype_bytes(cfg, kv_cache_dtype)
    vocab = _int(cfg, "vocab_size", 0)
    mla = cfg.get("kv_lora_rank") is not None
    attn = _attention(cfg, hidden, heads, mla)
    active_layers, total_layers = _layer_params(cfg, layers, hidden, attn.params, mla)
    embed = vocab * hidden * (1 if cfg.get("tie_word_embeddings") else 2)
    return ModelGeometry(
        name=name or str(cfg.get("_name_or_path") or cfg.get("model_type") or "model"),
        layers=layers,
        attention="mla" if mla else "standard",
        kv_heads=attn.kv_heads,
        head_dim=attn.head_dim,
        kv_dtype_bytes=kv_bytes,
        kv_lora_rank=attn.kv_lora,
        qk_rope_head_dim=attn.rope,
        num_attention_heads=heads,
        qk_dim=attn.qk_dim,
        v_dim=attn.v_dim,
        layer_windows=_windows(cfg, layers),
        active_params=float(active_layers),
        total_params=float(total_layers + embed),
        weight_dtype_bytes=weight_bytes,
        source=source,
    )


def _dtype_bytes(cfg: Mapping[str, Any], kv_cache_dtype: str) -> tuple[int, int]:
    """(bytes per weight, bytes per KV element) as vLLM serves the model."""
    model_dtype = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
    try:
        # vLLM's dtype "auto" serves a float32 checkpoint in 16 bits (Gemma's in bfloat16)
        weight_bytes = min(2, dtype_bytes(model_dtype))
        kv_bytes = weight_bytes if kv_cache_dtype == "auto" else dtype_bytes(kv_cache_dtype)
    except ValueError as exc:
        raise ModelConfigError(f"config.json: {exc}") from None
    quant = cfg.get("quantization_config")
    if isinstance(quant, Mapping) and quant.get("quant_method") == "fp8":
        weight_bytes = 1  # fp8 weights; the KV cache keeps the activation dtype unless --kv-cache-dtype
    return weight_bytes, kv_bytes


@dataclass(frozen=True)
class _Attention:
    """A layer's attention: KV geometry, attention FLOP widths, parameters."""

    kv_lora: int
    rope: int
    kv_heads: int
    head_dim: int
    qk_dim: int
    v_dim: int
    params: int


def _attention(cfg: Mapping[str, Any], hidden: int, heads: int, mla: bool) -> _Attention:
    if mla:
        kv_lora = _int(cfg, "kv_lora_rank")
        rope = _int(cfg, "qk_rope_head_dim")
        nope = _int(cfg, "qk_nope_head_dim")
        v_dim = _int(cfg, "v_head_dim")
        q_lora = _opt_int(cfg, "q_lora_rank")
        qk_dim = nope + rope
        q_params = hidden * q_lora + q_lora * heads * qk_dim if q_lora else hidden * heads * qk_dim
        params = (q_params + hidden * (kv_lora + rope) + kv_lora * heads * (nope + v_dim)
                  + heads * v_dim * hidden)
        return _Attention(kv_lora, rope, 1, kv_lora + rope, qk_dim, v_dim, params)
    head_dim = _int(cfg, "head_dim", hidden // heads)
    kv_heads = _int(cfg, "num_key_value_heads", heads)
    params = hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim + heads * head_dim * hidden
    return _Attention(0, 0, kv_heads, head_dim, head_dim, head_dim, params)


def _layer_params(cfg: Mapping[str, Any], layers: int, hidden: int, attn_params: int, mla: bool) -> tuple[int, int]:
    """Parameters of all layers (active per token, and all): attention plus the MLP of each layer
    (dense, or routed experts with their router and shared experts)."""
    inter = _int(cfg, "intermediate_size", 0)
    experts = cfg.get("n_routed_experts") or cfg.get("num_experts") or cfg.get("num_local_experts") or 0
    if isinstance(experts, bool) or not isinstance(experts, int):
        raise ModelConfigError(f"config.json: expert count {experts!r}; expected an integer")
    active_layers = total_layers = 0
    for layer in range(layers):
        if experts and _moe_layer(cfg, layer, mla):
            k = _int(cfg, "num_experts_per_tok")
            moe_inter = _int(cfg, "moe_intermediate_size", inter)
            shared = 3 * hidden * (_int(cfg, "n_shared_experts", 0) * moe_inter
                                   + _int(cfg, "shared_expert_intermediate_size", 0))
            router = hidden * experts
            active_layers += attn_params + router + shared + k * 3 * hidden * moe_inter
            total_layers += attn_params + router + shared + experts * 3 * hidden * moe_inter
        else:
            dense = 3 * hidden * inter
            active_layers += attn_params + dense
            total_layers += attn_params + dense
    return active_layers, total_layers

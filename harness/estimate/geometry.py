"""KV-cache geometry: what one token's KV cache weighs, per layer kind.

Rules a reader must keep (derivations in ``docs/estimator.md``):

* Standard attention (MHA, GQA, MQA): a layer stores K and V for every KV head, so one token
  costs ``2 x kv_heads x head_dim x kv_dtype_bytes`` bytes per layer.
* MLA (DeepSeek-V2/V3/R1): a layer stores one compressed latent of ``kv_lora_rank`` plus the
  decoupled RoPE key of ``qk_rope_head_dim``, shared by all heads:
  ``(kv_lora_rank + qk_rope_head_dim) x kv_dtype_bytes`` per layer. No factor 2.
* Sliding-window layers keep only the last ``window`` tokens, so their share stops growing at
  ``window`` tokens of context; ``bytes_for_context`` accounts for that, ``bytes_per_token`` is the
  full-attention figure (every layer keeps every token), the one the papers publish.
* Per TP rank: standard attention splits KV heads across ranks (a rank holds
  ``max(1, kv_heads / tp)`` heads, so KV heads fewer than ranks are replicated); MLA's latent is
  not split by head, every rank holds all of it (vLLM replicates it).

Pure functions over plain values; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Optional

AttentionKind = Literal["standard", "mla"]

# Bytes per element of the KV-cache dtypes the engines accept (vLLM --kv-cache-dtype).
DTYPE_BYTES: dict[str, int] = {
    "float32": 4, "fp32": 4,
    "float16": 2, "fp16": 2, "half": 2,
    "bfloat16": 2, "bf16": 2,
    "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "float8_e4m3fn": 1, "int8": 1,
}


def dtype_bytes(name: str) -> int:
    """Bytes per element of a dtype name (``bfloat16``, ``fp8``...); ValueError names the known ones."""
    key = name.strip().lower()
    if key not in DTYPE_BYTES:
        raise ValueError(f"unknown dtype {name!r}; known: {', '.join(sorted(DTYPE_BYTES))}")
    return DTYPE_BYTES[key]


@dataclass(frozen=True)
class ModelGeometry:
    """The shape facts the estimator needs about a model.

    ``layer_windows`` gives, per layer, the sliding window in tokens or None for full attention;
    empty means every layer is full attention. Parameter counts are per token *active* figures
    (MoE: only the routed experts a token uses) without the embedding table, which a prefill reads
    but does not multiply through."""

    name: str
    layers: int
    attention: AttentionKind = "standard"
    kv_heads: int = 1
    head_dim: int = 128
    kv_dtype_bytes: int = 2
    # MLA only
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    # attention FLOPs: query heads and the widths of a score (q.k) and of a value
    num_attention_heads: int = 1
    qk_dim: int = 128
    v_dim: int = 128
    layer_windows: tuple[Optional[int], ...] = field(default_factory=tuple)
    active_params: Optional[float] = None  # non-embedding parameters one token passes through
    total_params: Optional[float] = None  # every parameter, embeddings included (for weights in HBM)
    weight_dtype_bytes: int = 2
    source: str = ""

    def __post_init__(self) -> None:
        if self.layers < 1:
            raise ValueError(f"{self.name}: layers must be >= 1, got {self.layers}")
        if self.layer_windows and len(self.layer_windows) != self.layers:
            raise ValueError(f"{self.name}: {len(self.layer_windows)} layer windows for {self.layers} layers")
        if self.attention == "mla" and self.kv_lora_rank <= 0:
            raise ValueError(f"{self.name}: an MLA model needs kv_lora_rank > 0")

    # --- per layer ------------------------------------------------------------------------------
    @property
    def bytes_per_token_per_layer(self) -> int:
        """KV bytes one token costs in one layer (B/token/layer)."""
        if self.attention == "mla":
            return (self.kv_lora_rank + self.qk_rope_head_dim) * self.kv_dtype_bytes
        return 2 * self.kv_heads * self.head_dim * self.kv_dtype_bytes

    def window(self, layer: int) -> Optional[int]:
        return self.layer_windows[layer] if self.layer_windows else None

    @property
    def sliding_layers(self) -> int:
        return sum(1 for w in self.layer_windows if w is not None)

    # --- per token ------------------------------------------------------------------------------
    @property
    def bytes_per_token(self) -> int:
        """KV bytes per token with every layer keeping every token (B/token)."""
        return self.layers * self.bytes_per_token_per_layer

    def bytes_for_context(self, tokens: int) -> int:
        """KV bytes one sequence of ``tokens`` holds, sliding-window layers capped at their window."""
        if tokens <= 0:
            return 0
        per_layer = self.bytes_per_token_per_layer
        total = 0
        for layer in range(self.layers):
            w = self.window(layer)
            total += per_layer * (tokens if w is None else min(tokens, w))
        return total

    def with_kv_dtype(self, kv_dtype_bytes: int) -> ModelGeometry:
        from dataclasses import replace

        return replace(self, kv_dtype_bytes=kv_dtype_bytes)

    # --- per tensor-parallel rank ---------------------------------------------------------------
    def rank_share(self, tp: int) -> float:
        """Fraction of a token's KV bytes one of ``tp`` ranks holds (replication included)."""
        if tp < 1:
            raise ValueError(f"tensor-parallel size must be >= 1, got {tp}")
        if self.attention == "mla":
            return 1.0
        heads_per_rank = max(1.0, self.kv_heads / tp)
        return heads_per_rank / self.kv_heads


@dataclass(frozen=True)
class KVSizes:
    """KV sizes for one request shape (bytes)."""

    per_token: int
    per_chunk: int
    chunk_size: int
    per_request: int
    request_tokens: int
    chunks_per_request: int
    per_rank_per_request: float
    tp: int


def kv_sizes(geom: ModelGeometry, *, request_tokens: int, chunk_size: int = 256, tp: int = 1) -> KVSizes:
    """Bytes per token, per LMCache chunk, per request and per TP rank for one request shape.

    A chunk is ``chunk_size`` full tokens (LMCache stores full chunks; a request's last partial
    chunk is only saved with ``save_unfull_chunk``), so ``chunks_per_request`` counts full chunks
    and ``per_request`` is the whole context (the part a tier can serve is the full chunks)."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    per_token = geom.bytes_per_token
    per_request = geom.bytes_for_context(request_tokens)
    return KVSizes(
        per_token=per_token,
        per_chunk=per_token * chunk_size,
        chunk_size=chunk_size,
        per_request=per_request,
        request_tokens=request_tokens,
        chunks_per_request=request_tokens // chunk_size,
        per_rank_per_request=per_request * geom.rank_share(tp),
        tp=tp,
    )


def attention_pairs(tokens: int, window: Optional[int], prefix: int = 0) -> float:
    """(query, key) pairs a causal prefill of ``tokens`` new tokens after ``prefix`` cached ones
    scores, with an optional sliding window (each query sees at most ``window`` keys)."""
    if tokens <= 0:
        return 0.0
    # query i (0-based, absolute position prefix+i) sees prefix+i+1 keys, capped at the window
    start, end = prefix + 1, prefix + tokens  # keys seen by the first and the last query
    if window is None or window >= end:
        return (start + end) * tokens / 2.0
    if window <= start:
        return float(window) * tokens
    ramp = window - start  # queries before the cap
    return (start + window - 1) * ramp / 2.0 + float(window) * (tokens - ramp)


def prefill_flops(geom: ModelGeometry, tokens: int, *, prefix: int = 0) -> float:
    """FLOPs of a prefill of ``tokens`` new tokens (after ``prefix`` cached ones).

    Linear part: 2 FLOPs per active parameter per token (a multiply and an add). Attention part,
    per layer: each scored (query, key) pair costs 2 x heads x qk_dim for the score and
    2 x heads x v_dim for the weighted value, over the causal (windowed) pairs."""
    if geom.active_params is None:
        raise ValueError(f"{geom.name}: active parameter count unknown; prefill FLOPs need it")
    linear = 2.0 * geom.active_params * tokens
    per_pair = 2.0 * geom.num_attention_heads * (geom.qk_dim + geom.v_dim)
    attn = 0.0
    for layer in range(geom.layers):
        attn += per_pair * attention_pairs(tokens, geom.window(layer), prefix)
    return linear + attn


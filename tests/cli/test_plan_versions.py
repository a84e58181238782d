"""``kvgate plan`` and ``kvgate validate`` with ``engine.versions``: a declared combination no proven
wiring covers exits 2 naming the versions, the mode and the rows there are (issue 48 item 2); the
Ascend multiprocess refusal follows the declared LMCache version (Why 6)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from harness.cli.main import run

REPO = Path(__file__).resolve().parents[2]


def _write(tmp_path: Path, profile: str, edit: Callable[[dict[str, Any]], None]) -> str:
    data = yaml.safe_load((REPO / "profiles" / profile).read_text())
    edit(data)
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def _both(inventory: str, path: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, int, str]:
    inv = str(REPO / "inventory" / inventory)
    planned = run(["plan", "--inventory", inv, "--profile", path])
    p_out = capsys.readouterr()
    validated = run(["validate", inv, path])
    v_out = capsys.readouterr()
    return planned, p_out.out + p_out.err, validated, v_out.out + v_out.err


def test_seeds_vllm_with_lmcache_056_in_multiprocess_mode_exits_2(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """What today's main planned and vLLM 0.20.1 could not start (TypeError: server_url)."""
    def seeds(data: dict[str, Any]) -> None:
        data["engine"]["versions"] = {"vllm": "0.20.1", "lmcache": "0.5.6"}

    path = _write(tmp_path, "moe-480b-tp8.yaml", seeds)
    code_p, out_p, code_v, out_v = _both("mi308x-8gpu.example.yaml", path, capsys)
    assert code_p == 2 and code_v == 2
    for out in (out_p, out_v):
        assert "[engine.versions]" in out and "vllm 0.20.1, lmcache 0.5.6 in LMCache multiprocess mode" in out
        assert "lmcache >=0.4.4,<0.4.7" in out  # the rows that exist
    # without an inventory: no platform has a row for the pair, so validate refuses it too
    assert run(["validate", path]) == 2
    assert "on any platform" in capsys.readouterr().err


def test_seeds_pair_plans_the_proven_wiring(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def seeds(data: dict[str, Any]) -> None:
        data["engine"]["versions"] = {"vllm": "0.20.1", "lmcache": "0.4.6"}

    path = _write(tmp_path, "moe-480b-tp8.yaml", seeds)
    code_p, out_p, code_v, _ = _both("mi308x-8gpu.example.yaml", path, capsys)
    assert code_p == 0 and code_v == 0
    assert "connector wiring: vllm >=0.20.1,<0.21, lmcache >=0.4.4,<0.4.7, multiprocess" in out_p


def test_ascend_multiprocess_follows_the_declared_lmcache(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def mp(lmcache: str) -> Callable[[dict[str, Any]], None]:
        def edit(data: dict[str, Any]) -> None:
            data["arms"][1]["lmcache"]["mode"] = "multiprocess"
            data["engine"]["versions"] = {"vllm": "0.32.0", "lmcache": lmcache, "vllm_ascend": "0.18.0"}
        return edit

    old = _write(tmp_path, "deepseek-load-910b.yaml", mp("0.5.5"))
    code_p, out_p, code_v, out_v = _both("atlas-910b.example.yaml", old, capsys)
    assert code_p == 2 and code_v == 2
    for out in (out_p, out_v):
        assert "does not run on Ascend before lmcache 0.5.6" in out and "declares lmcache 0.5.5" in out
    new = _write(tmp_path, "deepseek-load-910b.yaml", mp("0.5.6"))
    code_p, out_p, _, _ = _both("atlas-910b.example.yaml", new, capsys)
    assert "does not run on Ascend" not in out_p
    assert "multiprocess on ascend910b: LMCacheMPConnector" in out_p, out_p[-2000:]

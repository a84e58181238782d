"""The emulator's reader of LMCache's YAML subset and LMCACHE_* variables."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.sim.lmcache_config import LMCacheConfigError, load_config, parse_flat_yaml

# The form kvgate's vLLM adapter writes, and LMCache's documented examples use
DOC = """\
# LMCache disk tier
chunk_size: 256
local_cpu: true
max_local_cpu_size: 5.0   # GB
local_disk: "file:///mnt/fx100/lmcache/"
max_local_disk_size: 12000
remote_url: "fs:///mnt/shared/kv"
remote_serde: "naive"
save_unfull_chunk: false
extra_config:
  use_odirect: true
  other_key: 'x # not a comment'
"""


def test_documented_form(tmp_path: Path) -> None:
    f = tmp_path / "lmc.yaml"
    f.write_text(DOC)
    cfg = load_config({"LMCACHE_CONFIG_FILE": str(f)})
    assert cfg.chunk_size == 256 and cfg.local_cpu is True and cfg.max_local_cpu_size == 5.0
    assert cfg.local_disk == "/mnt/fx100/lmcache/" and cfg.max_local_disk_bytes == 12000 * 2**30
    assert cfg.remote_dir == "/mnt/shared/kv" and cfg.use_odirect is True
    assert cfg.extra == {"remote_serde": "naive", "extra_config.other_key": "x # not a comment"}


def test_env_overrides_file_and_json_is_accepted(tmp_path: Path) -> None:
    f = tmp_path / "lmc.json"
    f.write_text('{"chunk_size": 128, "local_disk": "file:///a", "extra_config": {"use_odirect": false}}')
    cfg = load_config({"LMCACHE_CONFIG_FILE": str(f), "LMCACHE_CHUNK_SIZE": "64", "LMCACHE_LOCAL_CPU": "True"})
    assert (cfg.chunk_size, cfg.local_cpu, cfg.local_disk, cfg.use_odirect) == (64, True, "/a", False)


def test_non_file_remote_is_kept_but_not_a_directory() -> None:
    cfg = load_config({"LMCACHE_REMOTE_URL": "lm://10.0.0.5:65432"})
    assert cfg.remote_url == "lm://10.0.0.5:65432" and cfg.remote_dir is None


@pytest.mark.parametrize(("url", "error"), [
    ("file:///mnt/kv", "No adapter found for URL: file:///mnt/kv"),
    ("/mnt/kv", "Invalid remote url /mnt/kv: missing scheme"),
    ("fs:///mnt/kv", None),
    ("lm://10.0.0.5:65432", None),
])
def test_remote_urls_lmcache_cannot_parse_give_no_directory(url: str, error: str | None) -> None:
    # lmcache 0.5.6 connector/__init__.py: no connector for file:// (or no scheme at all)
    cfg = load_config({"LMCACHE_REMOTE_URL": url})
    assert cfg.remote_error == error
    assert cfg.remote_dir == ("/mnt/kv" if url.startswith("fs://") else None)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("chunk_size: -3\n", "must not be negative"),
        ("chunk_size: 2.5\n", "positive integer"),
        ("local_cpu: maybe\n", "expected true or false"),
        ("local_disk: s3://bucket/x\n", "expected a file:// URL"),
        ("chunk_size 256\n", ":1: expected 'key: value'"),
        ("a: 1\n  b: 2\n", ":2: unexpected indentation"),
        ("tiers:\n  - disk\n", ":2: lists are not supported"),
        ("extra_config:\n  a:\n    b: 1\n", ":2: only one level of nesting"),
    ],
)
def test_errors_name_file_line_and_key(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(text)
    with pytest.raises(LMCacheConfigError, match="bad.yaml") as info:
        load_config({"LMCACHE_CONFIG_FILE": str(f)})
    assert message in str(info.value)


def test_missing_file_is_an_error() -> None:
    with pytest.raises(LMCacheConfigError, match="cannot read"):
        load_config({"LMCACHE_CONFIG_FILE": "/nonexistent/lmc.yaml"})


def test_flat_yaml_scalars() -> None:
    assert parse_flat_yaml("a: 1\nb: 1.5\nc: ~\nd: 'q'\ne: yes\n") == {
        "a": 1,
        "b": 1.5,
        "c": None,
        "d": "q",
        "e": True,
    }

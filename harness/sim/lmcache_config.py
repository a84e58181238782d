"""LMCache's configuration as the emulator reads it: ``LMCACHE_CONFIG_FILE`` plus ``LMCACHE_<KEY>``.

LMCache configs are flat ``key: value`` YAML with one nested mapping (``extra_config``). The
emulator must stay stdlib-only, so this reads that subset (and JSON) itself; anything outside the
subset is an error naming the file and line rather than a silent misread.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Optional, Union
from urllib.parse import unquote, urlparse

Scalar = Union[str, int, float, bool, None]

GIB = 1024**3  # LMCache sizes its tiers as GB * 1024**3

# The URL schemes lmcache 0.5.6's remote connectors parse (``ConnectorAdapter`` subclasses in
# lmcache/v1/storage_backend/connector/*_adapter.py). ``file://`` is not one of them: LMCache's
# RemoteBackend then logs the failed connection and runs with no remote tier at all.
LMCACHE_REMOTE_SCHEMES = (
    "audit://", "azure://", "blackhole://", "eic://", "external://", "fs://", "hf3fs://", "infinistore://",
    "lm://", "mock://", "mooncakestore://", "plugin://", "redis://", "redis-cluster://", "redis-sentinel://",
    "resp://", "s3://", "sagemaker-hyperpod://", "valkey://",
)


class LMCacheConfigError(ValueError):
    """The LMCache config file or an LMCACHE_* variable is malformed."""


@dataclass
class LMCacheConfig:
    chunk_size: int = 256
    local_cpu: bool = False
    max_local_cpu_size: float = 5.0  # GB
    local_disk: Optional[str] = None  # directory (from a file:// URL)
    max_local_disk_size: float = 0.0  # GB
    remote_url: Optional[str] = None  # the URL as given
    remote_dir: Optional[str] = None  # for fs:// remote URLs: the directory the emulator uses
    save_unfull_chunk: bool = False
    use_odirect: bool = False
    extra: dict[str, Scalar] = field(default_factory=dict)  # keys the emulator does not act on

    @property
    def remote_error(self) -> Optional[str]:
        """LMCache's error for a remote URL none of its connectors parses (None: it parses it).
        lmcache 0.5.6 ``connector/__init__.py``: ``CreateConnector`` and ``create_connector``."""
        url = self.remote_url
        if url is None:
            return None
        if "://" not in url:
            return f"Invalid remote url {url}: missing scheme"
        if not url.startswith(LMCACHE_REMOTE_SCHEMES):
            return f"No adapter found for URL: {url}"
        return None

    @property
    def max_local_disk_bytes(self) -> int:
        return int(self.max_local_disk_size * GIB)

    @property
    def max_local_cpu_bytes(self) -> int:
        return int(self.max_local_cpu_size * GIB)


def _scalar(text: str, where: str) -> Scalar:
    t = text.strip()
    if t == "" or t in ("null", "~", "None"):
        return None
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "\"'":
        return t[1:-1]
    low = t.lower()
    if low in ("true", "yes", "on"):
        return True
    if low in ("false", "no", "off"):
        return False
    try:
        return int(t)
    except ValueError:
        pass
    try:
        return float(t)
    except ValueError:
        pass
    if t[0] in "[{":
        try:
            value = json.loads(t)
        except ValueError:
            raise LMCacheConfigError(f"{where}: flow collections other than JSON are not supported: {t}") from None
        if isinstance(value, (dict, list)):
            raise LMCacheConfigError(f"{where}: a nested collection is not supported here: {t}")
        return value  # type: ignore[no-any-return]
    return t


def _strip_comment(line: str) -> str:
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i]
    return line


def parse_flat_yaml(text: str, source: str = "<config>") -> dict[str, object]:
    """Parse the ``key: value`` subset (one level of nesting by indentation) LMCache configs use."""
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise LMCacheConfigError(f"{source}: invalid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise LMCacheConfigError(f"{source}: expected a mapping at the top level")
        return data
    result: dict[str, object] = {}
    parent: Optional[dict[str, object]] = None
    parent_indent = -1
    for lineno, raw in enumerate(text.splitlines(), start=1):
        where = f"{source}:{lineno}"
        line = _strip_comment(raw).rstrip()
        if not line.strip() or line.strip() in ("---", "..."):
            continue
        if "\t" in line[: len(line) - len(line.lstrip())]:
            raise LMCacheConfigError(f"{where}: tabs are not allowed for indentation")
        indent = len(line) - len(line.lstrip(" "))
        body = line.strip()
        if body.startswith("- "):
            raise LMCacheConfigError(f"{where}: lists are not supported in an LMCache config: {body}")
        key, sep, value = body.partition(":")
        if not sep or not key.strip():
            raise LMCacheConfigError(f"{where}: expected 'key: value', found {body!r}")
        key = key.strip().strip("\"'")
        if indent == 0:
            parent = None
            if value.strip() == "":
                nested: dict[str, object] = {}
                result[key] = nested
                parent = nested
                parent_indent = -1
            else:
                result[key] = _scalar(value, where)
        else:
            if parent is None:
                raise LMCacheConfigError(f"{where}: unexpected indentation")
            if parent_indent == -1:
                parent_indent = indent
            elif indent != parent_indent:
                raise LMCacheConfigError(f"{where}: only one level of nesting is supported")
            if value.strip() == "":
                raise LMCacheConfigError(f"{where}: only one level of nesting is supported")
            parent[key] = _scalar(value, where)
    return result


def _as_bool(v: object, key: str) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, str) and v.lower() in ("true", "false", "1", "0", "yes", "no"):
        return v.lower() in ("true", "1", "yes")
    if isinstance(v, int):
        return v != 0
    raise LMCacheConfigError(f"{key}: expected true or false, found {v!r}")


def _as_float(v: object, key: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise LMCacheConfigError(f"{key}: expected a number, found {v!r}")
    try:
        f = float(v)
    except ValueError:
        raise LMCacheConfigError(f"{key}: expected a number, found {v!r}") from None
    if f < 0:
        raise LMCacheConfigError(f"{key}: must not be negative, found {v!r}")
    return f


def _file_url_dir(url: str, key: str) -> str:
    parsed = urlparse(url)
    if parsed.scheme == "file":
        path = unquote(parsed.path)
        if not path:
            raise LMCacheConfigError(f"{key}: file URL without a path: {url!r}")
        return path
    if parsed.scheme == "" and url.startswith("/"):
        return url
    raise LMCacheConfigError(f"{key}: expected a file:// URL, found {url!r}")


def build_config(data: Mapping[str, object], source: str = "<config>") -> LMCacheConfig:
    cfg = LMCacheConfig()
    for key, value in data.items():
        where = f"{source}: {key}"
        if key == "chunk_size":
            size = _as_float(value, where)
            if size < 1 or size != int(size):
                raise LMCacheConfigError(f"{where}: expected a positive integer, found {value!r}")
            cfg.chunk_size = int(size)
        elif key == "local_cpu":
            cfg.local_cpu = _as_bool(value, where)
        elif key == "max_local_cpu_size":
            cfg.max_local_cpu_size = _as_float(value, where)
        elif key == "local_disk":
            cfg.local_disk = None if value is None else _file_url_dir(str(value), where)
        elif key == "max_local_disk_size":
            cfg.max_local_disk_size = _as_float(value, where)
        elif key == "remote_url":
            if value is not None:
                cfg.remote_url = str(value)
                # file:// is no LMCache remote scheme (remote_error): no directory tier for it
                if cfg.remote_url.startswith("fs://"):  # LMCache's fs connector: fs://[host:port]/path
                    cfg.remote_dir = _file_url_dir("file://" + (urlparse(cfg.remote_url).path or ""), where)
        elif key == "save_unfull_chunk":
            cfg.save_unfull_chunk = _as_bool(value, where)
        elif key == "extra_config":
            if value is None:
                continue
            if not isinstance(value, Mapping):
                raise LMCacheConfigError(f"{where}: expected a mapping, found {value!r}")
            for k, v in value.items():
                if k == "use_odirect":
                    cfg.use_odirect = _as_bool(v, f"{where}.{k}")
                else:
                    cfg.extra[f"extra_config.{k}"] = v if isinstance(v, (str, int, float, bool)) else str(v)
        else:
            cfg.extra[str(key)] = value if isinstance(value, (str, int, float, bool)) or value is None else str(value)
    return cfg


ENV_KEYS = (
    "chunk_size",
    "local_cpu",
    "max_local_cpu_size",
    "local_disk",
    "max_local_disk_size",
    "remote_url",
    "save_unfull_chunk",
)


def load_config(environ: Mapping[str, str]) -> LMCacheConfig:
    """The config from ``LMCACHE_CONFIG_FILE`` (when set), overridden by ``LMCACHE_<KEY>`` variables."""
    data: dict[str, object] = {}
    path = environ.get("LMCACHE_CONFIG_FILE")
    if path:
        try:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
        except OSError as exc:
            raise LMCacheConfigError(f"LMCACHE_CONFIG_FILE={path}: cannot read: {exc.strerror}") from None
        data.update(parse_flat_yaml(text, path))
    for key in ENV_KEYS:
        env = environ.get("LMCACHE_" + key.upper())
        if env is not None:
            data[key] = _scalar(env, "LMCACHE_" + key.upper())
    return build_config(data, path or "<environment>")

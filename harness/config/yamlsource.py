"""YAML reading that keeps where every value came from.

PyYAML's composer gives each node a start mark; we build plain Python data from the node tree
ourselves so that (a) every mapping key and value has a ``(line, column)`` we can point a user
to, and (b) duplicate keys are an error instead of a silent overwrite.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

import yaml

from harness.errors import ConfigError

# Inventory, profile and gate files are a few kB; a huge file is a mistake (a log or a dump passed
# by accident) and must be refused at once rather than parsed for minutes.
MAX_CONFIG_BYTES = 4 * 1024 * 1024

PathKey = tuple[Union[str, int], ...]


@dataclass
class YamlDocument:
    """Parsed YAML data plus the position of each value, keyed by its path."""

    path: str
    data: Any
    positions: dict[PathKey, tuple[int, int]] = field(default_factory=dict)
    key_positions: dict[PathKey, tuple[int, int]] = field(default_factory=dict)

    def locate(self, loc: PathKey) -> tuple[int | None, int | None]:
        """Line and column (1-based) of the value at ``loc``, or of its nearest located parent."""
        for n in range(len(loc), -1, -1):
            pos = self.positions.get(tuple(loc[:n]))
            if pos is not None:
                return pos
        return None, None

    def locate_key(self, loc: PathKey) -> tuple[int | None, int | None]:
        """Where the mapping key at ``loc`` is written (for unknown-key errors)."""
        pos = self.key_positions.get(tuple(loc))
        return pos if pos is not None else self.locate(loc)


class _Builder:
    def __init__(self, path: str) -> None:
        self.path = path
        self.positions: dict[PathKey, tuple[int, int]] = {}
        self.key_positions: dict[PathKey, tuple[int, int]] = {}
        self._scalars = yaml.SafeLoader("")

    def build(self, node: yaml.Node, loc: PathKey) -> Any:
        self.positions[loc] = (node.start_mark.line + 1, node.start_mark.column + 1)
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, loc)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(child, loc + (i,)) for i, child in enumerate(node.value)]
        try:
            return self._scalars.construct_object(node, deep=True)
        except yaml.constructor.ConstructorError as exc:
            raise ConfigError(
                f"cannot read this value: {exc.problem}",
                path=self.path, line=node.start_mark.line + 1, column=node.start_mark.column + 1,
            ) from None

    def _mapping(self, node: yaml.MappingNode, loc: PathKey) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        first_seen: dict[Any, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                merged = self.build(value_node, loc)
                sources = merged if isinstance(merged, list) else [merged]
                for src in sources:
                    if isinstance(src, dict):
                        for k, v in src.items():
                            out.setdefault(k, v)
                continue
            key = self.build(key_node, loc + ("<key>",))
            if isinstance(key, (list, dict)):
                raise ConfigError(
                    "a mapping key must be a plain value", path=self.path,
                    line=key_node.start_mark.line + 1, column=key_node.start_mark.column + 1,
                )
            if key in first_seen:
                raise ConfigError(
                    f"duplicate key {key!r} (first given on line {first_seen[key]})",
                    path=self.path, line=key_node.start_mark.line + 1,
                    column=key_node.start_mark.column + 1, field=_dotted(loc + (str(key),)),
                )
            first_seen[key] = key_node.start_mark.line + 1
            child_loc = loc + (key,)
            self.key_positions[child_loc] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            out[key] = self.build(value_node, child_loc)
        self.positions.pop(loc + ("<key>",), None)
        return out


def _dotted(loc: PathKey) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


dotted_path = _dotted


def read_text(path: Union[str, os.PathLike[str]]) -> str:
    """Read a config file as UTF-8, refusing huge or undecodable files with a located error."""
    p = Path(path)
    name = str(path)
    try:
        size = p.stat().st_size
    except FileNotFoundError:
        raise ConfigError("file not found", path=name) from None
    except OSError as exc:
        raise ConfigError(f"cannot read file: {exc.strerror}", path=name) from None
    if p.is_dir():
        raise ConfigError("is a directory, expected a YAML file", path=name)
    if size > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"file is {size / 1e6:.1f} MB; configuration files are limited to "
            f"{MAX_CONFIG_BYTES // (1024 * 1024)} MiB (is this the right file?)",
            path=name,
        )
    raw = p.read_bytes()
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        col = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ConfigError(
            f"not UTF-8 text: byte 0x{raw[exc.start]:02x} at offset {exc.start} cannot be decoded "
            "(save the file as UTF-8)",
            path=name, line=line, column=col,
        ) from None


def parse_yaml(text: str, path: str = "<input>") -> YamlDocument:
    """Parse one YAML document from ``text`` into a :class:`YamlDocument`."""
    if not text.strip() or all(
        not ln.strip() or ln.lstrip().startswith("#") for ln in text.splitlines()
    ):
        raise ConfigError("file is empty; expected a YAML mapping", path=path, line=1, column=1)
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.composer.ComposerError as exc:
        mark = exc.problem_mark
        raise ConfigError(
            f"{exc.problem} (one YAML document per file)", path=path,
            line=mark.line + 1 if mark else None, column=mark.column + 1 if mark else None,
        ) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or "invalid YAML"
        hint = ""
        if "\t" in problem or "'\\t'" in problem:
            hint = " (YAML does not allow tabs for indentation; use spaces)"
        raise ConfigError(
            f"YAML syntax error: {problem}{hint}", path=path,
            line=mark.line + 1 if mark else None, column=mark.column + 1 if mark else None,
        ) from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"YAML error: {exc}", path=path) from None
    if node is None:
        raise ConfigError("file is empty; expected a YAML mapping", path=path, line=1, column=1)
    builder = _Builder(path)
    data = builder.build(node, ())
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else f"a single value ({type(data).__name__})"
        raise ConfigError(
            f"expected a mapping (key: value lines) at the top level, found {kind}",
            path=path, line=node.start_mark.line + 1, column=node.start_mark.column + 1,
        )
    return YamlDocument(path=path, data=data, positions=builder.positions, key_positions=builder.key_positions)


def load_yaml(path: Union[str, os.PathLike[str]]) -> YamlDocument:
    """Read and parse the YAML file at ``path``."""
    return parse_yaml(read_text(path), str(path))

"""YAML reading that keeps where every value came from.

PyYAML's composer gives each node a start mark; we build plain Python data from the node tree
ourselves so that (a) every mapping key and value has a ``(line, column)`` we can point a user
to, and (b) duplicate keys are an error instead of a silent overwrite.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Union

import yaml

from harness.errors import ConfigError

# Inventory, profile and gate files are a few kB; a huge file is a mistake (a log or a dump passed
# by accident) and must be refused at once rather than parsed for minutes.
MAX_CONFIG_BYTES = 4 * 1024 * 1024

PathKey = tuple[Union[str, int], ...]

# Hostile-input limits. Configs need at most a little reuse (an anchor or two) and a few levels of
# nesting; billion-laughs aliases, deep nesting and huge integers are refused in well under a
# second with the file and line, instead of minutes, gigabytes or a traceback.
MAX_ALIASES = 100  # alias uses (``*name`` and ``<<: *name``) per file
MAX_DEPTH = 64  # nesting of mappings and sequences
MAX_VALUES = 20_000  # values after alias expansion (the largest shipped config has a few hundred)
MAX_INT_DIGITS = 40  # an integer longer than this is a mistake (2**128 has 39 digits)


class _LimitedLoader(yaml.SafeLoader):
    """PyYAML's safe composer with alias and depth limits checked while the tree is built."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.aliases = 0
        self.depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                raise _LimitError(f"more than {MAX_ALIASES} aliases (*name); configuration files need "
                                  "no more than a little reuse", self.peek_event().start_mark)  # type: ignore[no-untyped-call]
            return super().compose_node(parent, index)
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH:
                raise _LimitError(f"nested deeper than {MAX_DEPTH} levels", self.peek_event().start_mark)  # type: ignore[no-untyped-call]
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


class _LimitError(Exception):
    def __init__(self, problem: str, mark: Any) -> None:
        super().__init__(problem)
        self.problem = problem
        self.mark = mark


def compose(text: str, path: str) -> Optional[yaml.Node]:
    """One YAML document's node tree, within the limits above (ConfigError otherwise)."""
    loader = _LimitedLoader(text)
    try:
        return loader.get_single_node()
    except _LimitError as exc:
        raise ConfigError(exc.problem, path=path, line=exc.mark.line + 1 if exc.mark else None,
                          column=exc.mark.column + 1 if exc.mark else None) from None
    finally:
        loader.dispose()


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
        self.values = 0

    def build(self, node: yaml.Node, loc: PathKey) -> Any:
        self.values += 1
        if self.values > MAX_VALUES:
            raise ConfigError(f"more than {MAX_VALUES} values once aliases are expanded (alias bomb?)",
                              path=self.path, line=node.start_mark.line + 1, column=node.start_mark.column + 1)
        if (isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:int"
                and len(node.value) > MAX_INT_DIGITS):
            raise ConfigError(f"integer of {len(node.value)} characters; at most {MAX_INT_DIGITS} are accepted",
                              path=self.path, line=node.start_mark.line + 1, column=node.start_mark.column + 1)
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
        node = compose(text, path)
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


def mask_secret_values(text: str, path: str = "<input>") -> str:
    """``text`` with the value of every secret (``harness.redact.is_secret_name``) replaced by
    ``'***'``, found in the parsed YAML tree rather than by line patterns: block scalars, quoted
    keys, flow mappings, anchors and argument lists (``[--api-key, sk-..]``, ``HF_TOKEN=..``) are
    masked exactly. Secrets written inside other values (a URL's password, ``?password=``,
    ``AccountKey=``, a JSON ``Authorization`` header: ``harness.redact.scrub_text``) are masked too,
    and comments are dropped (a commented-out ``# api_key: sk-..`` is still a secret); the layout is
    kept. Raises ConfigError when the text is not YAML."""
    try:
        root = compose(text, path)
    except yaml.YAMLError as exc:
        raise ConfigError(f"YAML error: {exc}", path=path) from None
    masker = _SecretMasker(text)
    if root is not None:
        masker.walk(root)
    masker.scrub_embedded()
    spans, scalars = masker.spans, masker.scalars
    edits = [(start, end, repl) for start, (end, repl) in spans.items()]
    edits += [(start, end, "") for start, end in _comments(text, scalars, spans)]
    out = text
    for start, end, repl in sorted(edits, reverse=True):
        out = out[:start] + repl + out[end:]
    return out


class _SecretMasker:
    """The replacements ``mask_secret_values`` makes in ``text``, found by walking its YAML nodes."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.spans: dict[int, tuple[int, str]] = {}  # start index -> (end index, replacement)
        self.scalars: list[yaml.ScalarNode] = []
        self._seen: set[int] = set()

    def _block_tail(self, node: yaml.ScalarNode) -> str:
        """The line ends a block scalar (| or >) keeps after its value."""
        raw = self.text[node.start_mark.index:node.end_mark.index]
        return raw[len(raw.rstrip("\n")):] if node.style in ("|", ">") else ""

    def mask_all(self, node: yaml.Node) -> None:
        """Every scalar under ``node`` becomes the mask."""
        from harness.redact import MASK

        if isinstance(node, yaml.ScalarNode):
            self.spans[node.start_mark.index] = (node.end_mark.index, f"'{MASK}'" + self._block_tail(node))
        elif isinstance(node, yaml.SequenceNode):
            for child in node.value:
                self.mask_all(child)
        elif isinstance(node, yaml.MappingNode):
            for _, child in node.value:
                self.mask_all(child)

    def walk(self, node: yaml.Node) -> None:
        """Mask the values of secret keys, and secrets in argument lists; note every scalar."""
        from harness.redact import is_secret_name

        if id(node) in self._seen:
            return
        self._seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            self.scalars.append(node)
        elif isinstance(node, yaml.MappingNode):
            named = _names_a_secret(node)
            for key, value in node.value:
                self.walk(key)
                # any style of key: `? [HF_TOKEN]` is as secret as `HF_TOKEN:`; and `value:` beside
                # `name: HF_TOKEN` (an environment list) holds that secret
                if any(is_secret_name(str(k.value)) for k in _scalars(key)) or (
                        named and isinstance(key, yaml.ScalarNode) and key.value in _NAMED_VALUE_KEYS):
                    self.mask_all(value)
                self.walk(value)
        elif isinstance(node, yaml.SequenceNode):
            self._walk_arguments(node)

    def _walk_arguments(self, node: yaml.SequenceNode) -> None:
        """A list read as a command line: ``NAME=secret``, ``--secret-flag value``, ``--secret=value``."""
        from harness.redact import MASK, is_secret_flag, is_secret_name

        hide_next = False
        for item in node.value:
            self.walk(item)
            if isinstance(item, yaml.ScalarNode):
                value = str(item.value)
                name, sep, _ = value.partition("=")
                if sep and is_secret_name(name) and not hide_next and name.replace("-", "_").isidentifier():
                    self.spans[item.start_mark.index] = (item.end_mark.index, f"'{name}={MASK}'")
                elif hide_next or (sep and is_secret_name(name)):
                    self.mask_all(item)
                hide_next = not sep and is_secret_flag(value, short=True)
            else:
                hide_next = False

    def scrub_embedded(self) -> None:
        """Secrets written inside other scalars (a URL's password, ``AccountKey=``...)."""
        from harness.redact import MASK, mask_command_text, scrub_text

        for node in self.scalars:
            start = node.start_mark.index
            if start in self.spans or node.start_mark.index == node.end_mark.index:
                continue
            value = str(node.value)
            scrubbed = scrub_text(mask_command_text(value))  # a command line written as one string, too
            if scrubbed != value:
                quoted = MASK if "\n" in value else scrubbed.replace("'", "''")
                self.spans[start] = (node.end_mark.index, f"'{quoted}'" + self._block_tail(node))


_NAMED_VALUE_KEYS = ("value", "default")
_NAME_KEYS = ("name", "key", "env", "variable")
_MAX_KEY_SCALARS = 64


def _scalars(node: yaml.Node) -> list[yaml.ScalarNode]:
    """The scalars of a key (a plain key, or a complex one: ``? [A, B]``, ``? {a: b}``), bounded."""
    out: list[yaml.ScalarNode] = []
    todo = [node]
    while todo and len(out) < _MAX_KEY_SCALARS:
        n = todo.pop()
        if isinstance(n, yaml.ScalarNode):
            out.append(n)
        elif isinstance(n, yaml.SequenceNode):
            todo.extend(n.value)
        elif isinstance(n, yaml.MappingNode):
            todo.extend(x for pair in n.value for x in pair)
    return out


def _names_a_secret(node: yaml.MappingNode) -> bool:
    """``{name: HF_TOKEN, value: ..}``: the mapping is one named variable, and its name is a secret's."""
    from harness.redact import is_secret_name

    return any(isinstance(k, yaml.ScalarNode) and k.value in _NAME_KEYS and isinstance(v, yaml.ScalarNode)
               and is_secret_name(str(v.value)) for k, v in node.value)


def _comments(text: str, scalars: list[yaml.ScalarNode], replaced: dict[int, tuple[int, str]]) -> list[tuple[int, int]]:
    """The spans of the comments of ``text`` (with the blanks before them): every ``#`` outside a
    scalar, and one after a block scalar's indicator (``key: |  # note``)."""
    inside = sorted((n.start_mark.index, n.end_mark.index) for n in scalars if n.end_mark.index > n.start_mark.index)
    out: list[tuple[int, int]] = []

    def comment_at(i: int) -> int:
        end = text.find("\n", i)
        end = len(text) if end < 0 else end
        start = i
        while start > 0 and text[start - 1] in " \t":
            start -= 1
        out.append((start, end))
        return end

    for node in scalars:
        s = node.start_mark.index
        if node.style in ("|", ">") and s not in replaced:
            line_end = text.find("\n", s)
            hash_at = text.find("#", s, line_end if line_end >= 0 else len(text))
            if hash_at >= 0:
                comment_at(hash_at)
    i = j = 0
    while i < len(text):
        while j < len(inside) and inside[j][1] <= i:
            j += 1
        if j < len(inside) and inside[j][0] <= i:
            i = inside[j][1]
            continue
        nxt = text.find("#", i, inside[j][0] if j < len(inside) else len(text))
        if nxt < 0:
            i = inside[j][0] if j < len(inside) else len(text)
            continue
        i = comment_at(nxt)
    return out

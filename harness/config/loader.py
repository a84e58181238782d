"""Load YAML files into validated models, with errors that name file:line:column and field."""

from __future__ import annotations

import difflib
import os
import types
import typing
from typing import Any, TypeVar, Union

from pydantic import BaseModel, ValidationError

from harness.config.gatespec import GateSpec
from harness.config.inventory import Inventory
from harness.config.profile import Profile
from harness.config.yamlsource import PathKey, YamlDocument, dotted_path, load_yaml
from harness.errors import ConfigError, ConfigErrors, InputError

M = TypeVar("M", bound=BaseModel)

KINDS: dict[str, type[BaseModel]] = {"inventory": Inventory, "profile": Profile, "gate": GateSpec}


def detect_kind(doc: YamlDocument) -> str:
    """Guess whether a document is an inventory, a profile or a gate file from its keys."""
    keys = set(doc.data)
    if "nodes" in keys or "cluster" in keys:
        return "inventory"
    if "checks" in keys:
        return "gate"
    if keys & {"arms", "model", "engine", "load"}:
        return "profile"
    raise ConfigError(
        "cannot tell what kind of file this is: an inventory has 'nodes', a profile has 'arms', "
        "a gate file has 'checks' (or pass --kind inventory|profile|gate)",
        path=doc.path, line=1, column=1,
    )


def _unwrap(annotation: Any) -> list[Any]:
    """The concrete types inside Optional/Union/Annotated/list/dict annotations."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        out: list[Any] = []
        for arg in typing.get_args(annotation):
            out.extend(_unwrap(arg))
        return out
    return [annotation]


def _model_at(model: type[BaseModel], loc: PathKey) -> type[BaseModel] | None:
    """Walk ``loc`` through the model's field annotations to the model that holds the last key."""
    current: Any = model
    for part in loc:
        nxt: Any = None
        for cand in _unwrap(current):
            origin = typing.get_origin(cand)
            if isinstance(part, int):
                if origin in (list, tuple):
                    nxt = typing.get_args(cand)[0]
            elif isinstance(cand, type) and issubclass(cand, BaseModel):
                field = cand.model_fields.get(part)
                nxt = field.annotation if field is not None else None
            elif origin is dict:
                nxt = typing.get_args(cand)[1]
            if nxt is not None:
                break
        if nxt is None:
            return None
        current = nxt
    for cand in _unwrap(current):
        if isinstance(cand, type) and issubclass(cand, BaseModel):
            return cand
    return None


def _describe_input(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def validation_errors(doc: YamlDocument, model: type[BaseModel], exc: ValidationError) -> list[ConfigError]:
    """Turn pydantic's errors into located :class:`ConfigError` objects."""
    out: list[ConfigError] = []
    for err in exc.errors(include_url=False):
        loc: PathKey = tuple(err["loc"])
        field = dotted_path(loc) or None
        kind = err["type"]
        if kind == "extra_forbidden":
            parent = _model_at(model, loc[:-1])
            known = sorted(parent.model_fields) if parent else []
            key = str(loc[-1])
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
            msg = f"unknown key {key!r}"
            if close:
                msg += f"; did you mean {close[0]!r}?"
            if known:
                msg += f" (allowed here: {', '.join(known)})"
            line, col = doc.locate_key(loc)
        else:
            line, col = doc.locate(loc)
            message = err["msg"]
            if message.startswith("Value error, "):
                message = message[len("Value error, "):]
            if kind == "missing":
                msg = "required key is missing"
            elif kind == "string_type" and loc and loc[-1] == "threshold" and isinstance(
                    err.get("input"), (int, float)):
                msg = (f"a threshold needs its unit: write it as a quoted quantity, e.g. '{err['input']}%', "
                       f"'{err['input']} GB/s' or '{err['input']} ms', not the bare number {err['input']}")
            else:
                msg = f"{message}; got {_describe_input(err.get('input'))}" if "input" in err and not isinstance(
                    err.get("input"), dict) else message
        out.append(ConfigError(msg, path=doc.path, line=line, column=col, field=field))
    return out


def _wrong_kind(doc: YamlDocument, model: type[BaseModel]) -> ConfigError | None:
    """A file of another kind passed where ``model`` is expected (a profile as --inventory): one
    sentence saying so, instead of one unknown-key line per key."""
    if not isinstance(doc.data, dict) or not doc.data:
        return None
    try:
        kind = detect_kind(doc)
    except ConfigError:
        return None
    expected = next((k for k, m in KINDS.items() if m is model), None)
    if expected is None or kind == expected or set(doc.data) <= set(model.model_fields):
        return None
    return ConfigError(
        f"this looks like {'an' if kind[0] in 'aeiou' else 'a'} {kind} file (keys: "
        f"{', '.join(list(doc.data)[:5])}), not {'an' if expected[0] in 'aeiou' else 'a'} {expected} file: "
        f"pass it as the {kind} (e.g. --{kind} {doc.path})",
        path=doc.path, line=1, column=1,
    )


def parse_model(doc: YamlDocument, model: type[M]) -> M:
    """Validate ``doc`` against ``model``; every problem is reported with its location."""
    wrong = _wrong_kind(doc, model)
    if wrong is not None:
        raise wrong
    try:
        return model.model_validate(doc.data)
    except ValidationError as exc:
        errors = validation_errors(doc, model, exc)
        raise errors[0] if len(errors) == 1 else ConfigErrors(errors) from None


def load_model(path: Union[str, os.PathLike[str]], model: type[M]) -> M:
    """Read, parse and validate one YAML file."""
    return parse_model(load_yaml(path), model)


def load_inventory(path: Union[str, os.PathLike[str]]) -> Inventory:
    return load_model(path, Inventory)


def load_profile(path: Union[str, os.PathLike[str]]) -> Profile:
    return load_model(path, Profile)


def load_gate(path: Union[str, os.PathLike[str]]) -> GateSpec:
    return load_model(path, GateSpec)


def load_any(path: Union[str, os.PathLike[str]], kind: str | None = None) -> tuple[str, YamlDocument, BaseModel]:
    """Load a file of any kind (detected from its keys unless ``kind`` is given)."""
    doc = load_yaml(path)
    if kind is None:
        kind = detect_kind(doc)
    if kind not in KINDS:
        raise InputError(f"unknown kind {kind!r}; known: {', '.join(KINDS)}")
    return kind, doc, parse_model(doc, KINDS[kind])

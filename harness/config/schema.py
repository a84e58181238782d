"""JSON Schema of the inventory, profile and gate files, and the field reference generated from it.

The schemas come from the pydantic models themselves (``model_json_schema``), so an editor with the
YAML language server checks and completes a file by the same rules ``kvgate validate`` applies; the
shipped examples point at ``docs/reference/schema/<kind>.schema.json`` with a
``# yaml-language-server: $schema=`` first line. ``docs/reference/<kind>.md`` is generated from the
same schema (``kvgate schema --write docs/reference``; a test fails when it is stale).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.config.loader import KINDS

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
TITLES = {"inventory": "Inventory file", "profile": "Profile file", "gate": "Gate file"}


def json_schema(kind: str) -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a file of ``kind``."""
    schema = KINDS[kind].model_json_schema(mode="validation")
    return {"$schema": SCHEMA_DIALECT, "$id": f"kvgate-{kind}.schema.json", **schema}


def schema_text(kind: str) -> str:
    return json.dumps(json_schema(kind), indent=2, sort_keys=True) + "\n"


def _type(prop: dict[str, Any]) -> str:
    if "$ref" in prop:
        name = prop["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    if "enum" in prop:
        return " \\| ".join(f"`{v}`" for v in prop["enum"])
    if "const" in prop:
        return f"`{prop['const']}`"
    if "anyOf" in prop:
        parts = [_type(p) for p in prop["anyOf"] if p.get("type") != "null"]
        return " or ".join(parts) + (" (optional)" if len(parts) < len(prop["anyOf"]) else "")
    t = prop.get("type")
    if isinstance(t, list):
        return "quantity" if set(t) == {"string", "number"} else " or ".join(t)
    if t == "array":
        return f"list of {_type(prop.get('items', {}))}"
    if t == "object":
        extra = prop.get("additionalProperties")
        return f"map of {_type(extra)}" if isinstance(extra, dict) and extra else "map"
    return str(t or "any")


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _default(prop: dict[str, Any], required: bool) -> str:
    if required:
        return "**required**"
    if "default" not in prop:
        return ""
    return f"`{json.dumps(prop['default'])}`"


def _table(title: str, schema: dict[str, Any]) -> list[str]:
    out = [f"## {title}", ""]
    if schema.get("description"):
        out += [_cell(schema["description"]), ""]
    required = set(schema.get("required", []))
    out += ["| field | type | default | description |", "|---|---|---|---|"]
    for name, prop in schema.get("properties", {}).items():
        desc = prop.get("description", "")
        examples = [e for p in prop.get("anyOf", [prop]) for e in p.get("examples", [])]
        if examples and "e.g." not in desc:
            desc += f" (e.g. `{examples[0]}`)"
        out.append(f"| `{name}` | {_cell(_type(prop))} | {_cell(_default(prop, name in required))} | {_cell(desc)} |")
    return out + [""]


def reference_markdown(kind: str) -> str:
    """The field reference of ``kind`` as Markdown: the top level, then every nested model."""
    schema = json_schema(kind)
    lines = [
        f"# {TITLES[kind]} reference",
        "",
        "Generated from the models by `kvgate schema --write docs/reference`; do not edit by hand.",
        f"JSON Schema: [`schema/{kind}.schema.json`](schema/{kind}.schema.json) (`kvgate schema {kind}`).",
        "Quantities are strings with a unit (`'192 GB'`, `'5 GB/s'`, `'200 Gb/s'`, `'30s'`, `'25%'`).",
        "",
    ]
    lines += _table(schema.get("title", kind), schema)
    for name, sub in schema.get("$defs", {}).items():
        lines += _table(name, sub)
    return "\n".join(lines).rstrip() + "\n"


def reference_files() -> dict[str, str]:
    """Every generated file of ``docs/reference/``, by path relative to it."""
    files: dict[str, str] = {}
    for kind in KINDS:
        files[f"{kind}.md"] = reference_markdown(kind)
        files[f"schema/{kind}.schema.json"] = schema_text(kind)
    return files


def write_reference(directory: Path) -> list[Path]:
    written = []
    for rel, text in reference_files().items():
        path = directory / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written

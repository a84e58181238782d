"""JSON Schemas and the field reference come from the models: `kvgate schema KIND` prints them,
docs/reference/ is what the generator writes today (stale docs fail here), and every shipped example
names its schema on its first line and is valid against it."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml

from harness.cli.main import run
from harness.config.schema import reference_files

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = {"inventory": "inventory", "profile": "profiles", "gate": "gates"}


def test_docs_reference_is_up_to_date() -> None:
    stale = [rel for rel, text in reference_files().items()
             if not (REPO / "docs" / "reference" / rel).exists()
             or (REPO / "docs" / "reference" / rel).read_text() != text]
    assert stale == [], f"docs/reference is stale for {stale}: run `make docs-reference`"


@pytest.mark.parametrize("kind", list(EXAMPLES))
def test_schema_command_prints_the_schema(kind: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["schema", kind]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["$schema"].startswith("https://json-schema.org/")
    assert schema["additionalProperties"] is False  # unknown keys are refused, as kvgate does
    jsonschema.Draft202012Validator.check_schema(schema)


def test_schema_without_kind_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["schema"]) == 2
    assert "name a kind" in capsys.readouterr().err


@pytest.mark.parametrize("kind,folder", list(EXAMPLES.items()))
def test_shipped_examples_name_and_match_their_schema(kind: str, folder: str) -> None:
    schema = json.loads((REPO / "docs" / "reference" / "schema" / f"{kind}.schema.json").read_text())
    files = sorted((REPO / folder).glob("*.yaml"))
    assert files
    for f in files:
        first = f.read_text().splitlines()[0]
        assert first == f"# yaml-language-server: $schema=../docs/reference/schema/{kind}.schema.json", f
        jsonschema.validate(yaml.safe_load(f.read_text()), schema)


def test_schema_refuses_what_kvgate_refuses() -> None:
    schema = json.loads((REPO / "docs" / "reference" / "schema" / "inventory.schema.json").read_text())
    bad = {"cluster": "c", "nodes": [{"name": "n", "host": "h", "platform": "tpu"}]}
    with pytest.raises(jsonschema.ValidationError, match="tpu"):
        jsonschema.validate(bad, schema)
    with pytest.raises(jsonschema.ValidationError, match="colour"):
        jsonschema.validate({"cluster": "c", "nodes": [], "colour": 1}, schema)

"""Pieces shared by every configuration model: the strict base class and quantity field types."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, WithJsonSchema

from harness.units import Quantity, UnitKind, UnitParseError, parse_quantity


class StrictModel(BaseModel):
    """Base of every model read from YAML: unknown keys are errors, values are validated on
    assignment too, and field descriptions document the file format."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True)


def _quantity_validator(kind: UnitKind) -> BeforeValidator:
    def parse(value: Any) -> Any:
        if isinstance(value, Quantity):
            return value.value
        if value is None:
            return None
        try:
            return parse_quantity(value, kind).value
        except UnitParseError as exc:
            raise ValueError(str(exc)) from None

    return BeforeValidator(parse)


def _quantity_schema(kind: UnitKind, example: str) -> WithJsonSchema:
    """In the JSON Schema (editors, docs/reference) a quantity is written with its unit."""
    return WithJsonSchema({"type": ["string", "number"], "examples": [example],
                           "description": f"a {kind.value} quantity with its unit, e.g. {example!r}"})


# Quantity fields hold the value in the base unit (bytes, bytes/s, bits/s, seconds, fraction).
Bytes = Annotated[float, _quantity_validator(UnitKind.BYTES), _quantity_schema(UnitKind.BYTES, "192 GB")]
Bandwidth = Annotated[float, _quantity_validator(UnitKind.BANDWIDTH), _quantity_schema(UnitKind.BANDWIDTH, "5 GB/s")]
BitRate = Annotated[float, _quantity_validator(UnitKind.BITRATE), _quantity_schema(UnitKind.BITRATE, "200 Gb/s")]
Duration = Annotated[float, _quantity_validator(UnitKind.DURATION), _quantity_schema(UnitKind.DURATION, "30s")]
Fraction = Annotated[float, _quantity_validator(UnitKind.PERCENT), _quantity_schema(UnitKind.PERCENT, "25%")]

"""`WireModel`, the base of every x402 document: frozen, camelCase on the wire, strict from it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

from ._errors import wire_error_from_validation
from ._primitives import WIRE_CONTEXT
from ._reasons import Reason

__all__ = ["WireModel"]


class WireModel(BaseModel):
    """A frozen x402 document with snake_case attributes and camelCase wire names.

    Unknown fields are refused, so a misspelt or unsupported field fails loudly instead of being
    dropped; free-form data belongs in the `extra` and `extensions` objects.

    Build from untrusted JSON with `from_wire` (or the package's `parse_*` functions), never
    with the constructor or `model_validate`: only `from_wire` refuses snake_case names and JSON
    numbers where x402 wants decimal strings, and turns every problem into a `WireError`.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        extra="forbid",
    )

    # The reason a parse problem is reported with, and per top-level field overrides of it.
    wire_reason: ClassVar[Reason] = Reason.INVALID_PAYLOAD
    wire_reason_by_field: ClassVar[Mapping[str, Reason]] = {}

    @classmethod
    def from_wire(cls, data: object) -> Self:
        """Parse a decoded JSON value strictly.

        Raises:
            WireError: the value does not match the document's wire form; see its `reason`.
        """
        try:
            return cls.model_validate(data, context=WIRE_CONTEXT, by_alias=True, by_name=False)
        except ValidationError as exc:
            # `from None`: the pydantic error embeds the (possibly huge, hostile) input.
            raise wire_error_from_validation(
                exc, default=cls.wire_reason, by_field=cls.wire_reason_by_field
            ) from None

    def to_json_dict(self) -> dict[str, Any]:
        """Return the wire form: camelCase keys, decimal strings, absent optional fields left out."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)

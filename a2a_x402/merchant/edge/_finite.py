"""Finding numbers JSON cannot carry in a protobuf request: NaN and the infinities in a `Value`.

Over gRPC a `google.protobuf.Value` (metadata, data parts) can hold any double; tasks are stored, and
answered on the HTTP bindings, as ProtoJSON, which has no NaN or Infinity, so such a request would fail
deep inside the SDK when the task is written. The HTTP bindings never see one: their strict JSON parser
refuses it (`_routes._json_body`). The gRPC route refuses it up front with the path of the first one.
"""

from __future__ import annotations

import math

from google.protobuf.message import Message
from google.protobuf.struct_pb2 import Value

__all__ = ["non_finite_number"]


def non_finite_number(message: Message, path: str = "") -> str | None:
    """The path of the first NaN or infinite `Value` number inside `message`, or None."""
    if isinstance(message, Value):
        kind = message.WhichOneof("kind")
        if kind == "number_value" and not math.isfinite(message.number_value):
            return path or "value"
    for field, value in message.ListFields():
        where = f"{path}.{field.name}" if path else field.name
        if field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            items = value.items()
            found = next(
                (
                    hit
                    for key, item in items
                    if isinstance(item, Message) and (hit := non_finite_number(item, f"{where}.{key}"))
                ),
                None,
            )
        elif field.is_repeated:
            found = next(
                (hit for i, item in enumerate(value) if (hit := non_finite_number(item, f"{where}[{i}]"))),
                None,
            )
        else:
            found = non_finite_number(value, where)
        if found is not None:
            return found
    return None

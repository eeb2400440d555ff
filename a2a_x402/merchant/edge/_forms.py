"""Refusing a message written in the other protocol version's wire form.

Both SDK parsers are lenient: the 1.0 one ignores unknown fields and reads unknown enum values as 0, so a
0.3 message sent with `A2A-Version: 1.0` (`"role": "user"`, `"kind": "text"` parts) would be half read —
a message with no role; the 0.3 HTTP+JSON one ignores unknown fields, so a 1.0 message sent there loses
its `parts`. A message carrying a marker that exists only in the other version's form is refused with
InvalidParams naming the marker, before it reaches a task. Metadata values are never inspected here: they
belong to extensions (the payment layer checks its own).

Forms, per interface:

- A2A 1.0 (JSON-RPC and HTTP+JSON, ProtoJSON of `lf.a2a.v1`): `parts` of `{"text"|"raw"|"url"|"data"}`,
  roles `ROLE_*`, `configuration.returnImmediately`.
- A2A 0.3 JSON-RPC (the 0.3 JSON schema): `kind` discriminators, roles `user`/`agent`, `file` parts,
  `configuration.blocking`.
- A2A 0.3 HTTP+JSON (ProtoJSON of the 0.3 proto): `content` instead of `parts`, roles `ROLE_*`,
  `configuration.blocking`.

Invalid 0.3 JSON-RPC params. The SDK's 0.3 JSON-RPC layer validates the whole request against the 0.3
schema and answers every failure -32600 Invalid Request, also when only `params` is wrong; JSON-RPC 2.0
(§5.1) and A2A 0.3 (§8.1) give invalid method parameters -32602 Invalid params. A request whose envelope is
valid but whose `params` are not is refused here with InvalidParams; a broken envelope is left to the SDK.

One 0.3 HTTP+JSON form is refused for another reason: a file part with `fileWithBytes`. The SDK's 0.3
layer (a2a-sdk 1.3) reads the decoded bytes as if they were still base64 text, so such a part would fail
with an internal error or reach the agent corrupted; the client is told to send the file by URI instead.
"""

from __future__ import annotations

from typing import Any

from a2a.utils.errors import InvalidParamsError
from pydantic import BaseModel, ValidationError

__all__ = ["check_jsonrpc_v0_3_form", "check_jsonrpc_v0_3_params", "check_rest_v0_3_form", "check_v1_0_form"]

_PARAMS = "params"

_V0_3_ROLES = frozenset({"user", "agent"})


def _refuse(where: str, found: str, form: str) -> InvalidParamsError:
    return InvalidParamsError(
        message=f"{where} has {found}, which belongs to the A2A {form} wire form; "
        "this request is served in the other version (see its A2A-Version)"
    )


def _parts(message: dict[str, Any], key: str) -> list[dict[str, Any]]:
    parts = message.get(key)
    return [part for part in parts if isinstance(part, dict)] if isinstance(parts, list) else []


def _configuration(params: dict[str, Any]) -> dict[str, Any]:
    configuration = params.get("configuration")
    return configuration if isinstance(configuration, dict) else {}


def _message(params: Any) -> dict[str, Any] | None:
    if not isinstance(params, dict):
        return None
    message = params.get("message")
    return message if isinstance(message, dict) else None


def check_v1_0_form(params: Any) -> None:
    """Refuse a SendMessage request (JSON-RPC `params` or HTTP+JSON body) carrying 0.3 markers.

    Raises:
        InvalidParamsError: the request is written in an A2A 0.3 form.
    """
    message = _message(params)
    if message is None:
        return
    for key, found in (("kind", '"kind"'), ("content", '"content" (0.3 HTTP+JSON parts)')):
        if key in message:
            raise _refuse("message", found, "0.3")
    role = message.get("role")
    # Only a string can be a 0.3 role; anything else is for the SDK's own validation to refuse.
    if isinstance(role, str) and role in _V0_3_ROLES:
        raise _refuse("message", f'role "{role}"', "0.3")
    for index, part in enumerate(_parts(message, "parts")):
        for key in ("kind", "file"):
            if key in part:
                raise _refuse(f"message.parts[{index}]", f'"{key}"', "0.3")
    if "blocking" in _configuration(params):
        raise _refuse("configuration", '"blocking"', "0.3")


def check_jsonrpc_v0_3_form(params: Any) -> None:
    """Refuse a 0.3 `message/send` or `message/stream` whose `params` carry 1.0-only markers.

    The 0.3 schema already refuses `ROLE_*` roles and 1.0 file parts; what it would silently drop is
    checked here.

    Raises:
        InvalidParamsError: the request is written in the A2A 1.0 form.
    """
    if "returnImmediately" in _configuration(params if isinstance(params, dict) else {}):
        raise _refuse("configuration", '"returnImmediately"', "1.0")


def check_rest_v0_3_form(body: Any) -> None:
    """Refuse a 0.3 HTTP+JSON `message:send` or `message:stream` body carrying 1.0-only markers.

    Raises:
        InvalidParamsError: the request is written in the A2A 1.0 form, or carries a file by bytes.
    """
    message = _message(body)
    if message is not None and "parts" in message:
        raise _refuse("message", '"parts" (0.3 HTTP+JSON calls them "content")', "1.0")
    for index, part in enumerate(_parts(message or {}, "content")):
        file = part.get("file")
        if isinstance(file, dict) and "fileWithBytes" in file:
            raise InvalidParamsError(
                message=f"message.content[{index}].file: fileWithBytes is not accepted on A2A 0.3 HTTP+JSON; "
                "send the file by fileWithUri, or use JSON-RPC or A2A 1.0"
            )
    if isinstance(body, dict) and "returnImmediately" in _configuration(body):
        raise _refuse("configuration", '"returnImmediately"', "1.0")


def check_jsonrpc_v0_3_params(model: type[BaseModel], envelope: dict[str, Any]) -> None:
    """Refuse a 0.3 JSON-RPC request whose envelope is valid but whose `params` break the 0.3 schema.

    `model` is the 0.3 request model of the method (envelope and params).

    Raises:
        InvalidParamsError: only `params` is invalid; it names the first offending field.
    """
    try:
        model.model_validate(envelope)
    except ValidationError as exc:
        # A request without `id` is a JSON-RPC notification, not a broken envelope: its params are judged.
        errors = [
            error for error in exc.errors() if not (error["loc"] == ("id",) and error["type"] == "missing")
        ]
        if errors and all(error["loc"][:1] == (_PARAMS,) for error in errors):
            first = errors[0]
            where = ".".join(str(step) for step in first["loc"])
            raise InvalidParamsError(message=f"invalid params: {where}: {first['msg']}") from None

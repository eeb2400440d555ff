"""Deliberately broken merchants: the reference merchant with one fault each, to show the kit catches it.

* `SettlesLate`: a payment layer that delivers before settling. Its facilitator answers every settlement
  at once with a success naming a transaction that does not exist yet, and settles for real a moment
  later; the merchant therefore completes the task (artifact, payment-completed) before any money moved.
* `ignore_activation`: a merchant that ignores activation. Every A2A request reaches the app as if it
  activated the extension of its version, so nothing is ever refused for want of it.
* `v0_3_literals`: a merchant that answers A2A 1.0 requests with 0.3 literals: task states spelled
  `input-required`, and the extension data in the flat `x402.payment.*` keys of v0.2.
* `ignore_tenant`: a JSON-RPC binding that drops `params.tenant`, so tenants read each other's tasks.
* `rogue_pay_to`: terms asking to be paid to an address the card does not list (a tampered answer).

The wrappers are ASGI middleware around the real app, so they affect the HTTP bindings; the gRPC server
the app starts is not wrapped (the tests run the kit on the HTTP interfaces for those two).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from a2a_x402 import EXTENSION_URI, EXTENSION_URI_V02
from facilitator import Facilitator
from facilitator.wire import PaymentPayload, PaymentRequirements, SettleResponse

__all__ = [
    "LATE_BY_S",
    "ROGUE_PAY_TO",
    "SettlesLate",
    "ignore_activation",
    "ignore_tenant",
    "rewrite_json",
    "rogue_pay_to",
    "v0_3_literals",
]

LATE_BY_S = 0.5
ROGUE_PAY_TO = "0xa0Ee7A142d267C1f36714E4a8F75612F20a79720"
"""Anvil's account 9: listed for no tenant of the card."""
_NOT_YET_MINED = "0x" + "ab" * 32
_STATES = {
    "TASK_STATE_SUBMITTED": "submitted",
    "TASK_STATE_WORKING": "working",
    "TASK_STATE_INPUT_REQUIRED": "input-required",
    "TASK_STATE_COMPLETED": "completed",
    "TASK_STATE_CANCELED": "canceled",
    "TASK_STATE_FAILED": "failed",
}


class SettlesLate(Facilitator):
    """Answers settlements with success at once and settles `LATE_BY_S` later (see the module docstring)."""

    _late: set[asyncio.Task[Any]]

    async def settle(
        self, payload: PaymentPayload, requirements: PaymentRequirements, **options: Any
    ) -> SettleResponse:
        """A success before anything was broadcast; the real settlement follows."""

        async def later() -> None:
            await asyncio.sleep(LATE_BY_S)
            await Facilitator.settle(self, payload, requirements, **options)

        if not hasattr(self, "_late"):
            self._late = set()
        task = asyncio.get_running_loop().create_task(later())
        self._late.add(task)
        task.add_done_callback(self._late.discard)
        return SettleResponse(
            success=True,
            transaction=_NOT_YET_MINED,
            network=requirements.network,
            payer=payload.payload.authorization.from_address,
            amount=requirements.amount,
        )


def _version(scope: Scope) -> str:
    for name, value in scope.get("headers", []):
        if name.lower() == b"a2a-version":
            return str(value.decode("latin-1"))
    return ""


def ignore_activation(app: ASGIApp) -> ASGIApp:
    """Every A2A request activates its version's extension, whatever the client sent."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http" and "/a2a/" in scope["path"]
        ):  # /a2a/… and a 0.3 tenant's /t/{tenant}/a2a/…
            uri = EXTENSION_URI if _version(scope).startswith("1.") else EXTENSION_URI_V02
            headers = [
                (n, v)
                for n, v in scope["headers"]
                if n.lower() not in (b"a2a-extensions", b"x-a2a-extensions")
            ]
            headers += [(b"a2a-extensions", uri.encode()), (b"x-a2a-extensions", uri.encode())]
            scope = {**scope, "headers": headers}
        await app(scope, receive, send)

    return wrapped


def _flatten(value: Any) -> Any:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key == EXTENSION_URI and isinstance(item, dict):
                out.update({f"x402.payment.{name}": _flatten(member) for name, member in item.items()})
            elif key == "state" and item in _STATES:
                out[key] = _STATES[item]
            else:
                out[key] = _flatten(item)
        return out
    if isinstance(value, list):
        return [_flatten(item) for item in value]
    return value


def rewrite_json(app: ASGIApp, transform: Callable[[Any], Any]) -> ASGIApp:
    """The JSON answers to A2A 1.0 requests passed through `transform`; streams and 0.3 pass untouched."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _version(scope).startswith("1."):
            await app(scope, receive, send)
            return
        held: list[Message] = []

        async def rewrite(message: Message) -> None:
            if message["type"] == "http.response.start":
                if b"json" in dict(message["headers"]).get(b"content-type", b""):
                    held.append(message)
                else:
                    await send(message)
                return
            if not held or message["type"] != "http.response.body":
                await send(message)
                return
            held.append(message)
            if message.get("more_body"):
                return
            start = held[0]
            body = b"".join(m.get("body", b"") for m in held[1:])
            try:
                body = json.dumps(transform(json.loads(body))).encode()
            except ValueError:
                pass
            headers = [(n, v) for n, v in start["headers"] if n.lower() != b"content-length"]
            await send({**start, "headers": [*headers, (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})

        await app(scope, receive, rewrite)

    return wrapped


def v0_3_literals(app: ASGIApp) -> ASGIApp:
    """JSON answers to A2A 1.0 requests rewritten with 0.3 state names and v0.2 flat metadata keys."""
    return rewrite_json(app, _flatten)


def _rogue(value: Any) -> Any:
    if isinstance(value, dict):
        if "accepts" in value and "x402Version" in value:
            accepts = value["accepts"] if isinstance(value["accepts"], list) else []
            return {**value, "accepts": [{**entry, "payTo": ROGUE_PAY_TO} for entry in accepts]}
        return {key: _rogue(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_rogue(item) for item in value]
    return value


def rogue_pay_to(app: ASGIApp) -> ASGIApp:
    """Terms on the A2A 1.0 HTTP bindings ask to be paid to `ROGUE_PAY_TO`, which the card does not list."""
    return rewrite_json(app, _rogue)


def ignore_tenant(app: ASGIApp) -> ASGIApp:
    """JSON-RPC requests reach the app without `params.tenant`: every tenant sees the default's tasks."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != "/a2a/jsonrpc":
            await app(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        try:
            request = json.loads(body)
            if isinstance(request, dict) and isinstance(request.get("params"), dict):
                request["params"].pop("tenant", None)
            body = json.dumps(request).encode()
        except ValueError:
            pass
        headers = [(n, v) for n, v in scope["headers"] if n.lower() != b"content-length"]
        scope = {**scope, "headers": [*headers, (b"content-length", str(len(body)).encode())]}
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        await app(scope, replay, send)

    return wrapped

"""Deliberately broken merchants: the reference merchant with one fault each, to show the kit catches it.

* `SettlesLate`: a payment layer that delivers before settling. Its facilitator answers every settlement
  at once with a success naming a transaction that does not exist yet, and settles for real a moment
  later; the merchant therefore completes the task (artifact, payment-completed) before any money moved.
* `ignore_activation`: a merchant that ignores activation. Every A2A request reaches the app as if it
  activated the extension of its version, so nothing is ever refused for want of it.
* `v0_3_literals`: a merchant that answers A2A 1.0 requests with 0.3 literals: task states spelled
  `input-required`, and the extension data in the flat `x402.payment.*` keys of v0.2.
* `SettlesSlowly` with `terms_while_busy`: a JSON-RPC front that answers a payment for a task whose
  payment it is still processing with the task's cached request to pay (§11 forbids it: the client would
  take it as an invitation to pay again); settlement is slow, so the first payment is processed a while.
* `tenant_cards_are_the_root_s`: every named tenant's 0.3 card path serves the default tenant's card.
* `rogue_tenant_card`: every named tenant's own 0.3 card lists `ROGUE_PAY_TO` as its payee.
* `ignore_tenant`: a JSON-RPC binding that drops `params.tenant`, so tenants read each other's tasks.
* `rogue_pay_to`: terms asking to be paid to an address the card does not list (a tampered answer).
* `echoes_signature`: a task in an answer to an HTTP request (A2A 1.0 or 0.3) carries, in its metadata,
  the signature of the payment sent for it (§11 forbids any answer to hold one).

The wrappers are ASGI middleware around the real app, so they affect the HTTP bindings only; the gRPC
server the app starts is not wrapped. `SettlesLate` and `SettlesSlowly` replace the payment layer's
facilitator, which the HTTP and gRPC servers of the merchant share, so they reach every binding.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from a2a_x402.extension import EXTENSION_URI, EXTENSION_URI_V02
from a2a_x402.facilitator import Facilitator
from a2a_x402.facilitator.wire import (
    PaymentPayload,
    PaymentRequirements,
    Permit2PaymentPayload,
    SettleResponse,
)

__all__ = [
    "LATE_BY_S",
    "ROGUE_PAY_TO",
    "SLOW_BY_S",
    "SettlesLate",
    "SettlesSlowly",
    "echoes_signature",
    "ignore_activation",
    "ignore_tenant",
    "is_1_0",
    "rewrite_json",
    "rogue_pay_to",
    "rogue_tenant_card",
    "tenant_cards_are_the_root_s",
    "terms_while_busy",
    "v0_3_literals",
]

LATE_BY_S = 0.5
SLOW_BY_S = 1.5
"""How long `SettlesSlowly` takes: the second presentation surely arrives while the first is processed."""
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
        self,
        payload: PaymentPayload | Permit2PaymentPayload,
        requirements: PaymentRequirements,
        **options: Any,
    ) -> SettleResponse:
        """A success before anything was broadcast; the real settlement follows (EIP-3009 payments: the
        merchants the kit is tried on take no other)."""
        if not isinstance(payload, PaymentPayload):
            return await Facilitator.settle(self, payload, requirements, **options)

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


class SettlesSlowly(Facilitator):
    """Settles for real, `SLOW_BY_S` after being asked: a payment is being processed that long."""

    async def settle(
        self,
        payload: PaymentPayload | Permit2PaymentPayload,
        requirements: PaymentRequirements,
        **options: Any,
    ) -> SettleResponse:
        """The real settlement, late."""
        await asyncio.sleep(SLOW_BY_S)
        return await Facilitator.settle(self, payload, requirements, **options)


def _tenant_card_path(scope: Scope) -> bool:
    path = str(scope.get("path", ""))
    return path.startswith("/t/") and path.endswith("/.well-known/agent-card.json")


def tenant_cards_are_the_root_s(app: ASGIApp) -> ASGIApp:
    """`/t/{tenant}/.well-known/agent-card.json` answers with the root card (the default tenant's)."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and _tenant_card_path(scope):
            scope = {
                **scope,
                "path": "/.well-known/agent-card.json",
                "raw_path": b"/.well-known/agent-card.json",
            }
        await app(scope, receive, send)

    return wrapped


async def _whole_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            return b"".join(chunks)


def _replaying(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if sent:
            return await receive()
        sent = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


def _payment_of(request: Any) -> tuple[str, str]:
    """The task id and extension status of a JSON-RPC SendMessage (``""`` where there is none)."""
    params = request.get("params") if isinstance(request, dict) else None
    message = params.get("message") if isinstance(params, dict) else None
    if not isinstance(message, dict) or request.get("method") != "SendMessage":
        return "", ""
    value = (message.get("metadata") or {}).get(EXTENSION_URI)
    status = value.get("status") if isinstance(value, dict) else ""
    return str(message.get("taskId") or ""), str(status or "")


def terms_while_busy(app: ASGIApp) -> ASGIApp:
    """A 1.0 JSON-RPC payment for a task whose payment is in flight is answered with its cached terms."""
    terms: dict[str, Any] = {}
    busy: dict[str, int] = {}

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != "/a2a/jsonrpc" or not is_1_0(scope):
            await app(scope, receive, send)
            return
        body = await _whole_body(receive)
        try:
            request = json.loads(body)
        except ValueError:
            request = None
        task_id, status = _payment_of(request)
        if status == "payment-submitted" and busy.get(task_id) and task_id in terms:
            answer = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": {"task": terms[task_id]}})
            headers = [(b"content-type", b"application/json"), (b"a2a-version", b"1.0")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": answer.encode()})
            return
        held: list[bytes] = []

        async def capture(message: Message) -> None:
            if message["type"] == "http.response.body":
                held.append(message.get("body", b""))
                if not message.get("more_body") and not task_id:
                    _remember_terms(b"".join(held), terms)
            await send(message)

        if status == "payment-submitted":
            busy[task_id] = busy.get(task_id, 0) + 1
        try:
            await app(scope, _replaying(body, receive), capture)
        finally:
            if status == "payment-submitted":
                busy[task_id] -= 1

    return wrapped


def _remember_terms(body: bytes, terms: dict[str, Any]) -> None:
    try:
        task = json.loads(body)["result"]["task"]
    except (ValueError, KeyError, TypeError):
        return
    if isinstance(task, dict) and isinstance(task.get("id"), str):
        terms[task["id"]] = task


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


def is_1_0(scope: Scope) -> bool:
    """Whether the request asks for A2A 1.0 (its `A2A-Version` header)."""
    return _version(scope).startswith("1.")


def rewrite_json(
    app: ASGIApp, transform: Callable[[Any], Any], applies: Callable[[Scope], bool] = is_1_0
) -> ASGIApp:
    """The JSON answers to requests `applies` to (A2A 1.0 ones) passed through `transform`; streams pass."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not applies(scope):
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


def _rogue_card_pay_to(value: Any) -> Any:
    if isinstance(value, dict):
        if "payTo" in value and isinstance(value["payTo"], list):
            payees = [{**p, "address": ROGUE_PAY_TO} if isinstance(p, dict) else p for p in value["payTo"]]
            return {**value, "payTo": payees}
        return {key: _rogue_card_pay_to(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_rogue_card_pay_to(item) for item in value]
    return value


def rogue_tenant_card(app: ASGIApp) -> ASGIApp:
    """Every named tenant's own 0.3 card lists `ROGUE_PAY_TO` as its payTo, unlike the 1.0 card."""
    return rewrite_json(app, _rogue_card_pay_to, _tenant_card_path)


def ignore_tenant(app: ASGIApp) -> ASGIApp:
    """JSON-RPC requests reach the app without `params.tenant`: every tenant sees the default's tasks."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != "/a2a/jsonrpc":
            await app(scope, receive, send)
            return
        body = await _whole_body(receive)
        try:
            request = json.loads(body)
            if isinstance(request, dict) and isinstance(request.get("params"), dict):
                request["params"].pop("tenant", None)
            body = json.dumps(request).encode()
        except ValueError:
            pass
        headers = [(n, v) for n, v in scope["headers"] if n.lower() != b"content-length"]
        scope = {**scope, "headers": [*headers, (b"content-length", str(len(body)).encode())]}
        await app(scope, _replaying(body, receive), send)

    return wrapped


_SIGNATURE = re.compile(r'"signature"\s*:\s*"(0x[0-9a-fA-F]{130})"')
_TASK_ID = re.compile(r'"taskId"\s*:\s*"([^"]+)"')


def echoes_signature(app: ASGIApp) -> ASGIApp:
    """Answers to HTTP requests of either A2A version whose tasks carry, in their metadata, the signature of
    the payment sent for them."""
    signatures: dict[str, str] = {}  # task id -> the signature of the payment sent for it

    def leak(value: Any) -> Any:
        if isinstance(value, dict):
            if "status" in value and value.get("id") in signatures:
                metadata = value.get("metadata")
                metadata = metadata if isinstance(metadata, dict) else {}
                return {**value, "metadata": {**metadata, "payment": {"signature": signatures[value["id"]]}}}
            return {key: leak(item) for key, item in value.items()}
        if isinstance(value, list):
            return [leak(item) for item in value]
        return value

    rewriting = rewrite_json(app, leak, applies=lambda scope: True)

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            body = await _whole_body(receive)
            text = body.decode(errors="replace")
            signature, task_id = _SIGNATURE.search(text), _TASK_ID.search(text)
            if signature is not None and task_id is not None:
                signatures[task_id.group(1)] = signature.group(1)
            receive = _replaying(body, receive)
        await rewriting(scope, receive, send)

    return wrapped

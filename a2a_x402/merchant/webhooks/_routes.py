"""The billing API: per-tenant ledger balance and statements, webhook event replay and redelivery.

Every route is under `/tenants/{tenant}` and needs `Authorization: Bearer <that tenant's api_token>`; the
default tenant (the empty id) is named by `default_tenant_segment` there (the merchant uses `default`), and
`default` in every answer (`tenant_name`). The token is looked up through an injected callable, so this
router does not depend on the tenant config; a wrong token, another tenant's token, an unknown tenant and a
tenant without a token all get the same 401, so the API does not reveal which tenants exist. With a
`throttle`, a client address that presented too many wrong tokens for a tenant lately gets 429 (with `Retry-
After`) for the next wrong one; the right token still works from there. A tenant only ever reads its own
rows: every query is filtered by the authenticated tenant. Integer query parameters are range-checked (422
out of range).

    GET  /tenants/{tenant}/ledger/balance[?asset=0x…]
    GET  /tenants/{tenant}/ledger/statement?format=csv|json&since=…&until=…
    GET  /tenants/{tenant}/webhooks/events?since_sequence=N&limit=M
    POST /tenants/{tenant}/webhooks/events/{event_id}/redeliver
    GET  /tenants/{tenant}/limits      (when the merchant gives `limits`)
    PUT  /tenants/{tenant}/limits      (the same: the tenant's own limits, JSON; 422 refused, 413 too long)
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Literal, NoReturn, Protocol

from fastapi import APIRouter, Depends, HTTPException, Query, Request, Response, status
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from a2a_x402.merchant.ledger import (
    InvalidBookingError,
    LedgerError,
    LedgerReader,
    balances_json,
    statement_csv,
    statement_json,
)
from a2a_x402.merchant.tenants import tenant_name
from a2a_x402.observability import FailureThrottle

from ._errors import EventNotFoundError, InvalidEventError, WebhookError
from ._outbox import Outbox

__all__ = ["ApiTokenLookup", "TenantLimits", "create_billing_router"]

ApiTokenLookup = Callable[[str], str | None]
"""`(tenant id) -> that tenant's API token`, or None for an unknown tenant or one without a token. Called on
every request, on the event loop: it must not block."""


# The throttle's key for every tenant without a token (unknown ones included): see the dashboard's.
_NO_TENANT = "\x00no-tenant"


class TenantLimits(Protocol):
    """The bounds the merchant applies to a tenant's callers, which the tenant reads and tightens."""

    async def describe(self, tenant: str) -> dict[str, object]:
        """`tenant`'s bounds, as JSON."""
        ...

    async def set_own(self, tenant: str, body: bytes) -> dict[str, object]:
        """Store the bounds the JSON `body` sets as `tenant`'s own; its `describe` after.

        Raises:
            ValueError: the body is refused, whole, and nothing changed; the message says why in one line.
        """
        ...


# A change of limits is three numbers: a longer body is refused unread (413).
_MAX_LIMITS_BODY_BYTES = 1024

# The one table from our errors to HTTP statuses; looked up along the MRO, so a family maps as a whole.
_HTTP_STATUS: dict[type[Exception], int] = {
    InvalidBookingError: status.HTTP_422_UNPROCESSABLE_CONTENT,
    InvalidEventError: status.HTTP_422_UNPROCESSABLE_CONTENT,
    EventNotFoundError: status.HTTP_404_NOT_FOUND,
    LedgerError: status.HTTP_500_INTERNAL_SERVER_ERROR,
    WebhookError: status.HTTP_500_INTERNAL_SERVER_ERROR,
    # What a `TenantLimits` refuses (after ours: they are ValueErrors too).
    ValueError: status.HTTP_422_UNPROCESSABLE_CONTENT,
}
_BEARER = HTTPBearer(auto_error=False)
# Module-level so that FastAPI can resolve these annotations (this module uses postponed annotations).
_Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_BEARER)]
# Ledger sequences are signed 64-bit in both databases: a larger one would overflow the query (a 500).
_SinceSequence = Annotated[int, Query(ge=0, le=2**63 - 1)]
_Limit = Annotated[int, Query(ge=1, le=1000)]
_JSON = "application/json"
_CSV = "text/csv; charset=utf-8"


def _raise_http(exc: LedgerError | WebhookError | ValueError) -> NoReturn:
    code = next(_HTTP_STATUS[cls] for cls in type(exc).__mro__ if cls in _HTTP_STATUS)
    name = getattr(exc, "code", "invalid_request")
    raise HTTPException(code, detail={"code": name, "message": str(exc)}) from exc


def create_billing_router(
    *,
    ledger: LedgerReader,
    outbox: Outbox,
    api_token_of: ApiTokenLookup,
    default_tenant_segment: str | None = None,
    throttle: FailureThrottle | None = None,
    limits: TenantLimits | None = None,
) -> APIRouter:
    """The billing routes over `ledger` and `outbox`, authenticated with `api_token_of`.

    `default_tenant_segment` is the path segment that names the default tenant (None: it has no routes);
    `throttle` counts wrong tokens (none counted when None).
    `limits` answers `GET` and `PUT /tenants/{tenant}/limits` (no such route without it).
    """
    router = APIRouter(tags=["billing"])

    def authenticated_tenant(request: Request, tenant: str, credentials: _Credentials) -> str:
        if tenant == default_tenant_segment:
            tenant = ""
        expected = api_token_of(tenant)
        if (
            credentials is None
            or expected is None
            or not hmac.compare_digest(credentials.credentials.encode(), expected.encode())
        ):
            # The credential is checked first: only a wrong (or missing) one is ever throttled.
            if throttle is not None:
                key = tenant if expected is not None else _NO_TENANT
                address = request.client.host if request.client is not None else ""
                seconds = throttle.failed(key, address)
                if seconds is not None:
                    raise HTTPException(
                        status.HTTP_429_TOO_MANY_REQUESTS,
                        detail={
                            "code": "too_many_failures",
                            "message": f"too many wrong tokens from this address: try again in {seconds} s",
                        },
                        headers={"Retry-After": str(seconds)},
                    )
            raise HTTPException(
                status.HTTP_401_UNAUTHORIZED,
                detail={
                    "code": "unauthorized",
                    "message": "a valid bearer token for this tenant is required",
                },
                headers={"WWW-Authenticate": "Bearer"},
            )
        return tenant

    authenticated = Depends(authenticated_tenant)

    @router.get("/tenants/{tenant}/ledger/balance")
    async def ledger_balance(tenant: str = authenticated, asset: str | None = None) -> Response:
        """The tenant's revenue per network and asset (atomic units as decimal strings)."""
        try:
            balances = await ledger.balance(tenant, asset)
        except LedgerError as exc:
            _raise_http(exc)
        return Response(balances_json(tenant_name(tenant), balances), media_type=_JSON)

    @router.get("/tenants/{tenant}/ledger/statement")
    async def ledger_statement(
        tenant: str = authenticated,
        format: Literal["csv", "json"] = "json",  # noqa: A002 - the documented query parameter
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> Response:
        """Movements of the tenant's revenue booked in [since, until) (ISO 8601 times with a zone)."""
        try:
            lines = await ledger.statement(tenant, since, until)
        except LedgerError as exc:
            _raise_http(exc)
        if format == "csv":
            return Response(statement_csv(lines), media_type=_CSV)
        return Response(
            statement_json(tenant_name(tenant), lines, since=since, until=until), media_type=_JSON
        )

    @router.get("/tenants/{tenant}/webhooks/events")
    async def replay_events(
        tenant: str = authenticated,
        since_sequence: _SinceSequence = 0,
        limit: _Limit = 100,
    ) -> Response:
        """The tenant's events after ledger sequence `since_sequence`, in sequence order, exactly as sent.

        The answer is `{"tenant", "events": [<event bodies>], "nextSequence", "hasMore"}`; pass
        `nextSequence` as `since_sequence` to continue.
        """
        events = await outbox.events_since(tenant, since_sequence, limit)
        next_sequence = events[-1].sequence if events else since_sequence
        # Stored bodies are spliced in unchanged: a replayed event is byte-identical to the delivered one.
        body = b"".join(
            (
                b'{"tenant":',
                json.dumps(tenant_name(tenant)).encode(),
                b',"events":[',
                b",".join(event.payload for event in events),
                b'],"nextSequence":',
                str(next_sequence).encode(),
                b',"hasMore":',
                b"true" if len(events) == limit else b"false",
                b"}",
            )
        )
        return Response(body, media_type=_JSON)

    @router.post(
        "/tenants/{tenant}/webhooks/events/{event_id}/redeliver", status_code=status.HTTP_202_ACCEPTED
    )
    async def redeliver_event(event_id: str, tenant: str = authenticated) -> Response:
        """Queue the event for delivery again to every active endpoint of the tenant subscribed to it."""
        try:
            count = await outbox.redeliver(tenant, event_id)
        except WebhookError as exc:
            _raise_http(exc)
        body = json.dumps({"eventId": event_id, "deliveries": count}, separators=(",", ":"))
        return Response(body, status_code=status.HTTP_202_ACCEPTED, media_type=_JSON)

    if limits is not None:
        tenant_limits = limits

        @router.get("/tenants/{tenant}/limits")
        async def read_limits(tenant: str = authenticated) -> Response:
            """The bounds the merchant applies to this tenant's callers: the operator's ceiling, the
            tenant's own, and the lower of the two, which applies."""
            return _limits_answer(tenant, await tenant_limits.describe(tenant))

        @router.put("/tenants/{tenant}/limits")
        async def set_limits(request: Request, tenant: str = authenticated) -> Response:
            """Set the tenant's own bounds (JSON), from its callers' next request on; refused whole (422,
            one line) when any value is not a whole number between its least and the operator's."""
            body = await _small_body(request, _MAX_LIMITS_BODY_BYTES)
            try:
                described = await tenant_limits.set_own(tenant, body)
            except ValueError as exc:
                _raise_http(exc)
            return _limits_answer(tenant, described)

    return router


def _limits_answer(tenant: str, described: dict[str, object]) -> Response:
    body = json.dumps({"tenant": tenant_name(tenant), **described}, separators=(",", ":"))
    return Response(body, media_type=_JSON)


async def _small_body(request: Request, limit: int) -> bytes:
    """The request's body, or 413 when it is longer than `limit` bytes (by its Content-Length, unread, or
    as soon as more than that has arrived)."""
    too_long = HTTPException(
        status.HTTP_413_CONTENT_TOO_LARGE,
        detail={"code": "body_too_large", "message": f"the body must be at most {limit} bytes"},
    )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_long
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise too_long
    return bytes(body)

"""The dashboard's differences page: a tenant's differences with the chain, acknowledged or booked there.

    GET  /tenants/{tenant}/dashboard/differences          the open differences about the tenant's bookings
                                                          or payee (and the last ones closed), with forms
    POST /tenants/{tenant}/dashboard/differences/{id}     action=ack|book with a note: acknowledge it, or
                                                          book the payment to the tenant; 303 to the page

Both behind the dashboard's authentication (the tenant's session or token); the POST refuses a request
from another site (`is_cross_site`) with 403 and changes nothing. A difference of another tenant, an
unknown or closed one is 404; a bad note or a difference that cannot be booked is 400, nothing changed.
Kept apart from the overview's layout: the overview only includes `_differences.html` (a count and a link).

A difference about the chain itself (unreadable, restarted: no tenant, no payTo) is shown to every tenant,
since it bears on every tenant's payments, in words about the chain rather than the operator's text (which
may name infrastructure); only the operator closes it (`x402-merchant differences`), so it has no form.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Form, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from a2a_x402.merchant.differences import (
    CHAIN_RESTARTED,
    DifferenceNotOpenError,
    DifferenceRefusedError,
    DifferenceState,
    DifferenceStore,
    StoredDifference,
    acknowledge_difference,
    book_difference,
)
from a2a_x402.merchant.ledger import Ledger
from a2a_x402.merchant.tenants import Tenant, TenantRegistry, tenant_name

from ._format import format_time

__all__ = ["DifferenceDesk", "DifferenceView", "add_difference_routes", "difference_views", "shown_detail"]

_Action = Annotated[str, Form()]
_Note = Annotated[str, Form()]
_CLOSED_SHOWN = 20  # the latest closed differences shown under the open ones
_ABOUT_CHAIN = "This is about the chain, not your money"


@dataclass(frozen=True, slots=True)
class DifferenceView:
    """An open difference with the chain as stored: what it is, and when passes first and last saw it;
    `about_chain` when it is about the chain itself (shown to every tenant)."""

    id: int
    kind: str
    detail: str
    first_seen: str
    last_seen: str
    about_chain: bool = False


def shown_detail(difference: StoredDifference) -> str:
    """What a tenant reads of `difference`: its text, or for one about the chain itself what it means for
    the tenant (the operator's text may name infrastructure, and counts every tenant's differences)."""
    if not difference.about_chain:
        return difference.detail
    if difference.kind == CHAIN_RESTARTED:
        return (
            f"The chain was restarted at {format_time(difference.first_seen)}: its history before then "
            f"is gone. {_ABOUT_CHAIN}: your bookings stay in the ledger, but those made before the restart "
            "are no longer on the chain."
        )
    return (
        f"The merchant could not read the chain (last tried {format_time(difference.last_seen)}). "
        f"{_ABOUT_CHAIN}: your bookings stand, but none is finalized, and new payments may fail, until "
        "the chain answers again."
    )


def difference_views(found: list[StoredDifference]) -> tuple[DifferenceView, ...]:
    """The stored differences as the overview lists them."""
    return tuple(
        DifferenceView(
            id=difference.id,
            kind=difference.kind,
            detail=shown_detail(difference),
            first_seen=format_time(difference.first_seen),
            last_seen=format_time(difference.last_seen),
            about_chain=difference.about_chain,
        )
        for difference in found
    )


@dataclass(frozen=True, slots=True)
class DifferenceDesk:
    """What the differences page reads and changes: the stored differences, the ledger to book into, and
    the network bookings are made on."""

    store: DifferenceStore
    ledger: Ledger
    network: str


Page = Callable[..., HTMLResponse]
Refusal = Callable[[Request, str], Awaitable[HTMLResponse | None]]


def add_difference_routes(
    router: APIRouter,
    *,
    desk: DifferenceDesk,
    tenants: TenantRegistry,
    tenant_of: Callable[[str], str],
    page: Page,
    refusal: Refusal,
    login_page: Callable[[str], HTMLResponse],
    cross_site: Callable[[Request], bool],
    forbidden: Callable[[str], HTMLResponse],
) -> None:
    """Add the differences page and its form's POST to `router`, with the dashboard's own helpers."""

    async def signed_in(request: Request, segment: str) -> Tenant | HTMLResponse:
        refused = await refusal(request, segment)
        tenant = tenants.get(tenant_of(segment))
        if refused is not None or tenant is None:
            return refused or login_page(segment)
        return tenant

    async def render(
        segment: str, tenant: Tenant, *, error: str | None = None, code: int = 200
    ) -> HTMLResponse:
        scope = (tenant.id, tenant.pay_to)
        opened = await desk.store.listed(tenant_or_payee=scope, chain_wide=True)
        closed = await desk.store.listed(
            states=(DifferenceState.RESOLVED, DifferenceState.ACKNOWLEDGED, DifferenceState.BOOKED),
            tenant_or_payee=scope,
            chain_wide=True,
        )
        return page(
            "differences.html",
            code,
            segment=segment,
            tenant=tenant.id,
            opened=opened,
            closed=sorted(closed, key=lambda d: d.resolved_at or d.last_seen, reverse=True)[:_CLOSED_SHOWN],
            bookable=lambda d: d.kind == "unbooked_payment" and d.pay_to == tenant.pay_to,
            detail=shown_detail,
            error=error,
            signed_in=True,
        )

    @router.get("/tenants/{segment}/dashboard/differences", response_class=HTMLResponse)
    async def differences(request: Request, segment: str) -> HTMLResponse:
        tenant = await signed_in(request, segment)
        if isinstance(tenant, HTMLResponse):
            return tenant
        return await render(segment, tenant)

    @router.post("/tenants/{segment}/dashboard/differences/{ident}", response_model=None)
    async def close(
        request: Request, segment: str, ident: int, action: _Action = "", note: _Note = ""
    ) -> Response:
        if cross_site(request):
            return forbidden(segment)
        tenant = await signed_in(request, segment)
        if isinstance(tenant, HTMLResponse):
            return tenant
        by = f"dashboard:{tenant_name(tenant.id)}"
        try:
            if action == "ack":
                await acknowledge_difference(
                    desk.store, ident, note=note, by=by, tenant_or_payee=(tenant.id, tenant.pay_to)
                )
            elif action == "book":
                await book_difference(
                    desk.store,
                    desk.ledger,
                    ident,
                    tenant=tenant.id,
                    tenant_pay_to=tenant.pay_to,
                    network=desk.network,
                    note=note,
                    by=by,
                )
            else:
                return await render(segment, tenant, error="choose acknowledge or book", code=400)
        except DifferenceNotOpenError:
            return await render(
                segment, tenant, error=f"difference {ident}: no such open difference", code=404
            )
        except DifferenceRefusedError as exc:
            return await render(segment, tenant, error=str(exc), code=400)
        target = f"/tenants/{quote(segment, safe='')}/dashboard/differences"
        return RedirectResponse(target, status_code=status.HTTP_303_SEE_OTHER)

"""The dashboard's routes: server-rendered pages per tenant, behind that tenant's API token.

    GET  /tenants/{tenant}/dashboard                        balances, revenue chart, settlements, webhooks,
                                                            the open differences stored (until resolved)
    GET  /tenants/{tenant}/dashboard/settlements            every settlement, a page at a time, by date range
                                                            (?since=&until=&before=; 422 on a bad value)
    GET  /tenants/{tenant}/dashboard/settlements.csv        that page as CSV (the same parameters)
    GET  /tenants/{tenant}/dashboard/unpaid                 the refused and failed payments, a page at a time
                                                            (?before=, a cursor the page links to)
    GET  /tenants/{tenant}/dashboard/unpaid.csv             that page as CSV (the same parameter)
    GET  /tenants/{tenant}/dashboard/payers.csv             the payers as CSV
    GET  /tenants/{tenant}/dashboard/settlements/{entry}    one settlement and its events' deliveries
    GET  /tenants/{tenant}/dashboard/login                  the log-in form
    POST /tenants/{tenant}/dashboard/login                  token in, session cookie out (303 to the page)
    POST /tenants/{tenant}/dashboard/logout                 the session ended, the cookie removed (303)
    GET  /dashboard/static/dashboard.css                    the style sheet (no tenant data)
    GET  /tenants/{tenant}/dashboard/differences            with `differences`: see `_differences`
    POST /tenants/{tenant}/dashboard/differences/{id}       (acknowledge or book one, from its form)

The default tenant is `default_tenant_segment` in the paths, as in the billing API. A request without a
valid token or session for the URL's tenant gets the log-in form with 401 and nothing of the tenant;
the token of another tenant is not valid for this one. A wrong token (on the form, or as a bearer) from
an address that has presented too many for that tenant lately (`FailureThrottle`) gets a page saying when
to try again, with 429; the right one still works. The two POSTs refuse a request from another site
(`is_cross_site`) with 403 and change nothing. Pages are Jinja2 templates rendered with autoescape on,
and carry no script at all: the Content-Security-Policy allows none, nor any origin but this one for the
style sheet.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from importlib import resources
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Form, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, StrictUndefined

from a2a_x402.merchant.ledger import EntryNotFoundError
from a2a_x402.merchant.tenants import Tenant, TenantRegistry
from a2a_x402.observability import FailureThrottle

from ._auth import SESSION_COOKIE, DashboardAuth
from ._differences import DifferenceDesk, add_difference_routes
from ._explorer import EXPLORERS, explorer_url, hex_runs, shorten
from ._export import payers_csv, settlements_csv, unpaid_csv
from ._filters import FilterError, parse_filter, parse_unpaid_cursor
from ._origin import is_cross_site
from ._views import DashboardData

__all__ = ["STYLESHEET_PATH", "create_dashboard_router"]

STYLESHEET_PATH = "/dashboard/static/dashboard.css"

_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    # Same-origin: a form's POST then carries this origin in `Origin` (no-referrer would make it `null`).
    "Referrer-Policy": "same-origin",
}
# Module-level so that FastAPI can resolve it (this module uses postponed annotations).
_Token = Annotated[str, Form()]
# The throttle's key for every tenant without a token (unknown ones included): guesses at made-up tenant
# names share one count, so cycling names can neither dodge the throttle nor flood its table.
_NO_TENANT = "\x00no-tenant"
_NOT_IN_FILENAME = re.compile(r"[^A-Za-z0-9_-]+")


def templates_for(explorers: Mapping[str, str]) -> Environment:
    """The pages' Jinja2 templates (autoescaped, strict), linking to `explorers`."""
    templates = Environment(
        loader=PackageLoader("a2a_x402.merchant.dashboard", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )

    def explorer(network: str, kind: str, value: str | int) -> str | None:
        return explorer_url(network, kind, value, explorers)

    templates.globals.update(explorer_url=explorer, shorten=shorten, hex_runs=hex_runs)
    return templates


def create_dashboard_router(
    *,
    data: DashboardData,
    tenants: TenantRegistry,
    auth: DashboardAuth,
    default_tenant_segment: str,
    secure_cookies: bool = False,
    throttle: FailureThrottle | None = None,
    public_origin: str | None = None,
    explorers: Mapping[str, str] = EXPLORERS,
    differences: DifferenceDesk | None = None,
) -> APIRouter:
    """The dashboard routes over `data`, for the tenants of `tenants`, authenticated by `auth`.

    `secure_cookies` marks the session cookie Secure (when the merchant is served over HTTPS); `throttle`
    counts wrong tokens per tenant and client address (a `FailureThrottle` of its defaults when None; pass
    the billing API's to count both surfaces together); `public_origin` is the origin of the merchant's
    public URL, accepted for the POSTs besides the one each request was sent to; `explorers` the block
    explorer's base URL per CAIP-2 network (none for a dev chain). With `differences`, the
    differences page and its form are served too (`_differences`).
    """
    router = APIRouter(include_in_schema=False)
    throttle = FailureThrottle() if throttle is None else throttle
    templates = templates_for(explorers)
    stylesheet = resources.files("a2a_x402.merchant.dashboard").joinpath("static/dashboard.css").read_bytes()

    def tenant_of(segment: str) -> str:
        return "" if segment == default_tenant_segment else segment

    def page(template: str, status_code: int = status.HTTP_200_OK, **context: object) -> HTMLResponse:
        html = templates.get_template(template).render(stylesheet=STYLESHEET_PATH, **context)
        return HTMLResponse(html, status_code=status_code, headers=_HEADERS)

    def login_page(segment: str, *, refused: bool, status_code: int) -> HTMLResponse:
        response = page("login.html", status_code, segment=segment, refused=refused, signed_in=False)
        if status_code == status.HTTP_401_UNAUTHORIZED:
            response.headers["WWW-Authenticate"] = "Bearer"
        return response

    def too_many(segment: str, seconds: int) -> HTMLResponse:
        refusal = page(
            "too_many.html",
            status.HTTP_429_TOO_MANY_REQUESTS,
            segment=segment,
            seconds=seconds,
            signed_in=False,
        )
        refusal.headers["Retry-After"] = str(seconds)
        return refusal

    def wrong_token(request: Request, segment: str) -> HTMLResponse | None:
        """Count a wrong token for the URL's tenant from this address: the 429 page if it had too many."""
        tenant = tenant_of(segment)
        key = tenant if auth.api_token_of(tenant) is not None else _NO_TENANT
        address = request.client.host if request.client is not None else ""
        wait = throttle.failed(key, address)
        return None if wait is None else too_many(segment, wait)

    async def refusal(request: Request, segment: str) -> HTMLResponse | None:
        """None when the request holds the URL's tenant's token or session; else what to answer."""
        tenant = tenant_of(segment)
        if tenants.get(tenant) is not None:
            if await auth.session_matches(tenant, request.cookies.get(SESSION_COOKIE)):
                return None
        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer":
            if tenants.get(tenant) is not None and auth.token_matches(tenant, credentials):
                return None
            throttled = wrong_token(request, segment)
            if throttled is not None:
                return throttled
        return login_page(segment, refused=False, status_code=status.HTTP_401_UNAUTHORIZED)

    def forbidden(segment: str) -> HTMLResponse:
        return page("cross_site.html", status.HTTP_403_FORBIDDEN, segment=segment, signed_in=False)

    def cookie_path(segment: str) -> str:
        return f"/tenants/{quote(segment, safe='')}/dashboard"

    async def signed_in(request: Request, segment: str) -> Tenant | HTMLResponse:
        """The URL's tenant when the request may see its pages; else what to answer (`refusal`, or the
        log-in page)."""
        refused = await refusal(request, segment)
        tenant = tenants.get(tenant_of(segment))
        if refused is not None or tenant is None:
            return refused or login_page(segment, refused=False, status_code=status.HTTP_401_UNAUTHORIZED)
        return tenant

    @router.get(STYLESHEET_PATH)
    async def style() -> Response:
        return Response(stylesheet, media_type="text/css", headers={"Cache-Control": "public, max-age=300"})

    @router.get("/tenants/{segment}/dashboard", response_class=HTMLResponse)
    async def overview(request: Request, segment: str) -> HTMLResponse:
        tenant = await signed_in(request, segment)
        if not isinstance(tenant, Tenant):
            return tenant
        view = await data.overview(tenant.id, tenant.pay_to)
        return page("overview.html", segment=segment, tenant=tenant.id, view=view, signed_in=True)

    @router.get("/tenants/{segment}/dashboard/settlements", response_class=HTMLResponse)
    async def settlement_list(request: Request, segment: str) -> HTMLResponse:
        tenant = await signed_in(request, segment)
        if not isinstance(tenant, Tenant):
            return tenant
        try:
            wanted = parse_filter(request.query_params.multi_items(), today=datetime.now(UTC).date())
        except FilterError as error:
            return bad_filter(segment, tenant, error, "settlements")
        listing = await data.settlement_page(tenant.id, wanted)
        return page("settlements.html", segment=segment, tenant=tenant.id, listing=listing, signed_in=True)

    def bad_filter(segment: str, tenant: Tenant, error: FilterError, listing: str) -> HTMLResponse:
        return page(
            "bad_filter.html",
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            segment=segment,
            tenant=tenant.id,
            message=str(error),
            listing=listing,
            signed_in=True,
        )

    @router.get("/tenants/{segment}/dashboard/unpaid", response_class=HTMLResponse)
    async def unpaid_list(request: Request, segment: str) -> HTMLResponse:
        tenant = await signed_in(request, segment)
        if not isinstance(tenant, Tenant):
            return tenant
        try:
            after = parse_unpaid_cursor(request.query_params.multi_items())
        except FilterError as error:
            return bad_filter(segment, tenant, error, "unpaid")
        listing = await data.unpaid_page(tenant.id, after)
        return page("unpaid.html", segment=segment, tenant=tenant.id, listing=listing, signed_in=True)

    def plain(text: str, code: int) -> Response:
        """A CSV route's refusal, as text a download tool shows as it is."""
        return Response(text, code, headers=_HEADERS, media_type="text/plain")

    def csv_file(segment: str, what: str, text: str) -> Response:
        name = f"{_NOT_IN_FILENAME.sub('_', segment)[:64]}-{what}.csv"
        headers = {**_HEADERS, "Content-Disposition": f'attachment; filename="{name}"'}
        return Response(text, media_type="text/csv; charset=utf-8", headers=headers)

    @router.get("/tenants/{segment}/dashboard/settlements.csv", response_model=None)
    async def settlement_list_csv(request: Request, segment: str) -> Response:
        tenant = await signed_in(request, segment)
        if not isinstance(tenant, Tenant):
            return tenant
        try:
            wanted = parse_filter(request.query_params.multi_items(), today=datetime.now(UTC).date())
        except FilterError as error:
            return plain(f"{error}\n", status.HTTP_422_UNPROCESSABLE_CONTENT)
        listing = await data.settlement_page(tenant.id, wanted)
        return csv_file(segment, "settlements", settlements_csv(listing.rows))

    @router.get("/tenants/{segment}/dashboard/unpaid.csv", response_model=None)
    async def unpaid_list_csv(request: Request, segment: str) -> Response:
        tenant = await signed_in(request, segment)
        if not isinstance(tenant, Tenant):
            return tenant
        try:
            after = parse_unpaid_cursor(request.query_params.multi_items())
        except FilterError as error:
            return plain(f"{error}\n", status.HTTP_422_UNPROCESSABLE_CONTENT)
        listing = await data.unpaid_page(tenant.id, after)
        return csv_file(segment, "unpaid", unpaid_csv(listing.rows))

    @router.get("/tenants/{segment}/dashboard/{what}.csv", response_model=None)
    async def overview_csv(request: Request, segment: str, what: str) -> Response:
        tenant = await signed_in(request, segment)
        if not isinstance(tenant, Tenant):
            return tenant
        if what != "payers":
            return plain("No such export.\n", status.HTTP_404_NOT_FOUND)
        view = await data.overview(tenant.id, tenant.pay_to)
        return csv_file(segment, what, payers_csv(view.payers))

    @router.get("/tenants/{segment}/dashboard/settlements/{entry_id}", response_class=HTMLResponse)
    async def settlement(request: Request, segment: str, entry_id: str) -> HTMLResponse:
        tenant = await signed_in(request, segment)
        if not isinstance(tenant, Tenant):
            return tenant
        try:
            detail = await data.settlement(tenant.id, entry_id)
        except EntryNotFoundError:
            return page(
                "not_found.html",
                status.HTTP_404_NOT_FOUND,
                segment=segment,
                tenant=tenant.id,
                signed_in=True,
            )
        return page("settlement.html", segment=segment, tenant=tenant.id, detail=detail, signed_in=True)

    @router.get("/tenants/{segment}/dashboard/login", response_class=HTMLResponse)
    async def login_form(segment: str) -> HTMLResponse:
        return login_page(segment, refused=False, status_code=status.HTTP_200_OK)

    @router.post("/tenants/{segment}/dashboard/login", response_model=None)
    async def login(request: Request, segment: str, token: _Token = "") -> Response:
        if is_cross_site(request, public_origin):
            return forbidden(segment)
        tenant = tenant_of(segment)
        if tenants.get(tenant) is None or not auth.token_matches(tenant, token):
            throttled = wrong_token(request, segment)
            if throttled is not None:
                return throttled
            return login_page(segment, refused=True, status_code=status.HTTP_401_UNAUTHORIZED)
        # A new session id at every log-in; the one the browser came with (if any) is ended.
        session = await auth.new_session(tenant, replacing=request.cookies.get(SESSION_COOKIE))
        response = RedirectResponse(cookie_path(segment), status_code=status.HTTP_303_SEE_OTHER)
        response.set_cookie(
            SESSION_COOKIE,
            session,
            max_age=auth.session_ttl_s,
            path=cookie_path(segment),
            secure=secure_cookies,
            httponly=True,
            samesite="strict",
        )
        response.headers.update(_HEADERS)
        return response

    @router.post("/tenants/{segment}/dashboard/logout", response_model=None)
    async def logout(request: Request, segment: str) -> Response:
        if is_cross_site(request, public_origin):
            return forbidden(segment)
        await auth.end_session(request.cookies.get(SESSION_COOKIE))
        response = RedirectResponse(f"{cookie_path(segment)}/login", status_code=status.HTTP_303_SEE_OTHER)
        response.delete_cookie(
            SESSION_COOKIE, path=cookie_path(segment), secure=secure_cookies, httponly=True, samesite="strict"
        )
        response.headers.update(_HEADERS)
        return response

    if differences is not None:
        add_difference_routes(
            router,
            desk=differences,
            tenants=tenants,
            tenant_of=tenant_of,
            page=page,
            refusal=refusal,
            login_page=lambda segment: login_page(
                segment, refused=False, status_code=status.HTTP_401_UNAUTHORIZED
            ),
            cross_site=lambda request: is_cross_site(request, public_origin),
            forbidden=forbidden,
        )
    return router

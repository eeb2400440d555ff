"""The dashboard's routes: server-rendered pages per tenant, behind that tenant's API token.

    GET  /tenants/{tenant}/dashboard                        balances, revenue chart, settlements, webhooks,
                                                            the reconciler's open differences
    GET  /tenants/{tenant}/dashboard/settlements/{entry}    one settlement and its events' deliveries
    GET  /tenants/{tenant}/dashboard/login                  the log-in form
    POST /tenants/{tenant}/dashboard/login                  token in, session cookie out (303 to the page)
    POST /tenants/{tenant}/dashboard/logout                 the cookie removed (303 to the form)
    GET  /dashboard/static/dashboard.css                    the style sheet (no tenant data)

The default tenant is `default_tenant_segment` in the paths, as in the billing API. A request without a
valid token or session for the URL's tenant gets the log-in form with 401 and nothing of the tenant;
the token of another tenant is not valid for this one. An address that has failed to log in too often
lately (`LoginThrottle`) gets a page saying when to try again, with 429, and its log-in is not tried.
Pages are Jinja2 templates rendered with autoescape on, and carry no script at all: the
Content-Security-Policy allows none, nor any origin but this one for the style sheet.
"""

from __future__ import annotations

import math
from importlib import resources
from typing import Annotated
from urllib.parse import quote

from fastapi import APIRouter, Form, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, StrictUndefined

from merchant.ledger import EntryNotFoundError
from merchant.tenants import TenantRegistry

from ._auth import SESSION_COOKIE, DashboardAuth
from ._throttle import LoginThrottle
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
    "Referrer-Policy": "no-referrer",
}
# Module-level so that FastAPI can resolve it (this module uses postponed annotations).
_Token = Annotated[str, Form()]


def create_dashboard_router(
    *,
    data: DashboardData,
    tenants: TenantRegistry,
    auth: DashboardAuth,
    default_tenant_segment: str,
    secure_cookies: bool = False,
    throttle: LoginThrottle | None = None,
) -> APIRouter:
    """The dashboard routes over `data`, for the tenants of `tenants`, authenticated by `auth`.

    `secure_cookies` marks the session cookie Secure (when the merchant is served over HTTPS); `throttle`
    counts failed log-ins per client address (a `LoginThrottle` of its defaults when None).
    """
    router = APIRouter(include_in_schema=False)
    throttle = LoginThrottle() if throttle is None else throttle
    templates = Environment(
        loader=PackageLoader("merchant.dashboard", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    stylesheet = resources.files("merchant.dashboard").joinpath("static/dashboard.css").read_bytes()

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

    def signed_in(request: Request, segment: str) -> bool:
        tenant = tenant_of(segment)
        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and auth.token_matches(tenant, credentials):
            return True
        return auth.session_matches(tenant, request.cookies.get(SESSION_COOKIE))

    def cookie_path(segment: str) -> str:
        return f"/tenants/{quote(segment, safe='')}/dashboard"

    @router.get(STYLESHEET_PATH)
    async def style() -> Response:
        return Response(stylesheet, media_type="text/css", headers={"Cache-Control": "public, max-age=300"})

    @router.get("/tenants/{segment}/dashboard", response_class=HTMLResponse)
    async def overview(request: Request, segment: str) -> HTMLResponse:
        tenant = tenants.get(tenant_of(segment))
        if tenant is None or not signed_in(request, segment):
            return login_page(segment, refused=False, status_code=status.HTTP_401_UNAUTHORIZED)
        view = await data.overview(tenant.id, tenant.pay_to)
        return page("overview.html", segment=segment, tenant=tenant.id, view=view, signed_in=True)

    @router.get("/tenants/{segment}/dashboard/settlements/{entry_id}", response_class=HTMLResponse)
    async def settlement(request: Request, segment: str, entry_id: str) -> HTMLResponse:
        tenant = tenants.get(tenant_of(segment))
        if tenant is None or not signed_in(request, segment):
            return login_page(segment, refused=False, status_code=status.HTTP_401_UNAUTHORIZED)
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
        address = request.client.host if request.client is not None else ""
        wait = throttle.retry_after(address)
        if wait is not None:
            seconds = max(1, math.ceil(wait))
            refusal = page(
                "too_many.html",
                status.HTTP_429_TOO_MANY_REQUESTS,
                segment=segment,
                seconds=seconds,
                signed_in=False,
            )
            refusal.headers["Retry-After"] = str(seconds)
            return refusal
        tenant = tenant_of(segment)
        if tenants.get(tenant) is None or not auth.token_matches(tenant, token):
            throttle.refused(address)
            return login_page(segment, refused=True, status_code=status.HTTP_401_UNAUTHORIZED)
        response = RedirectResponse(cookie_path(segment), status_code=status.HTTP_303_SEE_OTHER)
        response.set_cookie(
            SESSION_COOKIE,
            auth.new_session(tenant),
            max_age=auth.session_ttl_s,
            path=cookie_path(segment),
            secure=secure_cookies,
            httponly=True,
            samesite="strict",
        )
        response.headers.update(_HEADERS)
        return response

    @router.post("/tenants/{segment}/dashboard/logout")
    async def logout(segment: str) -> Response:
        response = RedirectResponse(f"{cookie_path(segment)}/login", status_code=status.HTTP_303_SEE_OTHER)
        response.delete_cookie(
            SESSION_COOKIE, path=cookie_path(segment), secure=secure_cookies, httponly=True, samesite="strict"
        )
        response.headers.update(_HEADERS)
        return response

    return router

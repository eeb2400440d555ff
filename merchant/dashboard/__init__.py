"""The tenant dashboard: a server-rendered web page per tenant, behind that tenant's API token.

It shows the tenant's balances per asset, a chart of booked revenue per day (SVG drawn on the server),
recent, unfinalized and reversed settlements (each with a page of its own), the webhook endpoints with
every delivery's attempts and next retry, and the reconciler's open differences; tables and forms work
without JavaScript, and the pages carry none. Everything is read through the query APIs of the ledger,
the outbox, the webhook endpoints and the reconciler, always for the authenticated tenant only. Amounts
are integer atomic units, written with the asset's decimals by integer arithmetic (`format_amount`).
Templates (Jinja2, autoescaped) and the style sheet are package data. The log-in form refuses an address
that failed too often lately (`LoginThrottle`).
"""

from __future__ import annotations

from ._auth import SESSION_COOKIE, DashboardAuth
from ._format import AssetInfo, Money, format_amount
from ._routes import STYLESHEET_PATH, create_dashboard_router
from ._throttle import LoginThrottle
from ._views import DashboardData

__all__ = [
    "SESSION_COOKIE",
    "STYLESHEET_PATH",
    "AssetInfo",
    "DashboardAuth",
    "DashboardData",
    "LoginThrottle",
    "Money",
    "create_dashboard_router",
    "format_amount",
]

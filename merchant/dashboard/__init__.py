"""The tenant dashboard: a server-rendered web page per tenant, behind that tenant's API token.

It shows the tenant's balances per asset, a chart of booked revenue per day (SVG drawn on the server),
recent, unfinalized and reversed settlements (each with a page of its own), the webhook endpoints with
every delivery's attempts and next retry, and the reconciler's open differences; tables and forms work
without JavaScript, and the pages carry none. Everything is read through the query APIs of the ledger,
the outbox, the webhook endpoints and the reconciler, always for the authenticated tenant only. Amounts
are integer atomic units, written with the asset's decimals by integer arithmetic (`format_amount`).
Templates (Jinja2, autoescaped) and the style sheet are package data. Sessions are server records
(`SessionStore`, ended at log-out); log-in and log-out refuse cross-site requests (`is_cross_site`); a
wrong token from an address that presented too many for the tenant lately is answered 429
(`LoginThrottle`), the right one still works. The differences page (`DifferenceDesk`) lists the stored
differences about the tenant and acknowledges or books them from its forms.
"""

from __future__ import annotations

from ._auth import SESSION_COOKIE, DashboardAuth
from ._differences import DifferenceDesk
from ._format import AssetInfo, Money, format_amount
from ._origin import is_cross_site, origin_of
from ._routes import STYLESHEET_PATH, create_dashboard_router
from ._sessions import SessionStore
from ._throttle import LoginThrottle
from ._views import DashboardData

__all__ = [
    "SESSION_COOKIE",
    "STYLESHEET_PATH",
    "AssetInfo",
    "DashboardAuth",
    "DashboardData",
    "DifferenceDesk",
    "LoginThrottle",
    "Money",
    "SessionStore",
    "create_dashboard_router",
    "format_amount",
    "is_cross_site",
    "origin_of",
]

"""The tenant dashboard: a server-rendered web page per tenant, behind that tenant's API token.

It shows the tenant's balances per asset, revenue totals for today, 7 and 30 days, a chart of booked
revenue per day (SVG drawn on the server, one for a wide screen and one for a phone), recent, unfinalized
and reversed settlements with what each task bought (each with a page of its own, and every settlement by
cursor pages and date range), the refused and failed payments with their reason (every one by cursor
pages), the payers, the webhook endpoints with every delivery's attempts and next retry, the callers, and
the open differences with the chain (the tenant's, and those about the chain itself); a list the overview
caps says how many it leaves out, and each table can be downloaded as CSV. Tables and forms work without
JavaScript, and the pages carry none; at 390 px wide rows become cards and nothing scrolls sideways.
Everything is read through the query APIs of the ledger, the outbox, the webhook endpoints, the reconciler,
the callers and the payment offers (`OfferReader`), always for the authenticated tenant only. Amounts are
integer atomic units, shown as people read them (`$0.01` for a USD stablecoin), each opening to its
atomic units (a `<details>`: no script needed); addresses and hashes are shortened (`0x1234…abcd`) but
copied whole, and link to the network's block explorer when it has a known one (`EXPLORERS`, or the
operator's `X402_EXPLORERS`: `explorers_for`; no built-in one on a dev chain, `is_local_chain`).
Templates (Jinja2, autoescaped) and the style sheet are package data. Sessions are server records
(`SessionStore`, ended at log-out); log-in and log-out refuse cross-site requests (`is_cross_site`); a
wrong token from an address that presented too many for the tenant lately is answered 429
(`observability.FailureThrottle`), the right one still works. The differences page (`DifferenceDesk`)
lists the stored differences about the tenant and acknowledges or books them from its forms.
"""

from __future__ import annotations

from ._auth import SESSION_COOKIE, DashboardAuth
from ._differences import DifferenceDesk
from ._explorer import EXPLORERS, explorers_for, is_local_chain
from ._format import AssetInfo, Money, format_amount
from ._origin import is_cross_site, origin_of
from ._routes import STYLESHEET_PATH, create_dashboard_router
from ._sessions import SessionStore
from ._views import DashboardData

__all__ = [
    "EXPLORERS",
    "SESSION_COOKIE",
    "STYLESHEET_PATH",
    "AssetInfo",
    "DashboardAuth",
    "DashboardData",
    "DifferenceDesk",
    "Money",
    "SessionStore",
    "create_dashboard_router",
    "explorers_for",
    "format_amount",
    "is_cross_site",
    "is_local_chain",
    "origin_of",
]

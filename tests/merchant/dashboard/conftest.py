"""A reference merchant with the default tenant and two named ones, each with its API token, and paid tasks.

`shop` serves `build_app` on the test chain with a tenants file: the default tenant, `acme` (whose webhook
endpoint, subscribed to `settlement.completed`, is a real receiver on 127.0.0.1 that answers its first
request with 500, and the next ones with 200) and `globex`. Webhooks may reach loopback
(`X402_WEBHOOKS_ALLOW_PRIVATE`, as the webhook tests set it) and the reconciler passes every half second,
so bookings are finalized while a test watches.

`local_dashboard` is lighter: tenant acme's dashboard router alone in an app of its own, on a fresh SQLite
database (no chain, no reconciler), with a client holding acme's token and the ledger and offers it reads.
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from a2a_x402.merchant.dashboard import (
    AssetInfo,
    DashboardAuth,
    DashboardData,
    SessionStore,
    create_dashboard_router,
)
from a2a_x402.merchant.ledger import Ledger, LedgerReader
from a2a_x402.merchant.payments import OfferReader, OfferStore
from a2a_x402.merchant.tenants import Tenant, TenantRegistry
from a2a_x402.merchant.webhooks import Outbox, WebhookEndpoints, generate_secret
from a2a_x402.payer import sign_payment
from a2a_x402.storage import create_engine
from tests.faults.clients import open_task, pay
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.merchant import (
    DEFAULT_PAY_TO,
    DEFAULT_PRICE,
    TWO_TENANTS,
    MerchantStarter,
    MerchantWire,
    RunningMerchant,
)
from tests.merchant.ledger.bookings import PAY_TO, USDC
from tests.merchant.webhooks.receiver import HOOK_PATH, Receiver, Reply

SEGMENTS = {"": "default", "acme": "acme", "globex": "globex"}
"""Each tenant's name in the dashboard's paths."""
LOCAL_PAGE = "/tenants/acme/dashboard"
"""The path of acme's overview in `local_dashboard`."""
LocalDashboard = tuple[httpx.AsyncClient, Ledger, OfferStore]


@dataclass
class Shop:
    """The merchant, its tenants' tokens and pay-to addresses, and acme's webhook receiver."""

    merchant: RunningMerchant
    tokens: dict[str, str]
    pay_tos: dict[str, str]
    prices: dict[str, int]
    receiver: Receiver
    hook_url: str
    new_payer: Callable[..., str]

    def dashboard(self, tenant: str) -> str:
        """The path of `tenant`'s dashboard."""
        return f"/tenants/{SEGMENTS[tenant]}/dashboard"

    async def paid_task(self, tenant: str) -> str:
        """Make a real paid task for `tenant` through the merchant (A2A JSON-RPC); its task id."""
        async with self.merchant.http() as http:
            wire = MerchantWire(http, "jsonrpc", tenant)
            task_id, terms = await open_task(wire)
            answer = await pay(wire, task_id, sign_payment(self.new_payer(), terms))
        assert answer["status"]["state"] == "TASK_STATE_COMPLETED", answer["status"]
        return task_id


def _tenants_file(path: Path, tokens: dict[str, str], hook_url: str, secret: str) -> Path:
    acme_pay_to, acme_price = TWO_TENANTS["acme"]
    globex_pay_to, globex_price = TWO_TENANTS["globex"]
    path.write_text(
        "[default]\n"
        f'pay_to = "{DEFAULT_PAY_TO}"\nprice = {DEFAULT_PRICE}\napi_token = "{tokens[""]}"\n\n'
        "[tenants.acme]\n"
        f'pay_to = "{acme_pay_to}"\nprice = {acme_price}\napi_token = "{tokens["acme"]}"\n'
        "\n"
        "[tenants.globex]\n"
        f'pay_to = "{globex_pay_to}"\nprice = {globex_price}\napi_token = "{tokens["globex"]}"\n\n'
        # One delivery per paid task: the settlement's later events (finalized) are not sent here.
        "[[tenants.acme.webhooks]]\n"
        f'url = "{hook_url}"\nsecret = "{secret}"\nevent_types = ["settlement.completed"]\n'
    )
    return path


@pytest.fixture
def shop(
    sqlite_url: str,
    start_merchant: MerchantStarter,
    asgi_server: Callable[..., str],
    new_payer: Callable[..., str],
    tmp_path: Path,
) -> Shop:
    """The three-tenant merchant on a fresh SQLite database; nothing paid yet."""
    secret = generate_secret()
    receiver = Receiver([secret], plan=[Reply(500)])
    hook_url = asgi_server(receiver.app) + HOOK_PATH
    tokens = {tenant: f"{name}-{secrets.token_urlsafe(24)}" for tenant, name in SEGMENTS.items()}
    tenants_file = _tenants_file(tmp_path / "tenants.toml", tokens, hook_url, secret)
    merchant = start_merchant(
        sqlite_url, tenants_file=tenants_file, webhooks_allow_private=True, reconcile_interval_s=0.5
    )
    return Shop(
        merchant=merchant,
        tokens=tokens,
        pay_tos={"": DEFAULT_PAY_TO, **{tenant: pay_to for tenant, (pay_to, _) in TWO_TENANTS.items()}},
        prices={"": DEFAULT_PRICE, **{tenant: price for tenant, (_, price) in TWO_TENANTS.items()}},
        receiver=receiver,
        hook_url=hook_url,
        new_payer=new_payer,
    )


@pytest.fixture
async def local_dashboard(sqlite_url: str) -> AsyncIterator[LocalDashboard]:
    """A client of tenant acme's dashboard (with its token), and the ledger and offers it reads (its
    asset: the bookings' USDC, 6 decimals)."""
    token = f"acme-{secrets.token_urlsafe(24)}"
    engine = create_engine(sqlite_url)
    data = DashboardData(
        ledger=LedgerReader(engine),
        outbox=Outbox(engine),
        endpoints=WebhookEndpoints(engine),
        reconciler=None,
        assets={USDC: AssetInfo(name="USDC", decimals=6)},
        confirmations=1,
        offers=OfferReader(engine),
    )
    app = FastAPI()
    app.include_router(
        create_dashboard_router(
            data=data,
            tenants=TenantRegistry([Tenant(id="acme", pay_to=PAY_TO, price=1, api_token=token)]),
            auth=DashboardAuth({"acme": token}.get, SessionStore(engine)),
            default_tenant_segment="default",
            explorers={},
        )
    )
    headers = {"authorization": f"Bearer {token}"}
    transport = httpx.ASGITransport(app=app)
    try:
        async with httpx.AsyncClient(
            timeout=HANG_S, transport=transport, base_url="http://test", headers=headers
        ) as http:
            yield http, Ledger(engine, Outbox(engine)), OfferStore(engine)
    finally:
        await engine.dispose()

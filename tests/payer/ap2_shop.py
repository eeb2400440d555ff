"""The merchant of the payer's AP2 tests and the wire between them (`test_payer_ap2*`, `test_cli_ap2`).

The merchant's tenant `acme` takes mandates its trusted surface issued, 10 cents a task; `strict` requires
them. `Wire` forwards the payer's requests to the real server, and can change an answer on the way or
answer in the server's place: the faults and the answers of §20.6 the reference merchant does not give.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from a2a_x402.agentcard import JwksCache
from a2a_x402.payer import OpenMandates, Payer, PayerSettings, PaymentPolicy
from tests.fixtures.ap2 import MERCHANT, OpenTerms, public_jwks
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.merchant import DEFAULT_PAY_TO, MerchantStarter, RunningMerchant
from tests.merchant.ap2.support import write_key

PRICE = 100_000  # 10 cents of a 6-decimal USD token
ACME_PAY_TO = "0x976EA74026E726554dB657fA54763abd0C3a0aa9"
STRICT_PAY_TO = "0x14dC79964da2C08b23698B3D3cc7Ca32193d9955"
TEXT = "The quick brown fox. The dog sleeps."
BUDGET = OpenTerms(budget=0.3)  # 30 cents: three tasks
FAST = PayerSettings(retry_backoff_s=0.01, poll_interval_s=0.05)

JSON = dict[str, Any]
Edit = Callable[[httpx.Request, JSON], JSON | None]


def start_shop(
    start_merchant: MerchantStarter, sqlite_url: str, tmp_path: Path, user_key: Any
) -> RunningMerchant:
    """The merchant: `acme` takes the mandates `user_key` issues (its checkout key in `tmp_path/acme.pem`),
    `strict` requires them; both at PRICE."""
    (tmp_path / "surface.jwks.json").write_text(json.dumps(public_jwks(user_key)))
    write_key(tmp_path / "acme.pem")
    write_key(tmp_path / "strict.pem")
    website = f', website = "{MERCHANT.website}"' if MERCHANT.website else ""
    (tmp_path / "tenants.toml").write_text(
        f'[default]\npay_to = "{DEFAULT_PAY_TO}"\nprice = 250000\n\n'
        f'[tenants.acme]\npay_to = "{ACME_PAY_TO}"\nprice = {PRICE}\n\n'
        f'[tenants.acme.ap2]\nmerchant = {{ id = "{MERCHANT.id}", name = "{MERCHANT.name}"{website} }}\n'
        'checkout_keys = ["acme.pem"]\nissuers = ["surface.jwks.json"]\n\n'
        f'[tenants.strict]\npay_to = "{STRICT_PAY_TO}"\nprice = {PRICE}\n\n'
        '[tenants.strict.ap2]\nmerchant = { id = "strict.example", name = "Strict" }\n'
        'checkout_keys = ["strict.pem"]\nissuers = ["surface.jwks.json"]\nrequired = true\n'
    )
    return start_merchant(sqlite_url, tenants_file=tmp_path / "tenants.toml")


@dataclass
class Wire(httpx.AsyncBaseTransport):
    """Forwards to the real server, letting ``edit`` replace a JSON answer, or ``answer`` answer a request
    in the server's place; records every request."""

    edit: Edit | None = None
    answer: Callable[[httpx.Request], JSON | None] | None = None
    sent: list[httpx.Request] = field(default_factory=list)
    _inner: httpx.AsyncHTTPTransport = field(default_factory=httpx.AsyncHTTPTransport)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        instead = self.answer(request) if self.answer is not None else None
        if instead is not None:
            return httpx.Response(200, json=instead)
        response = await self._inner.handle_async_request(request)
        if self.edit is None or "json" not in response.headers.get("content-type", ""):
            return response
        body = json.loads(await response.aread())
        edited = self.edit(request, body)
        headers = [(k, v) for k, v in response.headers.raw if k.lower() != b"content-length"]
        content = json.dumps(body if edited is None else edited).encode()
        return httpx.Response(response.status_code, headers=headers, content=content)

    def payments(self) -> list[httpx.Request]:
        return [r for r in self.sent if b'"payment-submitted"' in r.content]


@asynccontextmanager
async def connect(
    shop: RunningMerchant,
    key: str,
    wire: Wire,
    *,
    tenant: str = "acme",
    mandates: OpenMandates | None = None,
    policy: PaymentPolicy | None = None,
) -> AsyncIterator[Payer]:
    """A payer of `shop`'s `tenant` over `wire`, fetching the tenant's checkout keys over loopback http."""
    async with httpx.AsyncClient(transport=wire, timeout=HANG_S) as http:
        async with Payer.connect(
            shop.base_url,
            key,
            tenant=tenant,
            http=http,
            settings=FAST,
            policy=policy,
            mandates=mandates,
            ap2_jwks=JwksCache(http, allow_insecure_localhost=True),
        ) as payer:
            yield payer

"""A reference merchant with three tenants and billing tokens, and synchronous helpers to put tasks in it.

The tenants are the default tenant "" and `acme` and `globex` (the payees and prices of
`tests.fixtures.merchant`), each with its own API token; `acme` may also get a webhook endpoint. The
helpers speak A2A 1.0 JSON-RPC over a plain `httpx.Client`, for tests that run without an event loop.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from a2a_x402.extension import EXTENSION_URI
from a2a_x402.merchant.edge import JSONRPC_PATH
from a2a_x402.payer import sign_payment
from tests.fixtures.merchant import (
    DEFAULT_PAY_TO,
    DEFAULT_PRICE,
    TWO_TENANTS,
    offered_terms,
    payment_message,
    user_message,
)

__all__ = [
    "A2A_HEADERS",
    "PAYEES",
    "TOKENS",
    "call",
    "pay",
    "quote",
    "tenants_toml",
]

JSON = dict[str, Any]

TOKENS = {
    "": "default-token-0123456789abcdef",
    "acme": "acme-token-0123456789abcdef",
    "globex": "globex-token-0123456789abcdef",
}
"""Each tenant's billing API token."""
PAYEES = {"": DEFAULT_PAY_TO, **{tenant: pay_to for tenant, (pay_to, _) in TWO_TENANTS.items()}}
"""Each tenant's payee address."""
A2A_HEADERS = {"A2A-Version": "1.0", "A2A-Extensions": EXTENSION_URI}
"""What an A2A 1.0 client that activates the x402 extension sends on every request."""


def tenants_toml(path: Path, *, webhooks: dict[str, tuple[str, str]] | None = None) -> Path:
    """Write the three tenants to `path`; `webhooks` maps a tenant to its (webhook_url, webhook_secret)."""
    prices = {"": DEFAULT_PRICE, **{tenant: price for tenant, (_, price) in TWO_TENANTS.items()}}
    lines: list[str] = []
    for tenant, token in TOKENS.items():
        lines.append("[default]" if tenant == "" else f"[tenants.{tenant}]")
        lines += [f'pay_to = "{PAYEES[tenant]}"', f"price = {prices[tenant]}", f'api_token = "{token}"']
        if webhooks and tenant in webhooks:
            url, secret = webhooks[tenant]
            lines += [f'webhook_url = "{url}"', f'webhook_secret = "{secret}"']
        lines.append("")
    path.write_text("\n".join(lines))
    return path


def call(client: httpx.Client, method: str, params: JSON, tenant: str = "") -> JSON:
    """One JSON-RPC call for `tenant`; the `result`.

    Raises:
        AssertionError: the answer is an error.
    """
    if tenant:
        params = {"tenant": tenant, **params}
    answer = client.post(JSONRPC_PATH, json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    body: JSON = answer.json()
    if "result" not in body:
        raise AssertionError(f"{method} for tenant {tenant!r} failed: {answer.status_code} {body}")
    result: JSON = body["result"]
    return result


def quote(client: httpx.Client, tenant: str) -> JSON:
    """A new task of `tenant` waiting for payment (TASK_STATE_INPUT_REQUIRED with x402 terms)."""
    task: JSON = call(client, "SendMessage", {"message": user_message()}, tenant)["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task
    return task


def pay(client: httpx.Client, tenant: str, task: JSON, payer_key: str) -> JSON:
    """Pay `task` with `payer_key` on the terms it offers; the completed task."""
    payload = sign_payment(payer_key, offered_terms(task).accepts[0])
    paid: JSON = call(client, "SendMessage", {"message": payment_message(task["id"], payload)}, tenant)[
        "task"
    ]
    assert paid["status"]["state"] == "TASK_STATE_COMPLETED", paid
    return paid

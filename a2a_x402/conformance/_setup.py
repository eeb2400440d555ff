"""The kit's own setup, checked before anything is paid: the chain answers, the merchant is an A2A agent.

A run against a dead ``--rpc-url`` or a closed port would otherwise sign payments and report every check
failed, blaming the merchant for the operator's mistake. These two reads tell the operator in one line
instead (``SetupError``, exit 2). What the merchant then answers, however wrong, is the checks' business:
only no answer at all, or nothing at the card's URL, is a setup mistake.
"""

from __future__ import annotations

import asyncio

import httpx
import orjson

from a2a_x402.observability import unreachable_reason

from ._card import card_url_of

__all__ = ["SetupError", "check_setup"]

_HEADERS = {"A2A-Version": "1.0", "Accept": "application/json"}


class SetupError(Exception):
    """The kit cannot run as set up: one line saying what to fix."""


async def check_setup(merchant_url: str, rpc_url: str, *, timeout_s: float) -> None:
    """Raise ``SetupError`` if the chain at ``rpc_url`` or the merchant at ``merchant_url`` is not usable.

    Raises:
        SetupError: the node gives no JSON-RPC answer to ``eth_chainId``; the merchant does not answer, or
            answers its card URL with 404, 410 or a web page (not an A2A agent).
    """
    async with httpx.AsyncClient(
        timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0)), follow_redirects=False
    ) as client:
        await _check_chain(client, rpc_url, timeout_s)
        await _check_merchant(client, card_url_of(merchant_url), timeout_s)


async def _check_chain(client: httpx.AsyncClient, rpc_url: str, timeout_s: float) -> None:
    if not rpc_url.startswith(("http://", "https://")):
        raise SetupError(f"--rpc-url {rpc_url} is not an http(s) URL")
    body = {"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}
    try:
        async with asyncio.timeout(timeout_s):
            response = await client.post(rpc_url, json=body)
    except (httpx.HTTPError, TimeoutError, OSError) as error:
        raise SetupError(
            f"the chain at --rpc-url {rpc_url} could not be reached ({unreachable_reason(error)}): "
            "check the URL and that the node runs"
        ) from None
    try:
        answer = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        answer = None
    if not isinstance(answer, dict) or not isinstance(answer.get("result"), str):
        raise SetupError(
            f"--rpc-url {rpc_url} is not an Ethereum JSON-RPC node (eth_chainId answered HTTP "
            f"{response.status_code} without a result): check the URL"
        )


async def _check_merchant(client: httpx.AsyncClient, card_url: str, timeout_s: float) -> None:
    if not card_url.startswith(("http://", "https://")):
        raise SetupError(f"the merchant URL {card_url} is not an http(s) URL")
    try:
        async with asyncio.timeout(timeout_s):
            response = await client.get(card_url, headers=_HEADERS)
    except (httpx.HTTPError, TimeoutError, OSError) as error:
        raise SetupError(
            f"the merchant at {card_url} could not be reached ({unreachable_reason(error)}): "
            "check the URL and that it runs"
        ) from None
    if response.status_code in (404, 410):
        raise SetupError(
            f"{card_url} answered HTTP {response.status_code}: not an A2A agent (no Agent Card there); "
            "give the merchant's base URL or its card URL"
        )
    if response.headers.get("content-type", "").startswith("text/html"):
        raise SetupError(
            f"{card_url} answered a web page, not an Agent Card: not an A2A agent; "
            "give the merchant's base URL or its card URL"
        )

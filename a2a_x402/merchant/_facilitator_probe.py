"""Whether a remote facilitator (`X402_FACILITATOR_URL`) can settle for this merchant: the one probe
`x402-merchant check` and `/readyz` share.

It asks `GET /supported`, the x402 facilitator endpoint every implementation serves (the x402 SDK's
example server has no liveness route of its own), for the `exact` scheme on the merchant's network.
"""

from __future__ import annotations

import httpx

from a2a_x402.observability import Check, CheckResult, unreachable_reason

__all__ = ["check_remote_facilitator", "remote_facilitator_check", "shown_url"]

_TIMEOUT_S = 3.0


async def check_remote_facilitator(
    url: str,
    network: str,
    *,
    where: str | None = None,
    fatal: bool = True,
    door: bool = False,
    api_key: str | None = None,
) -> CheckResult:
    """`facilitator`: the facilitator at `url` answers `GET /supported` listing `exact` on `network`, and,
    with `door` (what `check` asks; `/readyz` does not), does not refuse this merchant's `api_key` (or its
    lack of one) at its door.

    `where` names it in the detail (by default `url` without credentials; `/readyz`, served without
    authentication, names only the setting). Not answering is a problem but never fatal: a facilitator
    started after the merchant is found by the first payment. Not supporting the network is `fatal`. A
    refused key (or none where one is needed) is a problem that is not fatal: every payment would fail.
    """
    where = where or shown_url(url)
    try:
        async with httpx.AsyncClient(timeout=_TIMEOUT_S) as client:
            response = await client.get(url.rstrip("/") + "/supported")
            refused = door and await _refused_at_door(client, url, api_key)
        kinds = response.json().get("kinds", []) if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        return CheckResult.problem(
            "facilitator", f"{where} does not answer: {unreachable_reason(exc)}", fatal=False
        )
    if kinds is None:
        detail = f"{where} answers /supported with HTTP {response.status_code}"
        return CheckResult.problem("facilitator", detail, fatal=False)
    if not any(
        isinstance(kind, dict) and kind.get("network") == network and kind.get("scheme", "exact") == "exact"
        for kind in kinds
    ):
        return CheckResult.problem("facilitator", f"{where} does not support exact on {network}", fatal=fatal)
    if refused:
        detail = (
            f"{where} refuses this merchant's API key: check X402_FACILITATOR_API_KEY"
            if api_key
            else f"{where} requires an API key: set X402_FACILITATOR_API_KEY (`x402-facilitator keys create`)"
        )
        return CheckResult.problem("facilitator", detail, fatal=False)
    return CheckResult.passed("facilitator", f"{where} settles on {network}")


async def _refused_at_door(client: httpx.AsyncClient, url: str, api_key: str | None) -> bool:
    """Whether the facilitator refuses this merchant at its door: an empty body changes nothing anywhere
    (our facilitator answers it 400, or 401 at the door; others may not serve the route at all)."""
    headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
    response = await client.post(url.rstrip("/") + "/settle/status", content=b"{}", headers=headers)
    return response.status_code in (401, 403)


def remote_facilitator_check(url: str, network: str, *, where: str | None = None) -> Check:
    """`check_remote_facilitator` as a `Check` (what `/readyz` runs)."""
    return Check("facilitator", lambda: check_remote_facilitator(url, network, where=where))


def shown_url(url: str) -> str:
    """`url` without what may be a credential: user info and query (a webhook or facilitator URL may carry
    a token there)."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        return "(an invalid URL)"
    return str(parsed.copy_with(username=None, password=None, query=None, fragment=None))

"""Bearer JWTs against a real issuer's JWK Set on 127.0.0.1, keys generated at run time."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from a2a_x402.agentcard import JwksCache
from a2a_x402.merchant.callers import Authenticator, CredentialRefused, JwtIssuer, JwtVerifier
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.jwt_issuer import AUDIENCE, Issuer


@pytest.fixture
async def authenticator(jwt_issuer: Issuer) -> AsyncIterator[Authenticator]:
    """An authenticator trusting `jwt_issuer` (no API keys), refetching an unknown kid after 1 s."""
    async with httpx.AsyncClient(timeout=HANG_S) as http:
        cache = JwksCache(http, allow_insecure_localhost=True, min_refetch_interval_s=1.0, max_bytes=8192)
        issuer = JwtIssuer(
            issuer=jwt_issuer.url, audience=AUDIENCE, jwks_url=jwt_issuer.jwks_url, leeway_s=30
        )
        yield Authenticator(None, [JwtVerifier(issuer, cache)])


async def test_a_valid_token_authenticates_issuer_and_subject(
    authenticator: Authenticator, jwt_issuer: Issuer
) -> None:
    caller = await authenticator.authenticate(f"Bearer {jwt_issuer.token('svc-42')}")

    assert caller is not None
    assert caller.principal == f"jwt:{jwt_issuer.url}#svc-42" and caller.tenants is None


async def test_a_token_expired_within_the_leeway_is_accepted(
    authenticator: Authenticator, jwt_issuer: Issuer
) -> None:
    token = jwt_issuer.token(exp=int(time.time()) - 5)
    assert await authenticator.authenticate(f"Bearer {token}") is not None


@pytest.mark.parametrize(
    "claims",
    [
        {"exp": -3600},  # expired beyond the leeway
        {"aud": "https://someone-else.test"},
        {"iss": "https://issuer.evil"},
        {"exp": None},
        {"sub": None},
        {"nbf": 3600},  # not yet valid
    ],
    ids=["expired", "wrong-audience", "wrong-issuer", "no-exp", "no-sub", "not-yet-valid"],
)
async def test_a_token_with_wrong_claims_is_refused(
    claims: dict[str, int | str | None],
    authenticator: Authenticator,
    jwt_issuer: Issuer,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    now = int(time.time())
    shifted: dict[str, Any] = {
        name: now + value if isinstance(value, int) else value for name, value in claims.items()
    }
    token = jwt_issuer.token(**shifted)

    with pytest.raises(CredentialRefused):
        await authenticator.authenticate(f"Bearer {token}")
    assert token.split(".")[2][:16] not in caplog.text


async def test_unsigned_and_hmac_tokens_are_refused(authenticator: Authenticator, jwt_issuer: Issuer) -> None:
    public = str(jwt_issuer.jwks()["keys"][0]).encode()
    for token in (
        jwt_issuer.forged({"alg": "none", "kid": "k1"}),
        jwt_issuer.forged({"alg": "none"}),
        jwt_issuer.forged({"alg": "HS256", "kid": "k1"}, public),
        jwt_issuer.forged({"alg": "ES256", "kid": "k1"}, b"\0" * 64),
        jwt_issuer.forged({"alg": "ES256"}),
    ):
        with pytest.raises(CredentialRefused):
            await authenticator.authenticate(f"Bearer {token}")


async def test_keys_are_cached_and_an_unknown_kid_is_fetched_again_at_most_once_a_while(
    authenticator: Authenticator, jwt_issuer: Issuer
) -> None:
    for _ in range(3):
        assert await authenticator.authenticate(f"Bearer {jwt_issuer.token()}") is not None
    assert jwt_issuer.fetches == 1

    with pytest.raises(CredentialRefused):  # an unknown kid right after a fetch: no refetch yet
        await authenticator.authenticate(f"Bearer {jwt_issuer.forged({'alg': 'ES256', 'kid': 'k9'})}")
    assert jwt_issuer.fetches == 1

    new_kid = jwt_issuer.rotate()
    deadline = time.monotonic() + HANG_S
    while True:
        try:
            caller = await authenticator.authenticate(f"Bearer {jwt_issuer.token(kid=new_kid)}")
            break
        except CredentialRefused:
            assert time.monotonic() < deadline, "the rotated key was never fetched"
            await asyncio.sleep(0.2)
    assert caller is not None
    assert jwt_issuer.fetches == 2


@settings(max_examples=60, deadline=None)
@given(st.text(min_size=1, max_size=300))
async def test_no_made_up_credential_authenticates(value: str) -> None:
    async with httpx.AsyncClient(timeout=HANG_S) as http:
        issuer = JwtIssuer(
            issuer="https://issuer.test", audience=AUDIENCE, jwks_url="https://issuer.test/jwks"
        )
        authenticator = Authenticator(None, [JwtVerifier(issuer, JwksCache(http))])
        for header in (value, f"Bearer {value}", f"Bearer x402k_{value}"):
            try:
                caller = await authenticator.authenticate(header)
            except CredentialRefused:
                continue
            raise AssertionError(f"{header!r} authenticated {caller}")

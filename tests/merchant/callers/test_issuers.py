"""Issuers trusted per tenant: a tenant's own issuer authenticates callers there only; the merchant-wide
one everywhere. Real JWK Sets on 127.0.0.1."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from a2a_x402.agentcard import JwksCache
from a2a_x402.merchant.callers import (
    API_KEY_SCHEME,
    JWT_SCHEME,
    Authenticator,
    CredentialRefused,
    JwtIssuer,
    JwtVerifier,
    merge_issuers,
)
from a2a_x402.merchant.settings import MerchantSettings
from a2a_x402.merchant.tenants import Tenant, TenantJwtIssuer, TenantRegistry
from a2a_x402.merchant.wiring import build_authenticator
from a2a_x402.storage import create_engine
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.jwt_issuer import AUDIENCE, Issuer

PAY_TO = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"


def trust(issuer: Issuer, tenants: frozenset[str] | None, audience: str = AUDIENCE) -> JwtIssuer:
    return JwtIssuer(issuer=issuer.url, audience=audience, jwks_url=issuer.jwks_url, tenants=tenants)


@pytest.fixture
async def jwks() -> AsyncIterator[JwksCache]:
    async with httpx.AsyncClient(timeout=HANG_S) as http:
        yield JwksCache(http, allow_insecure_localhost=True, min_refetch_interval_s=1.0)


def authenticator_of(cache: JwksCache, issuers: list[JwtIssuer]) -> Authenticator:
    return Authenticator(None, [JwtVerifier(issuer, cache) for issuer in merge_issuers(issuers)])


async def test_a_tenants_own_issuer_is_valid_at_that_tenant_only(
    jwks: JwksCache, jwt_issuer: Issuer, other_jwt_issuer: Issuer
) -> None:
    authenticator = authenticator_of(
        jwks, [trust(jwt_issuer, None), trust(other_jwt_issuer, frozenset({"acme"}))]
    )

    everywhere = await authenticator.authenticate(f"Bearer {jwt_issuer.token('svc')}")
    acme_only = await authenticator.authenticate(f"Bearer {other_jwt_issuer.token('svc')}")

    assert everywhere is not None and everywhere.tenants is None
    assert acme_only is not None and acme_only.tenants == frozenset({"acme"})
    assert acme_only.principal == f"jwt:{other_jwt_issuer.url}#svc" != everywhere.principal
    assert authenticator.schemes == (JWT_SCHEME,)
    assert authenticator.schemes_at("acme") == authenticator.schemes_at("globex") == (JWT_SCHEME,)


async def test_the_schemes_at_a_tenant_name_jwts_only_where_an_issuer_is_trusted(
    jwks: JwksCache, jwt_issuer: Issuer
) -> None:
    authenticator = authenticator_of(jwks, [trust(jwt_issuer, frozenset({"acme"}))])

    assert authenticator.schemes == (JWT_SCHEME,)
    assert authenticator.schemes_at("acme") == (JWT_SCHEME,)
    assert authenticator.schemes_at("globex") == authenticator.schemes_at("") == ()
    assert Authenticator(None).schemes_at("acme") == ()
    with_keys = Authenticator(object(), [])  # type: ignore[arg-type]
    assert with_keys.schemes_at("acme") == (API_KEY_SCHEME,)


async def test_one_issuer_trusted_by_two_tenants_is_checked_once_and_valid_at_both(
    jwks: JwksCache, jwt_issuer: Issuer
) -> None:
    issuers = [trust(jwt_issuer, frozenset({"acme"})), trust(jwt_issuer, frozenset({"globex"}))]
    assert merge_issuers(issuers) == [trust(jwt_issuer, frozenset({"acme", "globex"}))]
    assert merge_issuers([*issuers, trust(jwt_issuer, None)]) == [trust(jwt_issuer, None)]

    caller = await authenticator_of(jwks, issuers).authenticate(f"Bearer {jwt_issuer.token('svc')}")

    assert caller is not None and caller.tenants == frozenset({"acme", "globex"})
    assert jwt_issuer.fetches == 1


async def test_one_issuer_with_two_audiences_opens_only_the_tenant_whose_audience_the_token_names(
    jwks: JwksCache, jwt_issuer: Issuer
) -> None:
    authenticator = authenticator_of(
        jwks,
        [trust(jwt_issuer, frozenset({"acme"})), trust(jwt_issuer, frozenset({"globex"}), audience="globex")],
    )

    for_acme = await authenticator.authenticate(f"Bearer {jwt_issuer.token('svc')}")
    for_globex = await authenticator.authenticate(f"Bearer {jwt_issuer.token('svc', aud='globex')}")
    for_both = await authenticator.authenticate(f"Bearer {jwt_issuer.token('svc', aud=[AUDIENCE, 'globex'])}")

    assert for_acme is not None and for_acme.tenants == frozenset({"acme"})
    assert for_globex is not None and for_globex.tenants == frozenset({"globex"})
    assert for_both is not None and for_both.tenants == frozenset({"acme", "globex"})
    with pytest.raises(CredentialRefused, match="refused"):
        await authenticator.authenticate(f"Bearer {jwt_issuer.token('svc', aud='elsewhere')}")


async def test_a_token_signed_by_another_issuers_keys_in_a_trusted_name_is_refused(
    jwks: JwksCache, jwt_issuer: Issuer, other_jwt_issuer: Issuer
) -> None:
    # other_jwt_issuer signs a token claiming jwt_issuer's iss: no key of jwt_issuer's set verifies it.
    authenticator = authenticator_of(jwks, [trust(jwt_issuer, frozenset({"acme"}))])
    other_jwt_issuer.keys = [(jwt_issuer.keys[0][0], other_jwt_issuer.keys[0][1])]

    with pytest.raises(CredentialRefused):
        await authenticator.authenticate(f"Bearer {other_jwt_issuer.token('svc', iss=jwt_issuer.url)}")
    with pytest.raises(CredentialRefused, match="not trusted"):
        await authenticator.authenticate(f"Bearer {other_jwt_issuer.token('svc')}")


async def test_the_merchant_trusts_its_own_issuer_everywhere_and_each_tenants_where_it_is_named(
    sqlite_url: str, jwt_issuer: Issuer, other_jwt_issuer: Issuer
) -> None:
    settings = MerchantSettings(
        asset="0x" + "11" * 20,
        pay_to="0x" + "22" * 20,
        jwt_issuer=jwt_issuer.url,
        jwt_audience=AUDIENCE,
        jwt_jwks_url=jwt_issuer.jwks_url,
        _env_file=None,
    )
    own = TenantJwtIssuer(issuer=other_jwt_issuer.url, audience=AUDIENCE, jwks_url=other_jwt_issuer.jwks_url)
    tenants = TenantRegistry(
        [
            Tenant(id="", pay_to=PAY_TO, price=1),
            Tenant(id="acme", pay_to=PAY_TO, price=1, jwt_issuers=(own,)),
            Tenant(id="globex", pay_to=PAY_TO, price=1, jwt_issuers=(own,)),
            Tenant(id="initech", pay_to=PAY_TO, price=1),
        ]
    )
    engine = create_engine(sqlite_url)
    try:
        async with httpx.AsyncClient(timeout=HANG_S) as http:
            authenticator = build_authenticator(settings, engine, http, tenants)
            everywhere = await authenticator.authenticate(f"Bearer {jwt_issuer.token('svc')}")
            shared = await authenticator.authenticate(f"Bearer {other_jwt_issuer.token('svc')}")
    finally:
        await engine.dispose()

    assert everywhere is not None and everywhere.tenants is None
    assert shared is not None and shared.tenants == frozenset({"acme", "globex"})
    assert len(authenticator.issuers) == 2
    assert authenticator.schemes_at("initech") == (API_KEY_SCHEME, JWT_SCHEME)  # the merchant-wide issuer

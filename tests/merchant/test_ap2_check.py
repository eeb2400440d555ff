"""The `ap2` preflight check: passes for a tenant that can be offered the embedded flow, warns (not fatal)
of a plain-http jwksUrl, no trusted issuer, an https issuer source that gives no keys, and prices the price
rule never lets in, and is fatal without the AP2 SDK; the whole check run includes it only where a tenant
declares `ap2`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from joserfc.jwk import ECKey

from a2a_x402.merchant import _ap2_check
from a2a_x402.merchant._ap2_check import check_ap2, declares_ap2
from a2a_x402.merchant.settings import MerchantSettings
from a2a_x402.merchant.tenants import TenantRegistry
from tests.agentcard.conftest import KeyServer
from tests.fixtures.merchant import DEFAULT_PAY_TO
from tests.merchant.ap2.support import write_key

ASSET = "0x036CbD53842c5426634e7929541eC2318f3dCF7e"


def settings(tmp_path: Path, **overrides: Any) -> MerchantSettings:
    values: dict[str, Any] = {
        "database_url": f"sqlite+aiosqlite:///{tmp_path / 'x402.db'}",
        "asset": ASSET,
        "pay_to": DEFAULT_PAY_TO,
        "public_url": "https://shop.example",
        "_env_file": None,
        **overrides,
    }
    return MerchantSettings(**values)


def registry(
    tmp_path: Path, *, price: int = 100_000, issuers: bool = True, urls: tuple[str, ...] = ()
) -> TenantRegistry:
    write_key(tmp_path / "acme.pem")
    pem = write_key(tmp_path / "surface.pem").private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = ECKey.import_key(pem).as_dict(private=False) | {"kid": "surface-1"}
    (tmp_path / "surface.jwks.json").write_text(json.dumps({"keys": [public]}))
    sources = ['"surface.jwks.json"'] if issuers else []
    sources += [f'"{url}"' for url in urls]
    trusted = f"issuers = [{', '.join(sources)}]\n" if sources else ""
    (tmp_path / "t.toml").write_text(
        f'[tenants.acme]\npay_to = "{DEFAULT_PAY_TO}"\nprice = {price}\n'
        f'[tenants.acme.ap2]\nmerchant = {{ id = "acme.example", name = "Acme" }}\n'
        f'checkout_keys = ["acme.pem"]\n{trusted}'
        f'[tenants.globex]\npay_to = "{DEFAULT_PAY_TO}"\nprice = 1\n'
    )
    return TenantRegistry.from_toml(tmp_path / "t.toml")


def public_jwk(path: Path, kid: str) -> dict[str, Any]:
    """The public JWK of a fresh P-256 key written to `path`, named `kid`."""
    pem = write_key(path).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return ECKey.import_key(pem).as_dict(private=False) | {"kid": kid}


async def test_a_tenant_that_can_be_offered_passes(tmp_path: Path) -> None:
    result = await check_ap2(registry(tmp_path), settings(tmp_path))
    assert result.ok, result.detail
    summary = "1 checkout key(s), 1 issuer key(s) in files, 0 https issuer source(s)"
    assert result.detail == f"the embedded flow for acme ({summary})"


async def test_what_keeps_checkouts_from_clients_is_a_problem_but_not_fatal(tmp_path: Path) -> None:
    tenants = registry(tmp_path, price=100_001, issuers=False)
    result = await check_ap2(tenants, settings(tmp_path, public_url="http://127.0.0.1:8000"))
    assert (result.ok, result.fatal) == (False, False)
    assert result.detail == (
        "acme: trusts no mandate issuer (ap2.issuers); "
        "acme: no price is a whole number of USD minor units, so no checkout is offered; "
        "the jwksUrl http://127.0.0.1:8000/.well-known/ap2/acme/jwks.json is not https (X402_PUBLIC_URL): "
        "AP2 clients refuse it"
    )


async def test_https_issuer_sources_are_fetched_once_and_one_that_fails_is_not_fatal(
    tmp_path: Path, tls_key_server: KeyServer, tls_ca_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(tls_ca_file))
    tls_key_server.jwks = {"keys": [public_jwk(tmp_path / "agents.pem", "agents-1")]}
    tenants = registry(tmp_path, urls=(tls_key_server.jwks_url,))
    result = await check_ap2(tenants, settings(tmp_path))
    assert result.ok, result.detail
    assert "1 issuer key(s) in files, 1 https issuer source(s)" in result.detail
    assert tls_key_server.hits["/.well-known/jwks.json"] == 1

    tenants = registry(tmp_path, urls=(tls_key_server.jwks_url, tls_key_server.url("/failing")))
    result = await check_ap2(tenants, settings(tmp_path))
    assert (result.ok, result.fatal) == (False, False)
    assert result.detail == f"acme: issuer source {tls_key_server.url('/failing')} answered HTTP 500"


async def test_without_the_sdk_it_is_fatal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_ap2_check, "ap2_sdk_available", lambda: False)
    result = await check_ap2(registry(tmp_path), settings(tmp_path))
    assert (result.ok, result.fatal) == (False, True)
    assert "the AP2 SDK cannot be imported" in result.detail


def test_only_a_tenant_in_the_embedded_flow_asks_for_the_check(tmp_path: Path) -> None:
    assert declares_ap2(registry(tmp_path))
    assert not declares_ap2(TenantRegistry.default(pay_to=DEFAULT_PAY_TO, price=1))

"""The `ap2` preflight check: passes for a tenant that can be offered the embedded flow, warns (not fatal)
of a plain-http jwksUrl, no trusted issuer and prices the price rule never lets in, and is fatal without
the AP2 SDK; the whole check run includes it only where a tenant declares `ap2`."""

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


def registry(tmp_path: Path, *, price: int = 100_000, issuers: bool = True) -> TenantRegistry:
    write_key(tmp_path / "acme.pem")
    pem = write_key(tmp_path / "surface.pem").private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    public = ECKey.import_key(pem).as_dict(private=False) | {"kid": "surface-1"}
    (tmp_path / "surface.jwks.json").write_text(json.dumps({"keys": [public]}))
    trusted = 'issuers = ["surface.jwks.json"]\n' if issuers else ""
    (tmp_path / "t.toml").write_text(
        f'[tenants.acme]\npay_to = "{DEFAULT_PAY_TO}"\nprice = {price}\n'
        f'[tenants.acme.ap2]\nmerchant = {{ id = "acme.example", name = "Acme" }}\n'
        f'checkout_keys = ["acme.pem"]\n{trusted}'
        f'[tenants.globex]\npay_to = "{DEFAULT_PAY_TO}"\nprice = 1\n'
    )
    return TenantRegistry.from_toml(tmp_path / "t.toml")


async def test_a_tenant_that_can_be_offered_passes(tmp_path: Path) -> None:
    result = await check_ap2(registry(tmp_path), settings(tmp_path))
    assert result.ok, result.detail
    assert result.detail == "the embedded flow for acme (1 checkout key(s), 1 issuer key(s))"


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


async def test_without_the_sdk_it_is_fatal(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_ap2_check, "ap2_sdk_available", lambda: False)
    result = await check_ap2(registry(tmp_path), settings(tmp_path))
    assert (result.ok, result.fatal) == (False, True)
    assert "the AP2 SDK cannot be imported" in result.detail


def test_only_a_tenant_in_the_embedded_flow_asks_for_the_check(tmp_path: Path) -> None:
    assert declares_ap2(registry(tmp_path))
    assert not declares_ap2(TenantRegistry.default(pay_to=DEFAULT_PAY_TO, price=1))

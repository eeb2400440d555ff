"""Merchant settings: what the in-process facilitator receives from them."""

from __future__ import annotations

import os

import pytest
from eth_account import Account
from pydantic import ValidationError

from a2a_x402.merchant.settings import MerchantSettings

_BASE = {"asset": "0x" + "11" * 20, "pay_to": "0x" + "22" * 20, "_env_file": None}


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No X402_* variable from outside."""
    for name in [name for name in os.environ if name.startswith("X402_")]:
        monkeypatch.delenv(name)


def test_the_in_process_facilitator_deploys_through_the_merchants_wallet_factories_only() -> None:
    factory = Account.create().address

    listed = MerchantSettings(**_BASE, erc6492_factories=factory.lower())  # type: ignore[arg-type]
    default = MerchantSettings(**_BASE)  # type: ignore[arg-type]

    assert listed.facilitator_settings().erc6492_factory_addresses == (factory,)
    assert default.facilitator_settings().erc6492_factory_addresses == ()


def test_a_wallet_factory_that_is_not_an_address_is_refused_by_the_merchants_settings() -> None:
    with pytest.raises(ValidationError, match="'0x12' is not an address"):
        MerchantSettings(**_BASE, erc6492_factories="0x12")  # type: ignore[arg-type]

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


def test_the_operators_explorers_are_read_per_network_and_a_bad_entry_is_named_without_its_url() -> None:
    given = " eip155:8453=https://base.blockscout.com , ,eip155:1328=https://seitrace.com?chain=atlantic-2"

    settings = MerchantSettings(**_BASE, explorers=given)  # type: ignore[arg-type]

    assert settings.explorer_urls() == {
        "eip155:8453": "https://base.blockscout.com",
        "eip155:1328": "https://seitrace.com?chain=atlantic-2",
    }
    assert MerchantSettings(**_BASE).explorer_urls() == {}  # type: ignore[arg-type]
    refusals = {
        "https://base.blockscout.com": "entry 1 is not eip155:<chain id>=<base URL>",
        "base=https://base.blockscout.com": "entry 1: the network must be a CAIP-2 EVM chain id",
        "eip155:1=https://a.example,eip155:8453=ftp://key@b.example": r"entry 2 \(eip155:8453\): the URL",
        "eip155:1=https://a.example,eip155:1=https://b.example": "entry 2: eip155:1 is given twice",
    }
    for value, refusal in refusals.items():
        with pytest.raises(ValidationError, match=refusal) as refused:
            MerchantSettings(**_BASE, explorers=value)  # type: ignore[arg-type]
        assert "key@" not in refused.value.errors()[0]["msg"]

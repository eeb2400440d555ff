"""Permit2's EIP-712 digest and its signer: the same hash eth-account's own encoder makes of the SDK's type
definitions, so the signatures of the x402 SDK's clients recover to their payer."""

from __future__ import annotations

from typing import Any

import pytest
from eth_account import Account
from eth_account.messages import encode_typed_data
from eth_utils.crypto import keccak
from x402.mechanisms.evm import constants as sdk

from a2a_x402.facilitator._permit2 import (
    EXACT_PERMIT2_PROXY,
    PERMIT2_ADDRESS,
    UPTO_PERMIT2_PROXY,
    permit2_digest,
    permit2_domain_separator,
    permit2_signer,
)
from a2a_x402.facilitator.wire import (
    ExactPermit2Authorization,
    UptoPermit2Authorization,
    parse_permit2_payment_payload,
)
from tests.facilitator.payments import SECP256K1_N
from tests.facilitator.permit2_payments import (
    CHAIN_ID,
    PAYER_KEY,
    requirements,
    resign,
    sdk_payment,
)

PAYER = Account.from_key(PAYER_KEY).address


@pytest.fixture(scope="module", params=["exact", "upto"])
def payment(request: pytest.FixtureRequest) -> dict[str, Any]:
    return sdk_payment(requirements(request.param))


def _authorization(payment: dict[str, Any]) -> ExactPermit2Authorization | UptoPermit2Authorization:
    return parse_permit2_payment_payload(payment).payload.permit2_authorization


def _signature(payment: dict[str, Any]) -> bytes:
    return bytes.fromhex(payment["payload"]["signature"][2:])


def test_the_addresses_are_the_sdks() -> None:
    assert PERMIT2_ADDRESS == sdk.PERMIT2_ADDRESS
    assert EXACT_PERMIT2_PROXY == sdk.X402_EXACT_PERMIT2_PROXY_ADDRESS
    assert UPTO_PERMIT2_PROXY == sdk.X402_UPTO_PERMIT2_PROXY_ADDRESS


def test_the_digest_is_eth_accounts_hash_of_the_typed_data(payment: dict[str, Any]) -> None:
    authorization = _authorization(payment)
    wire = payment["payload"]["permit2Authorization"]
    upto = isinstance(authorization, UptoPermit2Authorization)
    witness_types = sdk.UPTO_PERMIT2_WITNESS_TYPES if upto else sdk.PERMIT2_WITNESS_TYPES
    witness = {"to": wire["witness"]["to"], "validAfter": int(wire["witness"]["validAfter"])}
    if upto:
        witness["facilitator"] = wire["witness"]["facilitator"]
    typed = encode_typed_data(
        domain_data={"name": "Permit2", "chainId": CHAIN_ID, "verifyingContract": sdk.PERMIT2_ADDRESS},
        message_types=witness_types,
        message_data={
            "permitted": {"token": wire["permitted"]["token"], "amount": int(wire["permitted"]["amount"])},
            "spender": wire["spender"],
            "nonce": int(wire["nonce"]),
            "deadline": int(wire["deadline"]),
            "witness": witness,
        },
    )

    expected = keccak(b"\x19" + typed.version + typed.header + typed.body)
    assert permit2_digest(authorization, CHAIN_ID) == expected


def test_the_domain_separator_is_the_one_permit2_reports_on_chain() -> None:
    # Permit2's DOMAIN_SEPARATOR() on Ethereum mainnet and on Base.
    assert (
        permit2_domain_separator(1).hex()
        == "866a5aba21966af95d6c7ab78eb2b2fc913915c28be3b9aa07cc04ff903e3f28"
    )
    assert (
        permit2_domain_separator(8453).hex()
        == "3b6f35e4fce979ef8eac3bcdc8c3fc38fe7911bb0c69c8fe72bf1fd1a17e6f07"
    )


def test_the_sdks_signature_recovers_to_the_payer(payment: dict[str, Any]) -> None:
    digest = permit2_digest(_authorization(payment), CHAIN_ID)

    assert permit2_signer(digest, _signature(payment)) == PAYER


def test_eth_account_signs_what_the_sdk_signs(payment: dict[str, Any]) -> None:
    # RFC 6979 signatures are deterministic: the same digest gives the same signature.
    assert resign(payment) == payment


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("permitted.amount", "1500001"),
        ("permitted.token", "0xa0Ee7A142d267C1f36714E4a8F75612F20a79720"),
        ("spender", "0xa0Ee7A142d267C1f36714E4a8F75612F20a79720"),
        ("nonce", "1"),
        ("deadline", "1"),
        ("witness.to", "0x5FbDB2315678afecb367f032d93F642f64180aa3"),
        ("witness.validAfter", "1"),
    ],
)
def test_every_signed_field_changes_the_digest(payment: dict[str, Any], field: str, value: str) -> None:
    original = permit2_digest(_authorization(payment), CHAIN_ID)
    tampered = resign(payment, {field: value})

    assert permit2_digest(_authorization(tampered), CHAIN_ID) != original
    assert permit2_signer(original, _signature(tampered)) != PAYER


def test_the_upto_facilitator_and_the_chain_are_signed() -> None:
    payment = sdk_payment(requirements("upto"))
    authorization = _authorization(payment)
    elsewhere = _authorization(resign(payment, {"witness.facilitator": PAYER}))

    assert permit2_digest(elsewhere, CHAIN_ID) != permit2_digest(authorization, CHAIN_ID)
    assert permit2_signer(permit2_digest(authorization, 1), _signature(payment)) != PAYER


def test_a_compact_eip2098_signature_recovers_to_the_same_signer(payment: dict[str, Any]) -> None:
    signature = _signature(payment)
    r, s, v = signature[:32], int.from_bytes(signature[32:64], "big"), signature[64]
    compact = r + (s | ((v - 27) << 255)).to_bytes(32, "big")
    digest = permit2_digest(_authorization(payment), CHAIN_ID)

    assert permit2_signer(digest, compact) == PAYER


def test_malleable_and_misshapen_signatures_recover_to_nobody(payment: dict[str, Any]) -> None:
    signature = _signature(payment)
    digest = permit2_digest(_authorization(payment), CHAIN_ID)
    s = int.from_bytes(signature[32:64], "big")
    high_s = signature[:32] + (SECP256K1_N - s).to_bytes(32, "big") + bytes([55 - signature[64]])

    assert permit2_signer(digest, high_s) is None
    assert permit2_signer(digest, signature[:63]) is None
    assert permit2_signer(digest, signature + b"\x00") is None
    assert permit2_signer(digest, bytes(65)) is None

"""The kit's own Permit2 signing: what Permit2 and the facilitator recover, within the card and the caps."""

from __future__ import annotations

from typing import Any

import pytest
from eth_account import Account

from a2a_x402.conformance._card import Discovery
from a2a_x402.conformance._chain import PERMIT2_ADDRESS
from a2a_x402.conformance._permit2 import EXACT_PROXY, UPTO_PROXY, payment_kind, sign_permit2
from a2a_x402.conformance._signer import Signer, UnsafeTerms, payload_v2
from a2a_x402.facilitator._permit2 import permit2_digest, permit2_signer
from a2a_x402.facilitator.wire import ExactPermit2PaymentPayload, UptoPaymentPayload

NETWORK = "eip155:31337"
ASSET = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
PAY_TO = "0x23618e81E3f5cdF7f54C3d65f7FBc0aBf5B21E8f"
FACILITATOR = "0x7382AE0Cb2DADb1a56c3140A673FAA9dcB603bF8"
EXACT: dict[str, Any] = {
    "scheme": "exact",
    "network": NETWORK,
    "asset": ASSET,
    "amount": "250000",
    "payTo": PAY_TO,
    "maxTimeoutSeconds": 300,
    "extra": {"assetTransferMethod": "permit2", "offerId": "a1"},
}
UPTO: dict[str, Any] = {
    **EXACT,
    "scheme": "upto",
    "amount": "500000",
    "extra": {"facilitatorAddress": FACILITATOR, "offerId": "b2"},
}


def _signer(max_amount: int = 1_000_000) -> Signer:
    discovery = Discovery(
        "http://merchant.test/.well-known/agent-card.json",
        {},
        networks=frozenset({NETWORK}),
        assets={(NETWORK, ASSET): {}},
        payees={(NETWORK, ""): frozenset({PAY_TO})},
    )
    return Signer(Account.create().key.to_0x_hex(), discovery, max_amount=max_amount)


@pytest.mark.parametrize(
    ("entry", "model", "spender"),
    [(EXACT, ExactPermit2PaymentPayload, EXACT_PROXY), (UPTO, UptoPaymentPayload, UPTO_PROXY)],
    ids=["exact", "upto"],
)
def test_the_signature_recovers_the_payer_as_permit2_hashes_it(entry: Any, model: Any, spender: str) -> None:
    signer = _signer()
    signed = sign_permit2(signer, entry, tenant="", network=NETWORK, amount=int(entry["amount"]))

    payload = model.model_validate(payload_v2(entry, signed))  # the wire form the merchant reads
    authorization = payload.payload.permit2_authorization
    digest = permit2_digest(authorization, 31337)
    assert permit2_signer(digest, bytes.fromhex(signed.signature[2:])) == signer.address
    assert (authorization.spender, authorization.witness.to, authorization.permitted.amount) == (
        spender,
        PAY_TO,
        int(entry["amount"]),
    )
    assert signed.permit2 and signed.nonce_at == PERMIT2_ADDRESS
    assert int(signed.nonce, 16) == authorization.nonce


@pytest.mark.parametrize(
    ("entry", "max_amount", "words"),
    [
        ({**UPTO, "extra": {"facilitatorAddress": PERMIT2_ADDRESS}}, 1_000_000, "no facilitator can be that"),
        ({**UPTO, "extra": {"facilitatorAddress": "nobody"}}, 1_000_000, "is not an address"),
        ({**UPTO, "extra": {}}, 1_000_000, "is not an address"),
        (UPTO, 400_000, "over the offered 500000 or the cap 400000"),
        ({**EXACT, "payTo": FACILITATOR}, 1_000_000, "the card does not list payTo"),
        ({**EXACT, "extra": {}}, 1_000_000, "not paid by Permit2"),
    ],
    ids=[
        "facilitator-is-permit2",
        "facilitator-not-address",
        "no-facilitator",
        "over-cap",
        "pay-to",
        "eip3009",
    ],
)
def test_the_kit_signs_no_permit2_payment_it_must_not(entry: Any, max_amount: int, words: str) -> None:
    with pytest.raises(UnsafeTerms, match=words):
        sign_permit2(_signer(max_amount), entry, tenant="", network=NETWORK, amount=int(entry["amount"]))


def test_each_entry_is_read_as_its_kind() -> None:
    assert [
        payment_kind(entry)
        for entry in (
            EXACT,
            UPTO,
            {**EXACT, "extra": {"name": "USDC", "version": "2"}},
            {**EXACT, "extra": {"assetTransferMethod": "eip3009"}},
            {**EXACT, "extra": {"assetTransferMethod": "teleport"}},
            {**EXACT, "scheme": "deferred"},
            "not an entry",
        )
    ] == ["permit2", "upto", "eip3009", "eip3009", "", "", ""]

"""The payer's Permit2 signatures against the x402 Python SDK's: the same requirements, nonce and clock
signed both ways give the same document, byte for byte, for `exact` by Permit2 and for `upto`; and what the
payer refuses to sign before any chain is asked."""

from __future__ import annotations

from typing import Any

import pytest
import x402.mechanisms.evm.exact.permit2_utils as sdk_exact
import x402.mechanisms.evm.upto.client as sdk_upto

from a2a_x402.devchain import EXACT_PERMIT2_PROXY_ADDRESS, PERMIT2_ADDRESS, UPTO_PERMIT2_PROXY_ADDRESS
from a2a_x402.facilitator._permit2 import permit2_digest, permit2_signer
from a2a_x402.facilitator.wire import PaymentRequirements
from a2a_x402.payer import _permit2_terms as ours
from a2a_x402.payer import sign_permit2_payment
from tests.facilitator.permit2_payments import CHAIN_ID, FACILITATOR, PAYER_KEY, requirements, sdk_payment

NONCE = 2**255 + 12345  # above 2**253: a JSON number would lose it
NOW = 1_900_000_000


@pytest.fixture
def fixed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK's nonce and clock fixed (ours are passed as arguments)."""
    monkeypatch.setattr(sdk_exact, "create_permit2_nonce", lambda: str(NONCE))
    monkeypatch.setattr(sdk_upto, "create_permit2_nonce", lambda: str(NONCE))
    monkeypatch.setattr("time.time", lambda: float(NOW))


@pytest.mark.usefixtures("fixed")
@pytest.mark.parametrize("scheme", ["exact", "upto"])
def test_the_payer_signs_what_the_sdk_signs(scheme: str) -> None:
    wire = requirements(scheme)
    theirs = sdk_payment(wire)

    mine = sign_permit2_payment(PAYER_KEY, PaymentRequirements.from_wire(wire), nonce=NONCE, valid_after=0)

    assert mine.payload.to_json_dict() == theirs["payload"]
    assert mine.to_json_dict()["accepted"] == wire


@pytest.mark.parametrize(
    ("scheme", "spender"), [("exact", EXACT_PERMIT2_PROXY_ADDRESS), ("upto", UPTO_PERMIT2_PROXY_ADDRESS)]
)
def test_the_spender_is_the_schemes_canonical_proxy_whatever_the_terms_say(scheme: str, spender: str) -> None:
    wire = requirements(scheme)
    wire["extra"] |= {"spender": FACILITATOR, "permit2Proxy": FACILITATOR}
    signed = sign_permit2_payment(PAYER_KEY, PaymentRequirements.from_wire(wire))
    authorization = signed.payload.permit2_authorization

    assert authorization.spender == spender
    assert permit2_signer(
        permit2_digest(authorization, CHAIN_ID), bytes.fromhex(signed.payload.signature[2:])
    )
    assert authorization.permitted.amount == int(wire["amount"])
    assert authorization.witness.to == wire["payTo"]


def test_the_canonical_addresses_are_the_dev_chains_and_the_facilitators() -> None:
    from a2a_x402.facilitator import _permit2 as facilitator

    assert (ours.PERMIT2_ADDRESS, ours.EXACT_PERMIT2_PROXY_ADDRESS, ours.UPTO_PERMIT2_PROXY_ADDRESS) == (
        PERMIT2_ADDRESS,
        EXACT_PERMIT2_PROXY_ADDRESS,
        UPTO_PERMIT2_PROXY_ADDRESS,
    )
    assert (facilitator.EXACT_PERMIT2_PROXY, facilitator.UPTO_PERMIT2_PROXY) == (
        EXACT_PERMIT2_PROXY_ADDRESS,
        UPTO_PERMIT2_PROXY_ADDRESS,
    )


def test_the_window_runs_from_ten_minutes_ago_to_the_terms_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("time.time", lambda: float(NOW))
    authorization = sign_permit2_payment(
        PAYER_KEY, PaymentRequirements.from_wire(requirements("exact"))
    ).payload.permit2_authorization

    assert (authorization.witness.valid_after, authorization.deadline) == (NOW - 600, NOW + 120)


def _upto(**extra: Any) -> PaymentRequirements:
    wire = requirements("upto")
    wire["extra"] |= extra
    wire["extra"] = {k: v for k, v in wire["extra"].items() if v is not None}
    return PaymentRequirements.from_wire(wire)


@pytest.mark.parametrize(
    ("terms", "reason"),
    [
        pytest.param(_upto(facilitatorAddress=None), "name no facilitator", id="no-facilitator"),
        pytest.param(_upto(facilitatorAddress="0x" + "0" * 40), "zero address", id="zero"),
        pytest.param(_upto(facilitatorAddress=PERMIT2_ADDRESS), "contract of the payment", id="permit2"),
        pytest.param(_upto(facilitatorAddress=UPTO_PERMIT2_PROXY_ADDRESS), "contract", id="proxy"),
        pytest.param(_upto(facilitatorAddress="0x" + "ab" * 19), "facilitatorAddress", id="malformed"),
        pytest.param(
            PaymentRequirements.from_wire(requirements("exact", extra={"assetTransferMethod": "magic"})),
            "'magic' is not one the payer signs",
            id="unknown-method",
        ),
        pytest.param(
            PaymentRequirements.from_wire(requirements("exact", extra={"name": "USDC", "version": "2"})),
            "not paid by Permit2",
            id="eip3009-terms",
        ),
    ],
)
def test_terms_the_payer_refuses_to_sign(terms: PaymentRequirements, reason: str) -> None:
    with pytest.raises(ValueError, match=reason) as caught:
        sign_permit2_payment(PAYER_KEY, terms)

    assert PAYER_KEY[2:] not in str(caught.value)


def test_each_signature_takes_a_fresh_random_nonce() -> None:
    terms = PaymentRequirements.from_wire(requirements("upto"))

    nonces = {sign_permit2_payment(PAYER_KEY, terms).payload.permit2_authorization.nonce for _ in range(8)}

    assert len(nonces) == 8
    assert max(nonces) > 2**128  # drawn from the whole uint256 range, not a counter

"""The checks of a Permit2 payment made without the chain: the SDK clients' payments pass, and each rule,
broken by a payment signed as it stands, is refused with the reason the x402 SDKs give."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import pytest
from eth_abi.abi import encode as abi_encode
from hypothesis import given, settings
from hypothesis import strategies as st

from a2a_x402.facilitator._erc6492 import ERC6492_MAGIC
from a2a_x402.facilitator._errors import PaymentInvalidError
from a2a_x402.facilitator._permit2 import EXACT_PERMIT2_PROXY, UPTO_PERMIT2_PROXY
from a2a_x402.facilitator._permit2_rules import Permit2Signature, Permit2Terms, check_permit2, permit2_terms
from a2a_x402.facilitator.wire import PaymentRequirements, Reason, parse_permit2_payment_payload
from tests.facilitator.permit2_payments import (
    AMOUNT,
    ASSET,
    CHAIN_ID,
    FACILITATOR,
    PAY_TO,
    PAYER_KEY,
    STRANGER_KEY,
    requirements,
    resign,
    sdk_payment,
)
from tests.fixtures.node import NodeScript

_TS_CLIENT = Path(__file__).resolve().parent / "js" / "ts_permit2.cjs"
ZERO = "0x" + "00" * 20
OTHER = "0x90F79bf6EB2c4f870365E785982E1f101E93b906"
MARGIN = 6


@pytest.fixture(scope="module")
def exact_payment() -> dict[str, Any]:
    return sdk_payment(requirements("exact"))


@pytest.fixture(scope="module")
def upto_payment() -> dict[str, Any]:
    return sdk_payment(requirements("upto"))


def _check(
    payment: dict[str, Any],
    offer: dict[str, Any] | None = None,
    *,
    settling: bool = False,
    now: int | None = None,
    chain_id: int = CHAIN_ID,
    payer_has_code: bool | None = False,
) -> tuple[Permit2Terms, Permit2Signature]:
    parsed = parse_permit2_payment_payload(payment)
    terms = permit2_terms(
        parsed, PaymentRequirements.from_wire(offer or payment["accepted"]), settling=settling
    )
    signed = check_permit2(
        parsed.payload.permit2_authorization,
        parsed.payload.signature,
        terms,
        chain_id=chain_id,
        facilitators=frozenset({FACILITATOR}),
        now=int(time.time()) if now is None else now,
        margin_s=MARGIN,
        payer_has_code=payer_has_code,
    )
    return terms, signed


def _refused(payment: dict[str, Any], *args: Any, **kwargs: Any) -> PaymentInvalidError:
    with pytest.raises(PaymentInvalidError) as caught:
        _check(payment, *args, **kwargs)
    return caught.value


def test_the_sdks_exact_permit2_payment_passes(exact_payment: dict[str, Any]) -> None:
    terms, signed = _check(exact_payment)

    assert terms == Permit2Terms(
        scheme="exact",
        network=f"eip155:{CHAIN_ID}",
        chain_id=CHAIN_ID,
        asset=ASSET,
        pay_to=PAY_TO,
        amount=AMOUNT,
        settle_amount=AMOUNT,
    )
    assert signed.eoa and signed.factory is None
    assert signed.signature.hex() == exact_payment["payload"]["signature"][2:]


def test_the_sdks_upto_payment_passes_at_verification_and_at_settlement(upto_payment: dict[str, Any]) -> None:
    verified, _ = _check(upto_payment)
    charged, signed = _check(upto_payment, requirements("upto", amount="400000"), settling=True)
    nothing, _ = _check(upto_payment, requirements("upto", amount="0"), settling=True)

    assert (verified.amount, verified.settle_amount) == (AMOUNT, AMOUNT)
    assert (charged.amount, charged.settle_amount) == (AMOUNT, 400_000)
    assert nothing.settle_amount == 0
    assert signed.eoa


async def test_the_typescript_sdks_permit2_payments_pass(node_script: NodeScript) -> None:
    offers = [requirements("exact"), requirements("upto")]
    required = {"x402Version": 2, "resource": {"url": "https://merchant.test/"}, "accepts": offers}

    payments = await node_script.run(_TS_CLIENT, {"privateKey": PAYER_KEY, "paymentRequired": required})

    assert [payment["accepted"] for payment in payments] == offers
    for payment in payments:
        assert parse_permit2_payment_payload(payment).to_json_dict() == payment
        _, signed = _check(payment)
        assert signed.eoa


def test_an_upto_settlement_above_the_maximum_is_refused(upto_payment: dict[str, Any]) -> None:
    refusal = _refused(upto_payment, requirements("upto", amount=str(AMOUNT + 1)), settling=True)

    assert refusal.reason == Reason.INVALID_UPTO_EVM_PAYLOAD_SETTLEMENT_EXCEEDS_AMOUNT


def test_an_upto_verification_must_ask_for_the_maximum(upto_payment: dict[str, Any]) -> None:
    # Only a settlement may name less: a verification of less would check a smaller transfer than signed.
    refusal = _refused(upto_payment, requirements("upto", amount="400000"))

    assert refusal.reason == Reason.PERMIT2_AMOUNT_MISMATCH
    assert "amount" in refusal.message


def test_an_exact_settlement_must_ask_for_the_price(exact_payment: dict[str, Any]) -> None:
    refusal = _refused(exact_payment, requirements("exact", amount="400000"), settling=True)

    assert refusal.reason == Reason.PERMIT2_AMOUNT_MISMATCH


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("permitted.amount", str(AMOUNT + 1), Reason.PERMIT2_AMOUNT_MISMATCH),
        ("permitted.amount", str(AMOUNT - 1), Reason.PERMIT2_AMOUNT_MISMATCH),
        ("permitted.token", OTHER, Reason.PERMIT2_TOKEN_MISMATCH),
        ("spender", UPTO_PERMIT2_PROXY, Reason.INVALID_PERMIT2_SPENDER),
        ("spender", OTHER, Reason.INVALID_PERMIT2_SPENDER),
        ("witness.to", OTHER, Reason.INVALID_PERMIT2_RECIPIENT_MISMATCH),
        ("witness.to", ZERO, Reason.PERMIT2_INVALID_DESTINATION),
        ("witness.validAfter", str(2**255), Reason.PERMIT2_NOT_YET_VALID),
        ("deadline", "1", Reason.PERMIT2_DEADLINE_EXPIRED),
    ],
)
def test_a_broken_rule_is_refused_though_the_payer_signed_it(
    exact_payment: dict[str, Any], field: str, value: str, reason: Reason
) -> None:
    refusal = _refused(resign(exact_payment, {field: value}))

    assert refusal.reason == reason
    assert refusal.code == reason.value


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("spender", EXACT_PERMIT2_PROXY, Reason.INVALID_PERMIT2_SPENDER),
        ("witness.facilitator", OTHER, Reason.UPTO_FACILITATOR_MISMATCH),
        ("witness.to", OTHER, Reason.INVALID_PERMIT2_RECIPIENT_MISMATCH),
        ("permitted.amount", str(AMOUNT * 2), Reason.PERMIT2_AMOUNT_MISMATCH),
    ],
)
def test_a_broken_upto_rule_is_refused_though_the_payer_signed_it(
    upto_payment: dict[str, Any], field: str, value: str, reason: Reason
) -> None:
    assert _refused(resign(upto_payment, {field: value})).reason == reason


def test_a_tampered_amount_fails_first_on_the_amount(exact_payment: dict[str, Any]) -> None:
    tampered = resign(exact_payment)
    tampered["payload"]["permit2Authorization"]["permitted"]["amount"] = str(AMOUNT - 1)

    assert _refused(tampered).reason == Reason.PERMIT2_AMOUNT_MISMATCH


def test_the_owner_cannot_be_the_zero_address(exact_payment: dict[str, Any]) -> None:
    tampered = resign(exact_payment)
    tampered["payload"]["permit2Authorization"]["from"] = ZERO

    assert _refused(tampered).reason == Reason.PERMIT2_INVALID_OWNER


def test_the_deadline_must_leave_the_margin_and_valid_after_must_have_come(
    exact_payment: dict[str, Any],
) -> None:
    now = 1_800_000_000
    payment = resign(exact_payment, {"deadline": str(now + MARGIN), "witness.validAfter": str(now)})

    _check(payment, now=now)  # both bounds inclusive, as Permit2 and the proxy hold them
    assert _refused(payment, now=now + 1).reason == Reason.PERMIT2_DEADLINE_EXPIRED
    assert _refused(payment, now=now - 1).reason == Reason.PERMIT2_NOT_YET_VALID


def test_a_deadline_that_never_comes_is_accepted(exact_payment: dict[str, Any]) -> None:
    _, signed = _check(resign(exact_payment, {"deadline": str(2**256 - 1)}))

    assert signed.eoa


def test_another_chain_is_refused(exact_payment: dict[str, Any]) -> None:
    refusal = _refused(exact_payment, chain_id=1)

    assert refusal.reason == Reason.INVALID_NETWORK


def test_a_signature_for_another_chain_is_not_the_payers(exact_payment: dict[str, Any]) -> None:
    on_mainnet = resign(exact_payment, chain_id=1)

    assert _refused(on_mainnet).reason == Reason.INVALID_PERMIT2_SIGNATURE


def test_another_signer_is_refused_for_an_eoa_and_left_to_the_chain_for_a_wallet(
    exact_payment: dict[str, Any],
) -> None:
    by_stranger = resign(exact_payment, key=STRANGER_KEY)

    refusal = _refused(by_stranger, payer_has_code=False)
    _, unknown = _check(by_stranger, payer_has_code=None)
    _, wallet = _check(by_stranger, payer_has_code=True)

    assert refusal.reason == Reason.INVALID_PERMIT2_SIGNATURE
    assert not unknown.eoa and not wallet.eoa


@pytest.mark.parametrize(
    "signature",
    ["0x" + "00" * 65, "0x" + "ab" * 64, "0x" + "ab" * 66, "0x01", "0x" + "ff" * 4096],
    ids=["zero", "garbage-compact", "66-bytes", "one-byte", "4-KiB"],
)
def test_a_misshapen_signature_is_refused_for_an_eoa(exact_payment: dict[str, Any], signature: str) -> None:
    payment = resign(exact_payment)
    payment["payload"]["signature"] = signature

    refusal = _refused(payment)

    assert refusal.reason == Reason.INVALID_PERMIT2_SIGNATURE
    assert signature[2:20] not in refusal.message


def test_an_erc6492_wrapper_is_unwrapped_unless_it_wraps_an_eoas_signature(
    exact_payment: dict[str, Any],
) -> None:
    factory = OTHER
    stranger = bytes.fromhex(resign(exact_payment, key=STRANGER_KEY)["payload"]["signature"][2:])
    payers = bytes.fromhex(exact_payment["payload"]["signature"][2:])

    def wrapped(inner: bytes) -> dict[str, Any]:
        payment = resign(exact_payment)
        blob = abi_encode(["address", "bytes", "bytes"], [factory, b"\x12\x34", inner]) + ERC6492_MAGIC
        payment["payload"]["signature"] = "0x" + blob.hex()
        return payment

    _, counterfactual = _check(wrapped(stranger), payer_has_code=False)
    refusal = _refused(wrapped(payers))
    malformed = resign(exact_payment)
    malformed["payload"]["signature"] = "0x" + (b"\x01" * 40 + ERC6492_MAGIC).hex()

    assert counterfactual == Permit2Signature(
        digest=counterfactual.digest,
        signature=stranger,
        eoa=False,
        factory=factory,
        factory_calldata=b"\x12\x34",
    )
    assert refusal.reason == Reason.INVALID_PERMIT2_SIGNATURE
    assert _refused(malformed).reason == Reason.INVALID_PERMIT2_SIGNATURE


def test_terms_of_another_scheme_or_network_or_method_are_refused(
    exact_payment: dict[str, Any], upto_payment: dict[str, Any]
) -> None:
    assert _refused(exact_payment, requirements("upto")).reason == Reason.UNSUPPORTED_SCHEME
    assert _refused(upto_payment, requirements("exact")).reason == Reason.UNSUPPORTED_SCHEME
    assert _refused(exact_payment, requirements(network="eip155:1")).reason == Reason.NETWORK_MISMATCH
    eip3009 = requirements(extra={"name": "USDC", "version": "2", "assetTransferMethod": "eip3009"})
    assert _refused(exact_payment, eip3009).reason == Reason.INVALID_PAYLOAD
    bad_extra = requirements("upto", extra={"facilitatorAddress": "0x12"})
    refusal = _refused(upto_payment, bad_extra)
    assert (refusal.reason, refusal.message.split(":")[0]) == (
        Reason.INVALID_PAYMENT_REQUIREMENTS,
        "extra.facilitatorAddress",
    )


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("payTo", OTHER, Reason.INVALID_PERMIT2_RECIPIENT_MISMATCH),
        ("asset", OTHER, Reason.PERMIT2_TOKEN_MISMATCH),
        ("amount", str(AMOUNT + 1), Reason.PERMIT2_AMOUNT_MISMATCH),
        ("maxTimeoutSeconds", 600, Reason.INVALID_PAYLOAD),
    ],
)
def test_accepted_must_be_what_the_requirements_ask(
    exact_payment: dict[str, Any], field: str, value: object, reason: Reason
) -> None:
    refusal = _refused(exact_payment, requirements(**{field: value}))

    assert refusal.reason == reason
    assert refusal.message.endswith(f"differs from the requirements in: {field}")


def test_an_exact_payment_of_nothing_is_refused(exact_payment: dict[str, Any]) -> None:
    free = sdk_payment(requirements(amount="0"))

    assert _refused(free).reason == Reason.PERMIT2_AMOUNT_MISMATCH


def test_terms_of_the_other_scheme_do_not_fit_the_witness(upto_payment: dict[str, Any]) -> None:
    parsed = parse_permit2_payment_payload(upto_payment)
    terms, _ = _check(upto_payment)

    with pytest.raises(PaymentInvalidError) as caught:
        check_permit2(
            parsed.payload.permit2_authorization,
            parsed.payload.signature,
            dataclasses.replace(terms, scheme="exact"),
            chain_id=CHAIN_ID,
            facilitators=frozenset({FACILITATOR}),
            now=int(time.time()),
            margin_s=MARGIN,
        )

    assert caught.value.reason == Reason.INVALID_PAYLOAD


_SIGNED_FIELDS = {
    "from": st.just(OTHER),
    "permitted.token": st.just(OTHER),
    "permitted.amount": st.integers(0, 2**256 - 1).map(str),
    "spender": st.just(UPTO_PERMIT2_PROXY),
    "nonce": st.integers(0, 2**256 - 1).map(str),
    "deadline": st.integers(0, 2**256 - 1).map(str),
    "witness.to": st.just(OTHER),
    "witness.facilitator": st.just(OTHER),
    "witness.validAfter": st.integers(0, 2**256 - 1).map(str),
}


@settings(max_examples=60, deadline=None)
@given(data=st.data(), field=st.sampled_from(sorted(_SIGNED_FIELDS)))
def test_any_change_to_a_signed_field_is_refused(
    upto_payment: dict[str, Any], data: st.DataObject, field: str
) -> None:
    tampered = resign(upto_payment)
    *parents, last = field.split(".")
    target = tampered["payload"]["permit2Authorization"]
    for name in parents:
        target = target[name]
    value = data.draw(_SIGNED_FIELDS[field])
    if target[last] == value:
        return  # no change: nothing to refuse
    target[last] = value

    with pytest.raises(PaymentInvalidError):
        _check(tampered, payer_has_code=False)

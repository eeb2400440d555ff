"""`signer_of`: who signed a payload of any kind, and the key of the nonce it spends."""

from __future__ import annotations

from typing import Any

from a2a_x402.facilitator.wire import (
    PERMIT2_NONCE_PREFIX,
    PaymentPayload,
    PaymentPayloadV1,
    parse_permit2_payment_payload,
    payer_of,
    signer_of,
)
from tests.extension import documents as doc


def _permit2(scheme: str, nonce: int) -> dict[str, Any]:
    payment = doc.permit2_payload(scheme)
    payment["payload"]["permit2Authorization"]["nonce"] = str(nonce)
    return payment


def test_an_eip3009_payload_is_keyed_by_its_nonce_as_signed() -> None:
    for payload in (
        PaymentPayload.from_wire(doc.payload_v2()),
        PaymentPayloadV1.from_wire(doc.payload_v1()),
    ):
        assert signer_of(payload) == (doc.PAYER, doc.NONCE)
        assert payer_of(payload) == doc.PAYER


def test_a_permit2_payload_of_either_scheme_is_keyed_by_its_permit2_nonce() -> None:
    for scheme in ("exact", "upto"):
        payload = parse_permit2_payment_payload(_permit2(scheme, 2**256 - 1))
        signer = signer_of(payload)
        assert signer.payer == payer_of(payload) == doc.PAYER
        assert signer.nonce == PERMIT2_NONCE_PREFIX + "f" * 64
        assert len(signer.nonce) == 66


def test_an_eip3009_nonce_and_a_permit2_nonce_of_the_same_number_never_share_a_key() -> None:
    number = int(doc.NONCE, 16)
    permit2 = signer_of(parse_permit2_payment_payload(_permit2("exact", number)))
    eip3009 = signer_of(PaymentPayload.from_wire(doc.payload_v2()))
    assert permit2.payer == eip3009.payer
    assert permit2.nonce != eip3009.nonce
    assert permit2.nonce[2:] == eip3009.nonce[2:]
    # Small nonces are padded to the same width: one key per nonce, whatever its spelling on the wire.
    assert signer_of(parse_permit2_payment_payload(_permit2("upto", 7))).nonce == "p2" + "0" * 63 + "7"

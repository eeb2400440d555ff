"""The AP2 receipts of a round (§20.6): a checkout receipt and a payment receipt, signed by the merchant.

Each is a JWT of the tenant's current checkout key, as AP2 v0.2 defines them: ``status`` (``Success`` or
``Error``), ``iss`` (the merchant's, as in its checkout), ``iat`` and ``reference``, the hash of the
issuer-signed JWT of the last SD-JWT of the mandate it answers. A successful checkout receipt names the
order (the task id); a payment receipt names the payment (the ``offerId``) and, on success, the
settlement's transaction, bare and prefixed with its CAIP-2 network. An error receipt carries the error
code (the ``ap2Error`` of a refusal, or the extension object's ``error`` of a failed round) and one line
saying why, so that the agent knows its mandate was not used.

Both receipts of a round are made together and returned as ``Ap2Receipts``, the receipts part's value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from a2a_x402.extension import Ap2ErrorCode, Ap2Merchant, Ap2Receipts, PaymentErrorCode, ap2_digest

from ._checkout import merchant_issuer
from ._keys import CheckoutKeys

__all__ = ["ReceiptSubject", "error_receipts", "mandate_reference", "success_receipts"]

_HASH = re.compile(r"[A-Za-z0-9_-]{43}")
_COMPACT_JWS = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")
_TRANSACTION = re.compile(r"0x[0-9a-fA-F]{64}")
_CAIP2 = re.compile(r"[-a-z0-9]{3,8}:[-_a-zA-Z0-9]{1,32}")
_MAX_DESCRIPTION_CHARS = 200
# Long base64url runs in a description are token material: never put in a receipt.
_TOKEN_LIKE = re.compile(r"[A-Za-z0-9_.~-]{40,}")


@dataclass(frozen=True, slots=True)
class ReceiptSubject:
    """What a round's receipts answer.

    Attributes:
        checkout_reference: the reference of the closed checkout mandate (``mandate_reference``, or the
            ``closed_reference`` of its verified chain).
        payment_reference: the reference of the closed payment mandate.
        order_id: the task id.
        payment_id: the round's ``offerId``.
    """

    checkout_reference: str
    payment_reference: str
    order_id: str
    payment_id: str

    def __post_init__(self) -> None:
        for name in ("checkout_reference", "payment_reference"):
            if not _HASH.fullmatch(getattr(self, name)):
                raise ValueError(f"{name} is a base64url SHA-256 (43 characters)")
        if not self.order_id or not self.payment_id:
            raise ValueError("receipts name the order (the task id) and the payment (the offerId)")


def mandate_reference(token: str) -> str:
    """The ``reference`` a receipt gives for a presented mandate: the hash of the issuer-signed JWT of its
    last SD-JWT (the closed mandate), whatever it discloses. Readable from mandates that do not verify.

    Raises:
        ValueError: ``token`` does not end in an SD-JWT.
    """
    closed = token.rsplit("~~", 1)[-1].split("~", 1)[0]
    if not _COMPACT_JWS.fullmatch(closed):
        raise ValueError("the mandate does not end in an SD-JWT")
    return ap2_digest(closed)


def success_receipts(
    keys: CheckoutKeys,
    subject: ReceiptSubject,
    *,
    merchant: Ap2Merchant,
    transaction: str,
    network: str,
    now: int,
) -> Ap2Receipts:
    """The receipts of a round paid in ``transaction`` on ``network`` (CAIP-2), issued at ``now``.

    Raises:
        ValueError: ``transaction`` is not a 32-byte ``0x`` hash, ``network`` not CAIP-2, ``now`` negative.
    """
    if not _TRANSACTION.fullmatch(transaction):
        raise ValueError("the transaction is a 0x-prefixed 32-byte hash")
    if not _CAIP2.fullmatch(network):
        raise ValueError("the network is a CAIP-2 chain id")
    checkout = _base("Success", subject.checkout_reference, merchant, now) | {"order_id": subject.order_id}
    payment = _base("Success", subject.payment_reference, merchant, now) | {
        "payment_id": subject.payment_id,
        "psp_confirmation_id": transaction,
        "network_confirmation_id": f"{network}:{transaction}",
    }
    return Ap2Receipts(keys.sign(checkout), keys.sign(payment))


def error_receipts(
    keys: CheckoutKeys,
    subject: ReceiptSubject,
    *,
    merchant: Ap2Merchant,
    error: Ap2ErrorCode | PaymentErrorCode,
    description: str,
    now: int,
) -> Ap2Receipts:
    """The receipts of a round whose mandates were not used: refused (``error`` an ``Ap2ErrorCode``) or
    whose payment failed (the extension object's ``PaymentErrorCode``), issued at ``now``.

    ``description`` becomes one line of at most 200 characters, without token-like runs.

    Raises:
        ValueError: an empty ``description``, a negative ``now``.
    """
    line = " ".join(_TOKEN_LIKE.sub("…", description).split())
    if not line:
        raise ValueError("an error receipt says why")
    if len(line) > _MAX_DESCRIPTION_CHARS:
        line = line[: _MAX_DESCRIPTION_CHARS - 1] + "…"
    failure = {"error": error.value, "error_description": line}
    checkout = _base("Error", subject.checkout_reference, merchant, now) | failure
    payment = _base("Error", subject.payment_reference, merchant, now) | failure
    payment["payment_id"] = subject.payment_id
    return Ap2Receipts(keys.sign(checkout), keys.sign(payment))


def _base(status: str, reference: str, merchant: Ap2Merchant, now: int) -> dict[str, Any]:
    if isinstance(now, bool) or not isinstance(now, int) or now < 0:
        raise ValueError("now is a non-negative number of unix seconds")
    return {"status": status, "iss": merchant_issuer(merchant), "iat": now, "reference": reference}

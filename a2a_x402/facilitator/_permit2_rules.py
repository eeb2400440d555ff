"""The checks of a Permit2 payment that need no chain: the terms it must meet, and the static rules.

`permit2_terms` reads what a verify or settle request asks for (`exact` by Permit2, or `upto`, whose
requirements' `amount` is the maximum at verification and the amount to charge at settlement); `check_permit2`
holds the payer's authorization against those terms at a given moment, cheapest checks first, and recovers
who signed it. Each refusal is a `PaymentInvalidError` with the reason the x402 SDKs give for the same fault.

What only the chain can say is left to the caller: Permit2's code and the proxy's, the payer's balance and
allowance to Permit2, whether the nonce is still unused in Permit2's bitmap, a contract wallet's ERC-1271
answer, and a simulation of the proxy's `settle` from the facilitator named in an `upto` witness.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from pydantic.alias_generators import to_camel

from ._erc6492 import unwrap_erc6492
from ._errors import PaymentInvalidError
from ._permit2 import (
    EXACT_PERMIT2_PROXY,
    UPTO_PERMIT2_PROXY,
    Permit2Authorization,
    permit2_digest,
    permit2_signer,
)
from .wire import (
    ExactPermit2PaymentPayload,
    PaymentRequirements,
    Permit2Extra,
    Reason,
    UptoPaymentPayload,
    UptoPermit2Authorization,
    WireError,
)

__all__ = ["Permit2Signature", "Permit2Terms", "check_permit2", "permit2_terms"]

_ZERO_ADDRESS: Final = "0x" + "00" * 20
_PROXIES: Final = {"exact": EXACT_PERMIT2_PROXY, "upto": UPTO_PERMIT2_PROXY}
_BAD_SIGNATURE: Final = Reason.INVALID_PERMIT2_SIGNATURE

# The fields of `accepted` whose difference from the requirements has a Permit2 code of its own; any other
# difference (maxTimeoutSeconds, extra) is an invalid payload. Scheme and network are checked first.
_ACCEPTED_FIELD_REASONS: Final = {
    "asset": Reason.PERMIT2_TOKEN_MISMATCH,
    "amount": Reason.PERMIT2_AMOUNT_MISMATCH,
    "pay_to": Reason.INVALID_PERMIT2_RECIPIENT_MISMATCH,
}


@dataclass(frozen=True, slots=True)
class Permit2Terms:
    """What the merchant asked for, normalised.

    `amount` is what the payer must have permitted: the price of `exact`, the maximum of `upto`.
    `settle_amount` is what a settlement moves: the price of `exact`; for `upto` the maximum at
    verification (the worst case is what is checked) and the amount charged at settlement, which may be 0.
    """

    scheme: str
    network: str
    chain_id: int
    asset: str
    pay_to: str
    amount: int
    settle_amount: int


@dataclass(frozen=True, slots=True)
class Permit2Signature:
    """Who signed a Permit2 authorization, as far as can be told without the chain.

    `signature` is what the proxy is to be handed (the inner signature of an ERC-6492 wrapper, whose
    `factory` and `factory_calldata` are kept). `eoa` says it recovers to `from`: Permit2 accepts that when
    `from` has no code, and asks `from`'s ERC-1271 `isValidSignature` otherwise, whatever it recovers to.
    """

    digest: bytes
    signature: bytes
    eoa: bool
    factory: str | None = None
    factory_calldata: bytes = b""


def permit2_terms(
    payment: ExactPermit2PaymentPayload | UptoPaymentPayload,
    requirements: PaymentRequirements,
    *,
    settling: bool,
) -> Permit2Terms:
    """The terms of a verify (`settling` False) or settle request carrying a Permit2 payment.

    `accepted` must equal the requirements, except that an `upto` settlement's requirements name the
    amount to charge, at most the `accepted` maximum.

    Raises:
        PaymentInvalidError: another scheme than the payment's, another network, another transfer method
            than Permit2, `accepted` not what the requirements ask, or malformed Permit2 keys in `extra`.
    """
    scheme = payment.accepted.scheme
    if requirements.scheme != scheme:
        raise PaymentInvalidError(Reason.UNSUPPORTED_SCHEME, f"the payment is for the {scheme} scheme")
    if payment.accepted.network != requirements.network:
        raise PaymentInvalidError(Reason.NETWORK_MISMATCH, "the payment was made for another network")
    try:
        method = Permit2Extra.of(requirements).asset_transfer_method
    except WireError as exc:
        raise PaymentInvalidError(exc.reason, exc.message) from None
    if method not in (None, "permit2"):
        raise PaymentInvalidError(
            Reason.INVALID_PAYLOAD, f"the requirements ask for the {method} transfer method, not Permit2"
        )
    charged = requirements.amount
    if scheme == "upto" and settling:
        if charged > payment.accepted.amount:
            raise PaymentInvalidError(
                Reason.INVALID_UPTO_EVM_PAYLOAD_SETTLEMENT_EXCEEDS_AMOUNT,
                f"the settlement of {charged} exceeds the {payment.accepted.amount} the payer permitted",
            )
        requirements = requirements.model_copy(update={"amount": payment.accepted.amount})
    if payment.accepted != requirements:
        raise _accepted_mismatch(payment.accepted, requirements)
    return Permit2Terms(
        scheme=scheme,
        network=requirements.network,
        chain_id=requirements.chain_id,
        asset=requirements.asset,
        pay_to=requirements.pay_to,
        amount=requirements.amount,
        settle_amount=charged,
    )


def _accepted_mismatch(accepted: PaymentRequirements, required: PaymentRequirements) -> PaymentInvalidError:
    """The refusal of a payment that accepted other terms than the requirements, naming the fields."""
    differing = [
        name
        for name in PaymentRequirements.model_fields
        if getattr(accepted, name) != getattr(required, name)
    ]
    reason = next(
        (_ACCEPTED_FIELD_REASONS[name] for name in differing if name in _ACCEPTED_FIELD_REASONS),
        Reason.INVALID_PAYLOAD,
    )
    named = ", ".join(to_camel(name) for name in differing)
    return PaymentInvalidError(reason, f"paymentPayload.accepted differs from the requirements in: {named}")


def check_permit2(
    authorization: Permit2Authorization,
    signature: str,
    terms: Permit2Terms,
    *,
    chain_id: int,
    facilitators: frozenset[str],
    now: int,
    margin_s: int,
    payer_has_code: bool | None = None,
) -> Permit2Signature:
    """Hold `authorization` and its hex `signature` against `terms` at unix time `now`, for a facilitator on
    `chain_id` that settles from `facilitators`; return who signed it.

    The deadline must leave `margin_s` seconds to settle in (Permit2 accepts a block stamped at the deadline
    itself), and `validAfter` must have come (the proxy accepts a block stamped at it). A signature that does
    not recover to `from` may be a contract wallet's; it is refused only when `payer_has_code` is False.

    Raises:
        PaymentInvalidError: the first rule broken, with its x402 reason.
    """
    if terms.chain_id != chain_id:
        raise PaymentInvalidError(
            Reason.INVALID_NETWORK, f"this facilitator settles on chain {chain_id} only"
        )
    _check_parties(authorization, terms, facilitators)
    _check_amounts(authorization, terms)
    if authorization.deadline < now + margin_s:
        raise PaymentInvalidError(
            Reason.PERMIT2_DEADLINE_EXPIRED, "the authorization expires before it could be settled"
        )
    if authorization.witness.valid_after > now:
        raise PaymentInvalidError(Reason.PERMIT2_NOT_YET_VALID, "the authorization is not valid yet")
    return _signature(authorization, bytes.fromhex(signature[2:]), chain_id, payer_has_code)


def _check_parties(
    authorization: Permit2Authorization, terms: Permit2Terms, facilitators: frozenset[str]
) -> None:
    """Who may move the funds, from whom, to whom."""
    upto = isinstance(authorization, UptoPermit2Authorization)
    if terms.scheme != ("upto" if upto else "exact"):
        raise PaymentInvalidError(
            Reason.INVALID_PAYLOAD, f"the authorization's witness is not the {terms.scheme} scheme's"
        )
    proxy = _PROXIES[terms.scheme]
    if authorization.spender != proxy:
        raise PaymentInvalidError(
            Reason.INVALID_PERMIT2_SPENDER, f"the spender is not the x402 {terms.scheme} proxy {proxy}"
        )
    if authorization.from_address == _ZERO_ADDRESS:
        raise PaymentInvalidError(Reason.PERMIT2_INVALID_OWNER, "the payer is the zero address")
    if authorization.witness.to == _ZERO_ADDRESS:
        raise PaymentInvalidError(Reason.PERMIT2_INVALID_DESTINATION, "witness.to is the zero address")
    if authorization.witness.to != terms.pay_to:
        raise PaymentInvalidError(
            Reason.INVALID_PERMIT2_RECIPIENT_MISMATCH, "witness.to is not the payTo address"
        )
    if (
        isinstance(authorization, UptoPermit2Authorization)
        and authorization.witness.facilitator not in facilitators
    ):
        raise PaymentInvalidError(
            Reason.UPTO_FACILITATOR_MISMATCH,
            "witness.facilitator is not an address this facilitator settles from",
        )


def _check_amounts(authorization: Permit2Authorization, terms: Permit2Terms) -> None:
    """Which token, how much permitted, how much moved."""
    permitted = authorization.permitted
    if permitted.token != terms.asset:
        raise PaymentInvalidError(Reason.PERMIT2_TOKEN_MISMATCH, "permitted.token is not the required asset")
    if permitted.amount != terms.amount:
        raise PaymentInvalidError(
            Reason.PERMIT2_AMOUNT_MISMATCH,
            f"permitted.amount {permitted.amount} is not the required amount {terms.amount}",
        )
    if terms.settle_amount > permitted.amount:
        raise PaymentInvalidError(
            Reason.INVALID_UPTO_EVM_PAYLOAD_SETTLEMENT_EXCEEDS_AMOUNT,
            f"the settlement of {terms.settle_amount} exceeds the {permitted.amount} permitted",
        )
    # The proxies refuse to move nothing; only an `upto` settlement of 0 is valid, and sends no transaction.
    if terms.scheme == "exact" and terms.settle_amount == 0:
        raise PaymentInvalidError(Reason.PERMIT2_AMOUNT_MISMATCH, "an exact payment of 0 cannot be settled")


def _signature(
    authorization: Permit2Authorization, signature: bytes, chain_id: int, payer_has_code: bool | None
) -> Permit2Signature:
    """Recover the signer; refuse what can be refused without the chain."""
    digest = permit2_digest(authorization, chain_id)
    payer = authorization.from_address
    try:
        wrapped = unwrap_erc6492(signature)
    except PaymentInvalidError as exc:
        raise PaymentInvalidError(_BAD_SIGNATURE, exc.message) from None
    if wrapped is not None:
        if permit2_signer(digest, wrapped.signature) == payer:
            raise PaymentInvalidError(
                _BAD_SIGNATURE,
                "`from` signed as an EOA: an EOA's signature carries no ERC-6492 deployment data",
            )
        return Permit2Signature(
            digest=digest,
            signature=wrapped.signature,
            eoa=False,
            factory=wrapped.factory,
            factory_calldata=wrapped.factory_calldata,
        )
    eoa = permit2_signer(digest, signature) == payer
    if not eoa and payer_has_code is False:
        raise PaymentInvalidError(_BAD_SIGNATURE, "the signature is not from permit2Authorization.from")
    return Permit2Signature(digest=digest, signature=signature, eoa=eoa)

"""x402 v2 payloads of a Permit2 witness transfer: `exact` with `assetTransferMethod: "permit2"`, and `upto`.

The payer signs Permit2's `PermitWitnessTransferFrom` with the x402 proxy of the scheme as its spender and a
witness naming the recipient (`to`), the earliest moment (`validAfter`) and, for `upto`, the one address that
may settle it (`facilitator`). The two payloads differ only in that witness, so a document is read by its
`accepted.scheme`. Field order follows the x402 Python SDK's `to_dict`, so its documents dump back byte for
byte. `nonce`, `deadline` and `validAfter` are uint256 decimal strings, as signed: Permit2 takes any uint256
(a deadline of 2**256 - 1 never expires), so none is narrowed to a unix time here.

These are wire shapes only; whether a payload pays what the requirements ask is the facilitator's check.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, ClassVar, Final, Self, TypeAlias

from pydantic import ConfigDict, Field, model_validator

from ._base import WireModel
from ._errors import WireError
from ._primitives import Address, Extensions, Scheme, Signature, Uint256, fail, version
from ._reasons import Reason
from ._v2 import PaymentRequirements, ResourceInfo

__all__ = [
    "EIP2612_GAS_SPONSORING",
    "ExactPermit2Authorization",
    "ExactPermit2Payload",
    "ExactPermit2PaymentPayload",
    "ExactPermit2Witness",
    "Permit2Extra",
    "Permit2PaymentPayload",
    "Permit2TokenPermissions",
    "UptoPaymentPayload",
    "UptoPermit2Authorization",
    "UptoPermit2Payload",
    "UptoPermit2Witness",
    "parse_permit2_payment_payload",
]

EIP2612_GAS_SPONSORING: Final = "eip2612GasSponsoring"
"""The x402 extension a Permit2 payer's EIP-2612 permit of Permit2 travels in: its key in a payment's and
the terms' `extensions`, and its name in `/supported`'s `extensions`."""


class Permit2TokenPermissions(WireModel):
    """Permit2's `TokenPermissions`: the token and the most of it the transfer may move."""

    token: Address
    amount: Uint256


class ExactPermit2Witness(WireModel):
    """The `exact` proxy's witness: who receives the payment, and from when it may be settled."""

    to: Address
    valid_after: Uint256


class UptoPermit2Witness(WireModel):
    """The `upto` proxy's witness: the `exact` one plus the only address allowed to settle (and so to choose
    the amount)."""

    to: Address
    facilitator: Address
    valid_after: Uint256


class ExactPermit2Authorization(WireModel):
    """The `PermitWitnessTransferFrom` message of an `exact` payment, and its signer (`from`)."""

    from_address: Address = Field(alias="from")
    permitted: Permit2TokenPermissions
    spender: Address
    nonce: Uint256
    deadline: Uint256
    witness: ExactPermit2Witness


class UptoPermit2Authorization(WireModel):
    """The `PermitWitnessTransferFrom` message of an `upto` payment: `permitted.amount` is the maximum."""

    from_address: Address = Field(alias="from")
    permitted: Permit2TokenPermissions
    spender: Address
    nonce: Uint256
    deadline: Uint256
    witness: UptoPermit2Witness


class ExactPermit2Payload(WireModel):
    """The `payload` of an `exact` payment by Permit2: the authorization and the payer's signature.

    A 65-byte (or 64-byte EIP-2098) signature is an EOA's; anything else is for a contract wallet.
    """

    permit2_authorization: ExactPermit2Authorization
    signature: Signature


class UptoPermit2Payload(WireModel):
    """The `payload` of an `upto` payment: an authorization of at most `permitted.amount`, signed."""

    permit2_authorization: UptoPermit2Authorization
    signature: Signature


def _check_scheme(accepted: PaymentRequirements, scheme: str) -> None:
    if accepted.scheme != scheme:
        fail(f"accepted.scheme must be {scheme} for this payload")


class ExactPermit2PaymentPayload(WireModel):
    """A payer's `exact` payment made by a Permit2 witness transfer (`PAYMENT-SIGNATURE`, decoded)."""

    x402_version: Annotated[int, version(2)]
    payload: ExactPermit2Payload
    accepted: PaymentRequirements
    resource: ResourceInfo | None = None
    extensions: Extensions | None = None

    @model_validator(mode="after")
    def _scheme_matches_payload(self) -> Self:
        _check_scheme(self.accepted, "exact")
        return self


class UptoPaymentPayload(WireModel):
    """A payer's `upto` payment: a Permit2 witness transfer of at most `accepted.amount`."""

    x402_version: Annotated[int, version(2)]
    payload: UptoPermit2Payload
    accepted: PaymentRequirements
    resource: ResourceInfo | None = None
    extensions: Extensions | None = None

    @model_validator(mode="after")
    def _scheme_matches_payload(self) -> Self:
        _check_scheme(self.accepted, "upto")
        return self


Permit2PaymentPayload: TypeAlias = ExactPermit2PaymentPayload | UptoPaymentPayload
"""A payment payload carrying a Permit2 witness transfer, of either scheme."""


def parse_permit2_payment_payload(data: object) -> Permit2PaymentPayload:
    """Parse a v2 payment payload carrying a Permit2 witness transfer, as `upto` when its `accepted.scheme`
    says so and as `exact` otherwise (whose check then refuses any other scheme).

    Raises:
        WireError: `invalid_x402_version` or `invalid_payload`.
    """
    accepted = data.get("accepted") if isinstance(data, Mapping) else None
    scheme = accepted.get("scheme") if isinstance(accepted, Mapping) else None
    if scheme == "upto":
        return UptoPaymentPayload.from_wire(data)
    return ExactPermit2PaymentPayload.from_wire(data)


class Permit2Extra(WireModel):
    """What the requirements' `extra` says about Permit2: the transfer method and, for `upto`, the address
    the payer must name as the witness's `facilitator`. Its other keys (the token's EIP-712 `name` and
    `version`, extension hints) are read elsewhere and ignored here.
    """

    model_config = ConfigDict(extra="ignore")
    wire_reason: ClassVar[Reason] = Reason.INVALID_PAYMENT_REQUIREMENTS

    asset_transfer_method: Scheme | None = None
    facilitator_address: Address | None = None

    @classmethod
    def of(cls, requirements: PaymentRequirements) -> Permit2Extra:
        """Read `requirements.extra` (absent: nothing said).

        Raises:
            WireError: `invalid_payment_requirements`: a known key of another shape; its path starts `extra.`.
        """
        try:
            return cls.from_wire(requirements.extra or {})
        except WireError as exc:
            path = f"extra.{exc.path}" if exc.path else "extra"
            raise WireError(exc.reason, exc.message.removeprefix(f"{exc.path}: "), path) from None

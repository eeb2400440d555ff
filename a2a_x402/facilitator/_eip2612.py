"""The x402 `eip2612GasSponsoring` extension: a payer without a Permit2 allowance sends, beside its Permit2
payment, an EIP-2612 `permit` of Permit2 signed for the token, and the facilitator relays it in the same
transaction (the proxy's `settleWithPermit`), so the payer never spends gas on an approval.

Read from the payment payload's `extensions` and held against the payment as the x402 SDKs do: the
owner is the payer, the token the payment's, the spender Permit2, the deadline far enough away, and (as
the proxies require) the value exactly the permitted amount. Whether the token accepts the signature only
the chain can tell: the proxy logs a refused `permit` and goes on, so a settlement without the allowance
then fails on the transfer, which the simulation sees.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from ._errors import PaymentInvalidError
from ._permit2 import PERMIT2_ADDRESS
from ._permit2_calls import Eip2612Approval
from .wire import EIP2612_GAS_SPONSORING, Reason

__all__ = ["Eip2612Permit", "check_eip2612", "read_eip2612"]


_ADDRESS = re.compile(r"0x[0-9a-fA-F]{40}")
_UINT = re.compile(r"[0-9]{1,78}")
_SIGNATURE = re.compile(r"0x[0-9a-fA-F]{130}")
_VERSION = re.compile(r"[0-9]+(\.[0-9]+)*")
_FIELDS: Final = {
    "from": _ADDRESS,
    "asset": _ADDRESS,
    "spender": _ADDRESS,
    "amount": _UINT,
    "nonce": _UINT,
    "deadline": _UINT,
    "signature": _SIGNATURE,
}
_FORMAT = Reason.INVALID_EIP2612_EXTENSION_FORMAT
_UINT256_MAX: Final = 2**256 - 1


@dataclass(frozen=True, slots=True)
class Eip2612Permit:
    """The extension's EIP-2612 permit: whose (`owner`), for which token and spender, and the approval a
    proxy's `settleWithPermit` relays."""

    owner: str
    asset: str
    spender: str
    approval: Eip2612Approval


def read_eip2612(extensions: Mapping[str, object] | None) -> Eip2612Permit | None:
    """The approval a payment payload's `extensions` carries, or None when it carries none.

    Raises:
        PaymentInvalidError: `invalid_eip2612_extension_format`: the extension is there but its `info` is
            not the approval (a field missing or of another shape; a signature that is not 65 bytes).
    """
    extension = (extensions or {}).get(EIP2612_GAS_SPONSORING)
    if extension is None:
        return None
    info = extension.get("info") if isinstance(extension, Mapping) else None
    if not isinstance(info, Mapping):
        raise PaymentInvalidError(_FORMAT, f"extensions.{EIP2612_GAS_SPONSORING}.info must be an object")
    for name, shape in _FIELDS.items():
        value = info.get(name)
        if not isinstance(value, str) or not shape.fullmatch(value):
            raise PaymentInvalidError(
                _FORMAT, f"extensions.{EIP2612_GAS_SPONSORING}.info.{name} is missing or malformed"
            )
    version = info.get("version", "1")
    if not isinstance(version, str) or not _VERSION.fullmatch(version):
        raise PaymentInvalidError(_FORMAT, f"extensions.{EIP2612_GAS_SPONSORING}.info.version is malformed")
    value, deadline = int(str(info["amount"])), int(str(info["deadline"]))
    if value > _UINT256_MAX or deadline > _UINT256_MAX:
        raise PaymentInvalidError(_FORMAT, f"extensions.{EIP2612_GAS_SPONSORING}.info: not a uint256")
    return Eip2612Permit(
        owner=str(info["from"]),
        asset=str(info["asset"]),
        spender=str(info["spender"]),
        approval=Eip2612Approval(
            value=value, deadline=deadline, signature=bytes.fromhex(str(info["signature"])[2:])
        ),
    )


def check_eip2612(
    permit: Eip2612Permit, *, payer: str, asset: str, permitted: int, now: int, margin_s: int
) -> None:
    """Refuse an approval that cannot give Permit2 the allowance `payer`'s payment of `permitted` units of
    `asset` needs, at unix time `now` with `margin_s` seconds to settle in.

    Raises:
        PaymentInvalidError: the first rule broken, with the x402 SDKs' reason.
    """
    if permit.owner.lower() != payer.lower():
        raise PaymentInvalidError(Reason.EIP2612_FROM_MISMATCH, "the EIP-2612 permit is not the payer's")
    if permit.asset.lower() != asset.lower():
        raise PaymentInvalidError(Reason.EIP2612_ASSET_MISMATCH, "the EIP-2612 permit is for another token")
    if permit.spender.lower() != PERMIT2_ADDRESS.lower():
        raise PaymentInvalidError(
            Reason.EIP2612_SPENDER_NOT_PERMIT2,
            f"the EIP-2612 permit's spender is not Permit2 {PERMIT2_ADDRESS}",
        )
    approval = permit.approval
    if approval.deadline < now + margin_s:
        raise PaymentInvalidError(
            Reason.EIP2612_DEADLINE_EXPIRED, "the EIP-2612 permit expires before it could be settled"
        )
    if approval.value != permitted:
        # The proxies refuse (Permit2612AmountMismatch) an approval of anything but the permitted amount.
        raise PaymentInvalidError(
            Reason.PERMIT2_2612_AMOUNT_MISMATCH,
            f"the EIP-2612 permit approves {approval.value}, not the permitted amount {permitted}",
        )

"""What the chain's answers to a Permit2 verification mean: the x402 refusal each failed check earns.

Pure interpretation, no I/O, as `_refusals` is for EIP-3009: `_permit2_verify` makes the reads and hands
the replies here. A simulated settlement that reverts names a custom error of Permit2 or of the proxy (or
Permit2's `TRANSFER_FROM_FAILED`, the token refusing the transfer), each mapped to the reason the x402 SDKs
give the same fault; anything else is the scheme's own "the simulation failed".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from ._erc6492 import revert_message
from ._errors import PaymentInvalidError, RpcError
from ._permit2 import PERMIT2_ADDRESS
from ._permit2_calls import revert_error_name
from ._token import decode_uint
from .wire import Reason

__all__ = [
    "SIMULATION_FAILED",
    "allowance_required",
    "check_balance",
    "check_contracts",
    "check_nonce_unused",
    "erc20_amount",
    "paid_failure",
    "settle_refusal",
    "simulation_failed",
]

SIMULATION_FAILED: Final = {
    "exact": Reason.PERMIT2_SIMULATION_FAILED,
    "upto": Reason.INVALID_UPTO_EVM_TRANSACTION_FAILED,
}
"""Each scheme's reason for a settlement that would fail without a code of its own."""
# The Python SDK tells an `exact` payer short of funds what it tells an EIP-3009 one; `upto` has its own.
_INSUFFICIENT_BALANCE: Final = {
    "exact": Reason.INVALID_EXACT_EVM_INSUFFICIENT_BALANCE,
    "upto": Reason.PERMIT2_INSUFFICIENT_BALANCE,
}
_SIGNATURE = (Reason.INVALID_PERMIT2_SIGNATURE, "Permit2 does not accept the signature as the payer's")
_ERROR_REASONS: Final = {
    "InvalidNonce": (Reason.PERMIT2_INVALID_NONCE, "the Permit2 nonce is already used"),
    "SignatureExpired": (Reason.PERMIT2_DEADLINE_EXPIRED, "the permit's deadline has passed"),
    "InvalidSignature": _SIGNATURE,
    "InvalidSigner": _SIGNATURE,
    "InvalidSignatureLength": _SIGNATURE,
    "InvalidContractSignature": _SIGNATURE,
    "PaymentTooEarly": (Reason.PERMIT2_NOT_YET_VALID, "witness.validAfter has not come yet"),
    "InvalidOwner": (Reason.PERMIT2_INVALID_OWNER, "the payer is the zero address"),
    "InvalidDestination": (Reason.PERMIT2_INVALID_DESTINATION, "witness.to is the zero address"),
    "InvalidAmount": (Reason.PERMIT2_AMOUNT_MISMATCH, "the amount is not one the permit allows"),
    "Permit2612AmountMismatch": (
        Reason.PERMIT2_2612_AMOUNT_MISMATCH,
        "the EIP-2612 permit is not for the permitted amount",
    ),
    "UnauthorizedFacilitator": (
        Reason.UPTO_FACILITATOR_MISMATCH,
        "the settlement is not sent by witness.facilitator",
    ),
    "AmountExceedsPermitted": (
        Reason.INVALID_UPTO_EVM_PAYLOAD_SETTLEMENT_EXCEEDS_AMOUNT,
        "the amount exceeds the permitted maximum",
    ),
}
# Permit2's own revert when the token's transferFrom fails (solmate's SafeTransferLib).
_TRANSFER_FAILED = "TRANSFER_FROM_FAILED"


def simulation_failed(scheme: str, message: str) -> PaymentInvalidError:
    """The refusal of a settlement that would fail for a reason without a code of its own."""
    return PaymentInvalidError(SIMULATION_FAILED[scheme], message)


def _failure(scheme: str, name: str | None, text: str, *, with_permit: bool) -> PaymentInvalidError:
    if name in _ERROR_REASONS:
        reason, meaning = _ERROR_REASONS[name]
        return PaymentInvalidError(reason, f"the settlement would revert: {meaning} ({name})")
    if _TRANSFER_FAILED in text and with_permit:
        # The reads found no allowance, so the permit was to give it: the token refused the permit.
        return allowance_required(
            "the token did not accept the EIP-2612 permit of the eip2612GasSponsoring extension (a wrong "
            "signature, or a nonce already used?) and the payer has not approved Permit2"
        )
    if _TRANSFER_FAILED in text:
        return simulation_failed(scheme, f"the token refused the transfer ({_TRANSFER_FAILED})")
    return simulation_failed(scheme, f"the settlement would revert: {text}")


def settle_refusal(scheme: str, *, with_permit: bool = False) -> Callable[[RpcError], PaymentInvalidError]:
    """How a reverted simulation of the scheme's settlement (`settleWithPermit`, `with_permit`) is told."""

    def refusal(exc: RpcError) -> PaymentInvalidError:
        return _failure(
            scheme,
            revert_error_name(exc.data),
            exc.revert_reason or exc.message,
            with_permit=with_permit,
        )

    return refusal


def paid_failure(scheme: str) -> Callable[[bytes], PaymentInvalidError]:
    """How the reverted settlement step of a counterfactual wallet's simulation (its revert data) is told."""

    def refusal(data: bytes) -> PaymentInvalidError:
        return _failure(scheme, revert_error_name("0x" + data.hex()), revert_message(data), with_permit=False)

    return refusal


def check_contracts(proxy: str, asset: str, codes: list[object]) -> None:
    """Refuse unless Permit2, the scheme's `proxy` and `asset` all have code (`eth_getCode` replies, in
    that order)."""
    permit2_code, proxy_code, asset_code = codes
    for code, what in ((permit2_code, f"Permit2 {PERMIT2_ADDRESS}"), (proxy_code, f"the x402 proxy {proxy}")):
        if not _has_code(code):
            raise PaymentInvalidError(
                Reason.PERMIT2_PROXY_NOT_DEPLOYED, f"{what} has no code on this chain: it cannot settle here"
            )
    if not _has_code(asset_code):
        raise PaymentInvalidError(Reason.ASSET_NOT_DEPLOYED_CONTRACT, f"the asset {asset} has no code")


def _has_code(reply: object) -> bool:
    return isinstance(reply, str) and reply not in ("0x", "0x0", "")


def check_nonce_unused(scheme: str, bitmap_word: object, nonce: int) -> None:
    """Refuse a payment whose nonce Permit2's `nonceBitmap` word (the reply) marks as used."""
    word = erc20_amount(scheme, bitmap_word, "Permit2's nonceBitmap")
    if word >> (nonce & 0xFF) & 1:
        raise PaymentInvalidError(
            Reason.PERMIT2_INVALID_NONCE,
            "the payer's Permit2 nonce is already used (settled, or invalidated by the payer)",
        )


def erc20_amount(scheme: str, reply: object, what: str) -> int:
    """The uint256 a view answered (`what` it was, for the refusal of one that did not answer one)."""
    if isinstance(reply, RpcError) or not isinstance(reply, str):
        raise simulation_failed(scheme, f"{what} could not be read: the asset may not be an ERC-20")
    try:
        return decode_uint(reply)
    except ValueError:
        raise simulation_failed(scheme, f"{what} answered no number") from None


def allowance_required(why: str) -> PaymentInvalidError:
    """The refusal of a payer whose token allowance to Permit2 is short, saying `why` and what to do."""
    return PaymentInvalidError(
        Reason.PERMIT2_ALLOWANCE_REQUIRED,
        f"{why}: approve Permit2 ({PERMIT2_ADDRESS}) on the token once (approve(spender, amount)), or, "
        "for a token with EIP-2612, send a signed permit in the eip2612GasSponsoring extension",
    )


def check_balance(scheme: str, reply: object, amount: int) -> None:
    """Refuse a payer whose balance (the `balanceOf` reply) is below `amount` (to verify `upto`: the
    maximum; to settle it: the charge)."""
    balance = erc20_amount(scheme, reply, "the payer's balance")
    if balance < amount:
        raise PaymentInvalidError(
            _INSUFFICIENT_BALANCE[scheme],
            f"the payer holds {balance} of the token, less than the {amount} to pay",
        )

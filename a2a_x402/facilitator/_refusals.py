"""What the chain's answers to a verification mean: the x402 refusal each failed check earns.

Pure interpretation, no I/O: `_verify` makes the reads and hands the replies here. Reason codes stay within
the x402 vocabulary (`wire.Reason`); which of several causes sharing a code applies goes in the message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eth_abi.exceptions import DecodingError

from ._erc6492 import MULTICALL3_ADDRESS, decode_aggregate3, revert_message
from ._errors import PaymentInvalidError, RpcError
from ._token import ERC1271_MAGIC, Authorization, decode_bool, decode_uint
from .wire import Reason

__all__ = [
    "check_counterfactual_steps",
    "check_head_time",
    "check_token_state",
    "is_erc1271_magic",
    "simulation_failure",
]

_SIMULATION_FAILED = Reason.INVALID_EXACT_EVM_TRANSACTION_SIMULATION_FAILED
_BAD_SIGNATURE = Reason.INVALID_EXACT_EVM_PAYLOAD_SIGNATURE

# Revert strings of USDC v2.2 (and the dev token) mapped to the x402 reason a payer can act on.
_REVERT_REASONS = (
    ("authorization is expired", Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALID_BEFORE),
    ("authorization is not yet valid", Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALID_AFTER),
    ("authorization is used", Reason.INVALID_EXACT_EVM_NONCE_ALREADY_USED),
    ("transfer amount exceeds balance", Reason.INVALID_EXACT_EVM_INSUFFICIENT_BALANCE),
    ("invalid signature", Reason.INVALID_EXACT_EVM_PAYLOAD_SIGNATURE),
)


def is_erc1271_magic(reply: object) -> bool:
    """Whether an eth_call of `isValidSignature` answered the ERC-1271 magic value."""
    return isinstance(reply, str) and reply[:10] == "0x" + ERC1271_MAGIC.hex()


def check_token_state(auth: Authorization, state: list[Any]) -> None:
    """Refuse on the token reads of `_state_calls`: EIP-3009 support, nonce, pause, blacklist, balance.

    A used nonce comes before the FiatToken refusals: a settlement retried after the payer was
    blacklisted must still be recognised as the earlier settlement. `paused()` and `isBlacklisted()`
    that revert mean a token without them: nothing to refuse.
    """
    used, balance, paused, payer_blacklisted, payee_blacklisted = state
    if isinstance(used, RpcError) or isinstance(balance, RpcError):
        raise PaymentInvalidError(
            Reason.INVALID_EXACT_EVM_EIP3009_NOT_SUPPORTED, "the asset does not support EIP-3009"
        )
    if decode_bool(used):
        raise PaymentInvalidError(
            Reason.INVALID_EXACT_EVM_NONCE_ALREADY_USED, "this authorization was already used or cancelled"
        )
    if _answered_true(paused):
        raise PaymentInvalidError(
            _SIMULATION_FAILED, "the token is paused and refuses every transfer (Pausable: paused)"
        )
    for blacklisted, who in ((payer_blacklisted, "payer authorization.from"), (payee_blacklisted, "payTo")):
        if _answered_true(blacklisted):
            raise PaymentInvalidError(
                _SIMULATION_FAILED,
                f"the token has blacklisted the {who} (Blacklistable: account is blacklisted)",
            )
    if decode_uint(balance) < auth.value:
        raise PaymentInvalidError(
            Reason.INVALID_EXACT_EVM_INSUFFICIENT_BALANCE, "the payer's balance is too low"
        )


_ABI_TRUE = "0x" + "00" * 31 + "01"


def _answered_true(reply: object) -> bool:
    """Whether a bool view answered an ABI `true`.

    A revert, or anything that is not an ABI bool (no such function, a fallback answering every call), is
    no answer: Solidity's own decoder would not accept it either.
    """
    return isinstance(reply, str) and reply.lower() == _ABI_TRUE


def _token_failure(data: bytes) -> PaymentInvalidError:
    return simulation_failure(revert_message(data))


def check_counterfactual_steps(
    steps: str,
    *,
    bad_signature: tuple[str, str] = (_BAD_SIGNATURE, "the signature is not from authorization.from"),
    paid_failure: Callable[[bytes], PaymentInvalidError] = _token_failure,
) -> None:
    """Refuse on the first failed step of a counterfactual wallet's simulation (deploy, sign, pay).

    `bad_signature` is the reason and message of a wallet refusing the signature, `paid_failure` the
    refusal of a payment step that reverted with the given data (by default the token's revert strings).
    """
    try:
        (deployed, deploy_data), (answered, answer), (paid, paid_data) = decode_aggregate3(steps)
    except (DecodingError, ValueError) as exc:
        raise PaymentInvalidError(
            Reason.INVALID_EXACT_EVM_PAYLOAD_UNDEPLOYED_SMART_WALLET,
            f"the Multicall3 at {MULTICALL3_ADDRESS} did not answer as Multicall3",
        ) from exc
    if not deployed:
        raise PaymentInvalidError(
            Reason.SMART_WALLET_DEPLOYMENT_FAILED,
            f"the ERC-6492 factory call reverted: {revert_message(deploy_data)}",
        )
    if not answered or not answer:
        raise PaymentInvalidError(
            Reason.SMART_WALLET_DEPLOYMENT_FAILED,
            "the ERC-6492 factory call does not deploy a wallet at authorization.from",
        )
    if answer[:4] != ERC1271_MAGIC:
        raise PaymentInvalidError(*bad_signature)
    if not paid:
        raise paid_failure(paid_data)


def simulation_failure(reason: str) -> PaymentInvalidError:
    """The refusal of a simulated transfer that reverted with `reason`."""
    for needle, code in _REVERT_REASONS:
        if needle in reason:
            return PaymentInvalidError(code, f"the transfer would revert: {reason}")
    return PaymentInvalidError(_SIMULATION_FAILED, f"the transfer would revert: {reason}")


def check_head_time(
    valid_before: int,
    head: object,
    now: int,
    margin_s: int,
    *,
    expired: Reason = Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALID_BEFORE,
) -> None:
    """Refuse an authorization valid until `valid_before` that expires before the next block could
    include it, when the head block is ahead of the wall clock (behind it, `check_offline` has already
    decided), as `expired`.

    A head the node could not give (anvil answers null for `latest` while it is mining one) skips
    this check: the simulation in the pending block still sees a head far ahead.
    """
    timestamp = head.get("timestamp") if isinstance(head, dict) else None
    if not isinstance(timestamp, str):
        return
    try:
        head_time = int(timestamp, 16)
    except ValueError:
        return
    # The next block is stamped after the head: with a head ahead of the clock, that binds.
    if head_time > now and valid_before <= head_time + 1 + margin_s:
        raise PaymentInvalidError(
            expired,
            f"the chain's head block is {head_time - now} s ahead of this facilitator's clock: the "
            "authorization expires before a new block could include it",
        )

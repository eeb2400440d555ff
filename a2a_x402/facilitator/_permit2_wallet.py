"""A Permit2 payment from an ERC-6492 wallet that has no code yet: deployed and paid from in one transaction.

As for EIP-3009 (`_verify`): the wallet's factory must be one the operator listed, since its calldata comes
from the payer and the relayer would pay for the call; the factory call, the wallet's ERC-1271 answer and
the proxy's settlement are simulated in order in one Multicall3 `eth_call`, and the transaction settlement
sends (the factory call, then the settlement, through `aggregate3`) is estimated against the gas cap.

Only `exact` can be paid so: the `upto` proxy takes its settlement from the witness's facilitator alone,
never from Multicall3, so the wallet cannot be deployed in the same transaction.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection

from ._erc6492 import MULTICALL3_ADDRESS, Call3, encode_aggregate3
from ._errors import PaymentInvalidError, RpcError
from ._gas import (
    NO_FEES,
    SIMULATION_BLOCK,
    Fees,
    RelayerCannotPayError,
    TransferGas,
    is_contract,
    unaffordable,
)
from ._permit2_calls import encode_settle
from ._permit2_refusals import (
    SIMULATION_FAILED,
    allowance_required,
    check_balance,
    check_contracts,
    check_nonce_unused,
    erc20_amount,
    paid_failure,
    settle_refusal,
)
from ._permit2_rules import Permit2Signature
from ._permit2_verified import HEAD_BLOCK, PROXIES, READS, VerifiedPermit2, permit2_reads
from ._refusals import check_counterfactual_steps, check_head_time
from ._request import Permit2Request
from ._rpc import RpcCall, RpcClient
from ._token import encode_is_valid_signature
from .wire import Reason

__all__ = ["check_counterfactual"]

_BAD_SIGNATURE = (Reason.INVALID_PERMIT2_SIGNATURE, "the signature is not from permit2Authorization.from")


async def check_counterfactual(
    rpc: RpcClient,
    gas: TransferGas,
    request: Permit2Request,
    signed: Permit2Signature,
    fees: Fees,
    *,
    now: int,
    margin_s: int,
    factories: Collection[str],
) -> VerifiedPermit2:
    """The chain's checks of `request`, signed (`signed`) by a wallet without code, deployed through one of
    `factories`; its settlement simulated and estimated by `gas` at `fees`.

    The wallet may approve Permit2 as it is deployed, so its allowance and balance are read only to say why
    a settlement that fails on the transfer fails.

    Raises:
        PaymentInvalidError: a check failed.
        RelayerCannotPayError: the node would not simulate at `fees` for the relayer's balance.
        ChainError: the chain could not be read.
    """
    auth, terms = request.payment.payload.permit2_authorization, request.terms
    if terms.scheme != "exact":
        raise PaymentInvalidError(
            Reason.INVALID_EXACT_EVM_PAYLOAD_UNDEPLOYED_SMART_WALLET,
            "the wallet has no code: an upto settlement is taken only from the facilitator the payer named, "
            "so the wallet cannot be deployed in the same transaction; deploy it first",
        )
    if signed.factory not in factories:
        raise PaymentInvalidError(
            Reason.EIP6492_FACTORY_NOT_ALLOWED,
            f"the wallet has no code and its factory {signed.factory} is not one this facilitator deploys "
            "wallets through",
        )
    proxy = PROXIES[terms.scheme]
    factory = Call3(str(signed.factory), False, signed.factory_calldata)
    settle = Call3(proxy, False, _bytes(encode_settle(auth, terms.settle_amount, signed.signature)))
    check = Call3(auth.from_address, True, _bytes(encode_is_valid_signature(signed.digest, signed.signature)))
    diagnosis = encode_aggregate3(
        [
            dataclasses.replace(factory, allow_failure=True),
            check,
            dataclasses.replace(settle, allow_failure=True),
        ]
    )
    calldata = encode_aggregate3([factory, settle])
    # Twice the cap: the diagnosis asks the wallet's ERC-1271 answer once more than the settlement does.
    steps_call = gas.call(MULTICALL3_ADDRESS, diagnosis, fees, gas=2 * gas.cap)
    replies = await rpc.batch(
        [
            *permit2_reads(request),
            HEAD_BLOCK,
            RpcCall("eth_getCode", [MULTICALL3_ADDRESS, "latest"]),
            RpcCall("eth_call", [steps_call, SIMULATION_BLOCK]),
            RpcCall("eth_estimateGas", [gas.call(MULTICALL3_ADDRESS, calldata, fees), SIMULATION_BLOCK]),
        ]
    )
    reads, (head, multicall_code, steps, estimate) = replies[:READS], replies[READS:]
    if fees != NO_FEES and (unaffordable(steps) or unaffordable(estimate)):
        raise RelayerCannotPayError(str(steps if unaffordable(steps) else estimate))
    check_contracts(proxy, terms.asset, reads[:3])
    _, balance, allowance, bitmap = reads[3:]
    if not is_contract(multicall_code):
        raise PaymentInvalidError(
            Reason.INVALID_EXACT_EVM_PAYLOAD_UNDEPLOYED_SMART_WALLET,
            f"this chain has no Multicall3 at {MULTICALL3_ADDRESS} to deploy the wallet with",
        )
    if isinstance(steps, RpcError):
        # Each step may fail on its own: only running out of gas (a factory call burning it all) fails all.
        raise PaymentInvalidError(
            Reason.SMART_WALLET_DEPLOYMENT_FAILED,
            f"deploying the wallet and settling could not be simulated within the gas: {steps.message}",
        )
    check_nonce_unused(terms.scheme, bitmap, auth.nonce)
    check_head_time(auth.deadline, head, now, margin_s, expired=Reason.PERMIT2_DEADLINE_EXPIRED)
    try:
        check_counterfactual_steps(
            steps, bad_signature=_BAD_SIGNATURE, paid_failure=paid_failure(terms.scheme)
        )
        if isinstance(estimate, RpcError):
            raise settle_refusal(terms.scheme)(estimate)
    except PaymentInvalidError as refusal:
        if refusal.reason == SIMULATION_FAILED[terms.scheme]:
            check_balance(terms.scheme, balance, terms.amount)
            if erc20_amount(terms.scheme, allowance, "the wallet's allowance to Permit2") < terms.amount:
                raise allowance_required("the wallet has not approved Permit2 for the amount") from refusal
        raise
    gas_estimate = int(estimate, 16)
    gas.check_cap(gas_estimate, what="deploying the wallet and the settlement need")
    return VerifiedPermit2(
        scheme=terms.scheme,
        payer=auth.from_address,
        asset=terms.asset,
        nonce=auth.nonce,
        deadline=auth.deadline,
        amount=terms.settle_amount,
        target=MULTICALL3_ADDRESS,
        calldata=calldata,
        gas_estimate=gas_estimate,
        sender=None,
    )


def _bytes(calldata: str) -> bytes:
    return bytes.fromhex(calldata[2:])

"""A node whose simulation runs behind the wall clock: a payment valid by the time it is mined is not
refused for being "not yet valid".

A transfer is simulated in the `pending` block, which most nodes stamp with the time it would be mined at.
Some stamp it with the last block's time instead: ganache (its `pending` is `latest`), or any node that
mines only on arrival and has been idle. There a payment whose `validAfter` lies between the head's time
and now reverts "authorization is not yet valid" in simulation, yet would be mined, at the wall clock's
time, without trouble. So that refusal, when the wall clock says the window is open, is checked again with
the block's time overridden to now (the `eth_call` / `eth_estimateGas` block overrides of geth, anvil,
reth, Erigon and Nethermind). A node that takes no override, or ignores it, cannot tell: the refusal then
says truthfully that the authorization is not yet valid *on this node's clock*, never that it expired.
"""

from __future__ import annotations

from typing import Any

from ._errors import PaymentInvalidError, RpcError
from ._refusals import check_counterfactual_steps, simulation_failure
from ._rpc import RpcCall, RpcClient
from .wire import Reason

__all__ = ["estimate_counterfactual_at_wall_clock", "simulate_at_wall_clock"]

_NOT_YET_VALID = Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALID_AFTER


async def simulate_at_wall_clock(
    rpc: RpcClient, simulation: RpcCall, refusal: RpcError, *, valid_after: int, now: int
) -> str:
    """The reply of `simulation` run again in a block stamped `now`, when `refusal` (its reply) says only
    that the authorization is not yet valid while by `now` (the wall clock) it is.

    Raises:
        PaymentInvalidError: the refusal stands: another reason than the validity window, a window not
            open by `now` either, a transfer that fails at `now` too (for its own reason), or a node that
            cannot simulate at `now` ("not yet valid on this node's clock").
        ChainUnavailableError: the node could not be reached for the second simulation.
    """
    failure = simulation_failure(refusal.revert_reason or refusal.message)
    if failure.reason != _NOT_YET_VALID or valid_after >= now:
        raise failure
    # The same block, so that a node ignoring the override answers as it did, never from another block.
    call, block = simulation.params[:2]
    try:
        return str(await rpc.call(simulation.method, call, block, {}, {"time": hex(now)}))
    except RpcError as exc:
        again = simulation_failure(exc.revert_reason or exc.message)
        if exc.revert_reason is not None and again.reason != _NOT_YET_VALID:
            raise again from exc
        undecided = exc
    raise _undecided(valid_after) from undecided


async def estimate_counterfactual_at_wall_clock(
    rpc: RpcClient,
    diagnosis: RpcCall,
    estimate: RpcCall,
    refusal: PaymentInvalidError,
    *,
    valid_after: int,
    now: int,
) -> str:
    """The gas estimate of an ERC-6492 wallet's deployment and transfer, `estimate`, made again in a block
    stamped `now` (with `diagnosis`, its step-by-step simulation), when `refusal` (what the steps said at
    the node's time) says only that the authorization is not yet valid while by `now` it is.

    Raises:
        PaymentInvalidError: the refusal stands, or the steps fail at `now` for their own reason, or the
            node cannot simulate at `now` ("not yet valid on this node's clock").
        ChainUnavailableError: the node could not be reached.
    """
    if refusal.reason != _NOT_YET_VALID or valid_after >= now:
        raise refusal
    override: tuple[dict[str, Any], dict[str, str]] = ({}, {"time": hex(now)})
    steps, gas = await rpc.batch(
        [RpcCall(call.method, [*call.params[:2], *override]) for call in (diagnosis, estimate)]
    )
    if isinstance(steps, RpcError):
        raise _undecided(valid_after) from steps
    try:
        check_counterfactual_steps(steps)
    except PaymentInvalidError as again:
        if again.reason != _NOT_YET_VALID:
            raise
        # The override was ignored: the steps still ran at the node's own time.
        raise _undecided(valid_after) from again
    if isinstance(gas, RpcError):
        failure = simulation_failure(gas.revert_reason or gas.message)
        raise (_undecided(valid_after) if failure.reason == _NOT_YET_VALID else failure) from gas
    return str(gas)


def _undecided(valid_after: int) -> PaymentInvalidError:
    """The truthful refusal of a node that cannot simulate at the wall clock's time."""
    return PaymentInvalidError(
        _NOT_YET_VALID,
        f"the authorization is not yet valid on this node's clock, which runs behind validAfter "
        f"{valid_after} (it simulates in a block older than the wall clock); try again once it mines a "
        "newer block",
    )

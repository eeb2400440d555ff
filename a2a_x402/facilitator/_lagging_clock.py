"""A node whose simulation runs behind the wall clock: a payment valid by the time it is mined is not
refused for being "not yet valid".

A transfer is simulated in the `pending` block, which most nodes stamp with the time it would be mined at.
Some do not: ganache 7's `pending` is its `latest` block, so it simulates (`eth_call` and `eth_estimateGas`
alike) at the last block's time, while the block it mines next is stamped by its own clock (the machine's,
whole seconds, blocks may share one). Others stamp `pending` by a clock of their own that lags ours: anvil
after `anvil_setTime`, Hardhat 3 by the whole seconds its start took (its genesis time is taken when its
config is resolved, its clock's offset from it when its provider is made). There a payment whose
`validAfter` lies between the node's time and now reverts "authorization is not yet valid" in simulation.

So that refusal, when the wall clock says the window is open, is checked again with the block's time
overridden to now (the `eth_call` block overrides of geth, anvil, reth, Erigon and Nethermind). A node that
refuses or ignores the override (ganache, Hardhat) is remembered as one, and asked no more. Then:

- if its `pending` block is its `latest` (ganache), the simulation said nothing about the next block's
  time, and the node stamps that block by its clock: the wall clock decides, once `validAfter` is at least
  the validity margin behind it (room for a node's clock a little behind ours), and the caller checks the
  rest by plain reads (`NodeClock.simulate_at_wall_clock` answers None);
- otherwise the node's next block really is stamped at or before `validAfter`, and a transaction sent now
  would revert: the refusal says so truthfully, as not yet valid *on this node's clock*, never expired.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._errors import PaymentInvalidError, RpcError
from ._refusals import check_counterfactual_steps, simulation_failure
from ._rpc import RpcCall, RpcClient
from .wire import Reason

__all__ = ["NodeClock", "estimate_counterfactual_at_wall_clock"]

_NOT_YET_VALID = Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALID_AFTER


def _token_refusal(exc: RpcError) -> PaymentInvalidError:
    return simulation_failure(exc.revert_reason or exc.message)


_PENDING_AND_LATEST = [
    RpcCall("eth_getBlockByNumber", ["pending", False]),
    RpcCall("eth_getBlockByNumber", ["latest", False]),
]


class NodeClock:
    """What one node can tell of the time its next block is stamped at, learned when first needed.

    Concurrency-safe: two payments learning at once learn the same thing.
    """

    def __init__(self, rpc: RpcClient, *, margin_s: int) -> None:
        self._rpc = rpc
        self._margin_s = margin_s
        # Learned once each, never unlearned: a node does not gain block overrides or a pending block.
        self._no_overrides = False
        self._pending_is_latest = False

    async def simulate_at_wall_clock(
        self,
        simulation: RpcCall,
        refusal: RpcError,
        *,
        valid_after: int,
        now: int,
        readable: bool,
        refusal_of: Callable[[RpcError], PaymentInvalidError] = _token_refusal,
    ) -> str | None:
        """The reply of `simulation` run again in a block stamped `now`, when `refusal` (its reply) says only
        that the authorization is not yet valid while by `now` (the wall clock) it is; or None when the
        node cannot simulate at `now` but stamps its next block by its clock, which the wall clock stands
        for: the window is then open, and the caller must check all else by plain reads. `readable` says
        whether it can (a payment it cannot check so is refused as not yet valid instead). `refusal_of`
        reads a reverted simulation (by default the token's revert strings); the reason it gives a payment
        not yet valid is the one every refusal for the window is told with.

        Raises:
            PaymentInvalidError: the refusal stands: another reason than the validity window, a window not
                open by `now` either, a transfer that fails at `now` too (for its own reason), or a node
                whose next block is stamped at or before `validAfter` ("not yet valid on this node's
                clock").
            ChainUnavailableError: the node could not be reached.
        """
        failure = refusal_of(refusal)
        if not _is_window(failure) or valid_after >= now:
            raise failure
        if not self._no_overrides:
            reply = await self._simulate_at(simulation, now, refusal_of)
            if reply is not None:
                return reply
        pending_is_latest, stamped = await self._pending_block()
        if not pending_is_latest:
            raise _behind(valid_after, stamped, now, failure.reason) from refusal
        wall_clock_from = valid_after + self._margin_s + 1
        if readable and now >= wall_clock_from:
            return None
        raise _undecided(valid_after, wall_clock_from if readable else None, failure.reason) from refusal

    async def _simulate_at(
        self, simulation: RpcCall, now: int, refusal_of: Callable[[RpcError], PaymentInvalidError]
    ) -> str | None:
        """`simulation` in a block stamped `now`; None, and the node remembered as one without block
        overrides, if it refuses or ignores them.

        Raises:
            PaymentInvalidError: the transfer fails at `now`, for another reason than the window.
        """
        # The same block, so that a node ignoring the override answers as it did, never from another block.
        call, block = simulation.params[:2]
        try:
            return str(await self._rpc.call(simulation.method, call, block, {}, {"time": hex(now)}))
        except RpcError as exc:
            again = refusal_of(exc)
            if _is_window(again):
                pass  # the override was ignored: still the node's own time
            elif exc.revert_reason is not None or "revert" in exc.message.lower():
                raise again from exc
            # Else the node refused the call as asked: too many parameters (ganache, Hardhat).
        self._no_overrides = True
        return None

    async def _pending_block(self) -> tuple[bool, int | None]:
        """Whether the node's `pending` block is its `latest` (ganache's: it simulates at the head's time
        and says nothing of its next block's), and if not, the time it stamps that block with (if told).

        Only a yes is remembered: a block mined between the two reads makes them differ for a moment.
        """
        if self._pending_is_latest:
            return True, None
        pending, latest = await self._rpc.batch(_PENDING_AND_LATEST)
        if not isinstance(pending, dict) or not isinstance(latest, dict):
            return False, None
        if pending.get("hash") is not None and pending.get("hash") == latest.get("hash"):
            self._pending_is_latest = True
            return True, None
        return False, _quantity(pending.get("timestamp"))


# The reasons of a payment not valid yet: an EIP-3009 authorization's, a Permit2 witness's.
_WINDOW_REASONS = frozenset({_NOT_YET_VALID, Reason.PERMIT2_NOT_YET_VALID})


def _is_window(failure: PaymentInvalidError) -> bool:
    """Whether a refusal says only that the payment is not valid yet."""
    return failure.reason in _WINDOW_REASONS


def _quantity(value: object) -> int | None:
    """A JSON-RPC quantity (hex), or None for anything else."""
    try:
        return int(value, 16) if isinstance(value, str) else None
    except ValueError:
        return None


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
        raise _unsimulated(valid_after) from steps
    try:
        check_counterfactual_steps(steps)
    except PaymentInvalidError as again:
        if again.reason != _NOT_YET_VALID:
            raise
        # The override was ignored: the steps still ran at the node's own time.
        raise _unsimulated(valid_after) from again
    if isinstance(gas, RpcError):
        failure = simulation_failure(gas.revert_reason or gas.message)
        raise (_unsimulated(valid_after) if failure.reason == _NOT_YET_VALID else failure) from gas
    return str(gas)


def _behind(
    valid_after: int, stamped: int | None, now: int, reason: str = _NOT_YET_VALID
) -> PaymentInvalidError:
    """The refusal of a node whose next block, stamped `stamped` if told, is not after `valid_after`."""
    when = (
        f"it stamps its next block {stamped}, {now - stamped} s behind this facilitator's clock; try "
        f"again in {valid_after + 1 - stamped} s"
        if stamped is not None and stamped <= valid_after
        else "it stamps its next block at or before it (its clock runs behind this facilitator's); try "
        "again in a few seconds"
    )
    return PaymentInvalidError(
        reason,
        f"the authorization is not yet valid on this node's clock, by validAfter {valid_after}: {when}",
    )


def _undecided(
    valid_after: int, wall_clock_from: int | None, reason: str = _NOT_YET_VALID
) -> PaymentInvalidError:
    """The refusal of a node simulating in its last block, for a payment the wall clock vouches for only
    from `wall_clock_from` (None: never, since what else the transfer needs cannot be read)."""
    again = (
        "try again once it mines a newer block"
        if wall_clock_from is None
        else f"try again from {wall_clock_from} (validAfter plus this facilitator's validity margin)"
    )
    return PaymentInvalidError(
        reason,
        f"the authorization is not yet valid on this node's clock, which runs behind validAfter "
        f"{valid_after} (it simulates in its last block, older than the wall clock); {again}",
    )


def _unsimulated(valid_after: int) -> PaymentInvalidError:
    """The truthful refusal of a node that cannot simulate at the wall clock's time."""
    return PaymentInvalidError(
        _NOT_YET_VALID,
        f"the authorization is not yet valid on this node's clock, which runs behind validAfter "
        f"{valid_after} (it simulates in a block older than the wall clock); try again once it mines a "
        "newer block",
    )

"""The gas a settlement's transaction needs: simulated from the relayer with its fees, remembered for EOAs,
capped.

Every simulation carries the relayer's address and the fee caps its send will carry: a node runs a call
without fees at a gas price of zero, and a wallet that answers "valid" only then (`tx.gasprice == 0`)
would pass every simulation and revert every real transaction, at the relayer's expense.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from ._errors import PaymentInvalidError, RpcError
from ._refusals import simulation_failure
from ._rpc import RpcCall, RpcClient
from .wire import Reason

__all__ = [
    "NO_FEES",
    "SIMULATION_BLOCK",
    "Fees",
    "RelayerCannotPayError",
    "TransferGas",
    "is_contract",
    "unaffordable",
]

SIMULATION_BLOCK = "pending"
"""The block a transfer is simulated in: the one being built, stamped with the time it would be mined at."""


@dataclass(frozen=True, slots=True)
class Fees:
    """The fee caps a settlement's transaction carries (`Relayer.fee_caps`), for simulating it."""

    max_fee_per_gas: int
    max_priority_fee_per_gas: int

    def fields(self) -> dict[str, str]:
        """The call object's fee fields (none for `NO_FEES`)."""
        if self.max_fee_per_gas == 0:
            return {}
        return {
            "maxFeePerGas": hex(self.max_fee_per_gas),
            "maxPriorityFeePerGas": hex(self.max_priority_fee_per_gas),
        }


NO_FEES = Fees(0, 0)
"""A simulation without fees: only when the relayer cannot cover one at its fees (`RelayerCannotPayError`)."""


class RelayerCannotPayError(Exception):
    """The node would not run a simulation at the relayer's fees: the relayer's balance does not cover them.

    Nothing is wrong with the payment; and a relayer that cannot pay the gas cannot be made to pay for a
    revert either (the node refuses its transaction), so verification simulates without fees instead.
    """


def unaffordable(reply: object) -> bool:
    """Whether a simulation's reply is the node refusing it for the sender's balance (at the fees given)."""
    # An estimate's search is bounded by what the balance pays for at the fees ("allowance"), a call's is not.
    text = reply.message.lower() if isinstance(reply, RpcError) else ""
    return "insufficient funds for gas" in text or "exceeds allowance" in text


def _token_refusal(exc: RpcError) -> PaymentInvalidError:
    return simulation_failure(exc.revert_reason or exc.message)


class TransferGas:
    """Simulations and estimates of the transfers `relayer` sends, refused above `cap`. Concurrency-safe.

    A transfer is sent to the token itself (EIP-3009), or to one contract for every token (`target`: a
    Permit2 proxy), its known gas remembered per token either way; `refusal` names what a reverted
    simulation means (by default the token's revert strings, `simulation_failure`), `over_cap` the reason
    a transaction above the cap is refused with.
    """

    def __init__(
        self,
        rpc: RpcClient,
        *,
        relayer: str,
        cap: int,
        target: str | None = None,
        refusal: Callable[[RpcError], PaymentInvalidError] = _token_refusal,
        over_cap: str = Reason.INVALID_EXACT_EVM_TRANSACTION_SIMULATION_FAILED,
    ) -> None:
        self._rpc = rpc
        self._relayer = relayer
        self._target = target
        self._refusal = refusal
        self._over_cap = over_cap
        self.cap = cap
        # Gas of a transfer signed by an EOA without code, per token.
        self._eoa_gas: dict[str, int] = {}
        self._learning: dict[str, asyncio.Lock] = {}

    @asynccontextmanager
    async def learning(self, asset: str, eoa_signature: bool) -> AsyncIterator[None]:
        """Hold an EOA's verification of `asset` while the gas of its transfer is unknown, until the one
        verification estimating it is done; at once when it is known, or the signature is a contract's.

        Concurrent first settlements (of one authorization, typically) would otherwise each estimate, and
        one settling while the others' estimates run turns them into reverts mid-estimate: ganache 7's
        estimate then searches upwards for enough gas forever, never answering, and the whole JSON-RPC batch
        carrying it waits for the RPC timeout ("the chain could not be reached"). Waiting for one estimate
        costs the others one round trip, once per token and process; then all take the plain-call path.
        """
        if not eoa_signature or asset in self._eoa_gas:
            yield
            return
        lock = self._learning.setdefault(asset, asyncio.Lock())
        await lock.acquire()
        if asset in self._eoa_gas:
            lock.release()
            yield
            return
        try:
            yield
        finally:
            lock.release()

    def call(
        self, to: str, data: str, fees: Fees, *, gas: int | None = None, sender: str | None = None
    ) -> dict[str, str]:
        """A call object from the relayer (or `sender`, another relayer key) with `fees`, limited to `gas`
        if given.

        A plain call's gas is given: a node would otherwise take its block gas limit and ask the relayer's
        balance to cover that at `fees`; an estimate's is not, so an estimate above the cap is still told.
        """
        call = {"from": sender or self._relayer, "to": to, "data": data, **fees.fields()}
        if gas is not None:
            call["gas"] = hex(gas)
        return call

    def simulation(
        self, asset: str, calldata: str, eoa_signature: bool, fees: Fees, *, sender: str | None = None
    ) -> RpcCall:
        """The transfer simulated from the relayer (or `sender`): a gas estimate, or a plain (cheaper) call.

        `eth_estimateGas` runs the call several times over. The cost of an EOA's transfer hardly varies
        for one token, so once known it is simulated with `eth_call` alone; a contract wallet's signature
        check can cost anything, so its transfer is always estimated.
        """
        to = self._target or asset
        if eoa_signature and asset in self._eoa_gas:
            # Room for the known cost even above the cap, so such a transfer is refused for the cap.
            gas = max(self.cap, 2 * self._eoa_gas[asset])
            call = self.call(to, calldata, fees, gas=gas, sender=sender)
            return RpcCall("eth_call", [call, SIMULATION_BLOCK])
        return RpcCall("eth_estimateGas", [self.call(to, calldata, fees, sender=sender), SIMULATION_BLOCK])

    async def estimate(
        self,
        asset: str,
        calldata: str,
        eoa_signature: bool,
        signer_code: object,
        simulated: str,
        fees: Fees,
        *,
        sender: str | None = None,
    ) -> int:
        """The gas of this transfer: estimated in the batch, remembered for EOAs, or estimated now.

        An EOA signature from an address with code (an EIP-7702 account) is checked by the token through
        ERC-1271 and may cost anything: its simulation, a plain call, is followed by an estimate.
        """
        has_code = not isinstance(signer_code, RpcError) and is_contract(signer_code)
        if not eoa_signature:
            return int(simulated, 16)
        known = self._eoa_gas.get(asset)
        if known is None:
            estimate = int(simulated, 16)
            if not has_code:
                self._eoa_gas[asset] = estimate
            return estimate
        if not has_code:
            return known
        try:
            call = self.call(self._target or asset, calldata, fees, sender=sender)
            reply = await self._rpc.call("eth_estimateGas", call, SIMULATION_BLOCK)
        except RpcError as exc:
            if unaffordable(exc):
                raise RelayerCannotPayError(exc.message) from exc
            raise self._refusal(exc) from exc
        return int(reply, 16)

    def unsimulated(self, asset: str) -> int:
        """The gas of an EOA's transfer that the node could not simulate (`_lagging_clock`): what the
        token's transfers are known to cost, or else the cap, the most a settlement may spend."""
        return self._eoa_gas.get(asset, self.cap)

    def check_cap(self, estimate: int, *, what: str = "the transfer needs") -> None:
        """Refuse a transaction needing more gas than `cap`."""
        if estimate > self.cap:
            raise PaymentInvalidError(
                self._over_cap, f"{what} {estimate} gas, more than this facilitator's cap of {self.cap}"
            )


def is_contract(code: object) -> bool:
    """Whether an `eth_getCode` reply is code (not an empty account)."""
    return isinstance(code, str) and code not in ("0x", "0x0", "")

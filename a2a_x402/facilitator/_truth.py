"""What the chain says of a claim's authorization, read before any answer that its settlement failed,
reverted or was not sent.

A receipt or a node's reply tells what one transaction did, not what became of the payment: a node may
mine an identical transaction twice and answer its hash with the reverted copy (ganache), take a send it
refused or did not answer in time, and anyone may submit the authorization. The token's
`authorizationState(payer, nonce)` (for a Permit2 authorization, Permit2's `nonceBitmap`: `_nonce_state`)
says whether it was used; if it was, the transfer that used it (from its block's logs: `_found`) is the
settlement when it paid the claim's terms (token, payee, amount). Read on those paths only: a success costs
nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._answers import read_within
from ._claims import Claim
from ._elsewhere import SettledElsewhere
from ._errors import RpcError
from ._found import claim_settlement
from ._nonce_state import read_used, used_call
from ._rpc import RpcCall, RpcClient
from .wire import SettleResponse

__all__ = ["AuthorizationOnChain", "ChainTruth"]


@dataclass(frozen=True, slots=True)
class AuthorizationOnChain:
    """A claim's authorization at the head, when no transfer that used it paid the claim's terms."""

    used: bool  # used (by a transfer that paid something else) or cancelled
    expired: bool  # the head is at or past `validBefore`: it can never be used
    in_pool: bool = False  # unused at the head, used in the pending block (read only when asked)


class ChainTruth:
    """Answers a settlement from the chain before it is answered as failed."""

    def __init__(self, rpc: RpcClient, elsewhere: SettledElsewhere):
        self._rpc = rpc
        self._elsewhere = elsewhere

    async def judge(
        self, claim: Claim, deadline: float | None, *, pool: bool = False
    ) -> SettleResponse | AuthorizationOnChain:
        """The recorded answer if a mined transfer used the claim's authorization and paid its terms
        (success if it may count here: `SettledElsewhere.record`), else the authorization's state for the
        caller's failure; with `pool`, also whether the pending block uses it (a send the node answered
        with an error may still be in its pool). The reads keep to `deadline` (None: no caller waits).

        Raises:
            ChainError: the chain could not tell within the budget.
        """
        state_call = used_call(claim.asset, claim.payer, claim.nonce)
        calls = [
            RpcCall("eth_call", [state_call, "latest"]),
            RpcCall("eth_getBlockByNumber", ["latest", False]),
        ]
        if pool:
            calls.append(RpcCall("eth_call", [state_call, "pending"]))
        values: list[Any] = []
        for reply in await read_within(self._rpc.batch(calls), deadline):
            if isinstance(reply, RpcError):
                raise reply
            values.append(reply)
        used, head = values[0], values[1]
        # Later blocks are no older than the latest: an authorization expired there can never be used.
        expired = int(head["timestamp"], 16) >= claim.valid_before
        if not read_used(claim.asset, claim.nonce, used):
            in_pool = pool and read_used(claim.asset, claim.nonce, values[2])
            return AuthorizationOnChain(used=False, expired=expired, in_pool=in_pool)
        settled = await read_within(claim_settlement(self._rpc, claim), deadline)
        if settled is not None:
            return await self._elsewhere.record(claim, settled)
        return AuthorizationOnChain(used=True, expired=expired)

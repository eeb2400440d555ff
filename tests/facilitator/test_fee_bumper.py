"""`FeeBumper`'s watch loop against a real node: a key watched while a look at the chain is in flight."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from eth_account import Account

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator import RpcCall, RpcClient, RpcError
from a2a_x402.facilitator._receipts import ReceiptWatcher
from a2a_x402.facilitator._relayer import Relayer, SentTransaction
from a2a_x402.facilitator._replacement import FeeBumper
from a2a_x402.facilitator._sent import SentTransactionStore


class _WatchingDuringBatch(RpcClient):
    """The node's client, running `during` once while its next batch is in flight."""

    during: Callable[[], None] | None = None

    async def batch(self, calls: Sequence[RpcCall]) -> list[Any | RpcError]:
        during, self.during = self.during, None
        if during is not None:
            during()
        return await super().batch(calls)


def _watch(bumper: FeeBumper, sender: str) -> None:
    sent = SentTransaction(tx_hash="0x" + "ab" * 32, raw="0x", nonce=0, sender=sender, max_fee_per_gas=10**12)
    # The relayer and the store are touched only to send a replacement, which this look never does.
    bumper.watch(cast(Relayer, object()), sent, to=sender, data="0x", gas=21_000, claim_id=None)


async def test_a_key_first_watched_during_a_look_at_the_chain_waits_for_the_next_look(
    chain: DevChain,
) -> None:
    # A key whose first transaction is watched while the bumper's batch is in flight (a key another
    # process's lease just handed over, in the two-replica fault run) had no count in that batch: the
    # look crashed with a KeyError, which ended the bumper for the life of the process.
    rpc = _WatchingDuringBatch(chain.rpc_url)
    bumper = FeeBumper(
        rpc,
        ReceiptWatcher(rpc),
        cast(SentTransactionStore, None),
        bump_after_s=3600,
        max_fee_per_gas=None,
        stuck_after_s=3600,
    )
    try:
        _watch(bumper, Account.create().address)
        rpc.during = lambda: _watch(bumper, Account.create().address)
        await bumper._tick()  # noqa: SLF001 - the one look, run here rather than on the bumper's clock
        await bumper._tick()  # noqa: SLF001 - and the next, which looks at both keys
        assert bumper.in_flight(Account.create().address) == 0
    finally:
        await bumper.aclose()
        await rpc.aclose()

"""Fee spikes: a settlement left unmined because its maxFeePerGas fell below the base fee is replaced.

The replacement carries the same nonce and the same call with both fee caps raised by more than the
node's replacement rule (+10 % on maxFeePerGas and on maxPriorityFeePerGas), up to the operator's
ceiling. Every transaction of one nonce is kept together (a *family*): whichever member is mined is the
settlement, and since they share a nonce at most one ever is, so exactly-once holds whichever it is. A
replacement the original overtakes (mined first) is simply dropped by the node.

One loop per process checks the families older than the bump delay, with one RPC batch per tick: the
pending block's base fee and each relayer's mined and pending nonce counts (a family whose nonce is
below the mined count is done).
A family at the ceiling, still priced under the base fee, marks its key as stuck (the pool gives that
key no new work) until the base fee falls or the transaction is mined.

A node may also hold a key's next nonce without mining it, priced well enough, while later nonces wait
behind it: anvil files a transaction as *queued* when the one before it is mined between its reading of
the account's nonce and its adding to the pool, and never promotes it. So a family whose nonce is the
account's next and that the node does not count as executable (its pending nonce count stops at it: the
case of a transaction it holds queued, or dropped), unmined past the revive delay while later nonces of
its key wait, is asked for by hash: one the node no longer holds is sent again (the same signed bytes:
enough for a node that dropped it); one it holds is replaced with bumped fees like an underpriced one,
which a node takes as a fresh transaction at that nonce (and which promotes the ones queued behind it);
once per nonce, after which only the fee bumps above apply. Its claim follows the replacement, so
exactly-once holds as above. A next nonce merely waiting for a slow block counts as executable, so it is
neither sent again nor replaced. A node whose pending block is its latest (ganache) counts nothing of its
pool, so its counts cannot tell a transaction waiting for its block from a stuck one: what it holds is left
to its block time, since it would mine the same bytes sent again, or a replacement, besides the original.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from eth_account.typed_transactions.typed_transaction import TypedTransaction
from eth_utils.crypto import keccak
from hexbytes import HexBytes
from sqlalchemy.exc import SQLAlchemyError

from ._errors import ChainError, RpcError
from ._receipts import Receipt, ReceiptWatcher
from ._relayer import Relayer, SentTransaction
from ._rpc import RpcCall, RpcClient
from ._sent import SentTransactionStore
from .wire import checksum_address

__all__ = ["FeeBumper", "bumped_fees"]

logger = logging.getLogger(__name__)

# Percent over the old caps: the node's rule is +10 % on both, and the rounding must not fall short of it.
_BUMP_PERCENT = 112


def bumped_fees(
    max_fee: int, priority_fee: int, base_fee: int, ceiling: int | None
) -> tuple[int, int] | None:
    """Fee caps for a replacement of a transaction priced `max_fee`/`priority_fee` under `base_fee`.

    Both caps rise by more than 10 %; the max fee covers twice the base fee plus the tip, as a fresh send
    would. None when the ceiling leaves no room for a replacement the node would take.
    """
    priority = -(-priority_fee * _BUMP_PERCENT // 100) + 1
    wanted = max(-(-max_fee * _BUMP_PERCENT // 100) + 1, 2 * base_fee + priority)
    if ceiling is not None:
        wanted = min(wanted, ceiling)
        if wanted * 100 < max_fee * 110 or wanted <= max_fee:
            return None
        priority = min(priority, wanted)
    return wanted, priority


@dataclass(eq=False)
class _Family:
    """The transactions of one relayer nonce, the original first."""

    relayer: Relayer
    to: str
    data: str
    gas: int
    members: list[SentTransaction]
    claim_id: str | None
    first_sent_at: float
    last_sent_at: float
    at_ceiling: bool = False
    revived: bool = False  # replaced by a revive once: a node whose pending count lags its pool (a
    # replica forwarding to a sequencer) would otherwise have a healthy transaction replaced every delay
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def newest(self) -> SentTransaction:
        return self.members[-1]


class FeeBumper:
    """Watches the transactions this process sent and replaces those a base-fee spike left behind."""

    def __init__(
        self,
        rpc: RpcClient,
        watcher: ReceiptWatcher,
        sent: SentTransactionStore,
        *,
        bump_after_s: float,
        max_fee_per_gas: int | None,
        stuck_after_s: float,
        revive_after_s: float = 2.0,
    ):
        self._rpc = rpc
        self._watcher = watcher
        self._sent = sent
        self._bump_after_s = bump_after_s
        self._revive_after_s = revive_after_s
        # No family gets a new member sooner than this after its last send.
        self._grows_after_s = min(bump_after_s, revive_after_s)
        self._ceiling = max_fee_per_gas
        self._stuck_after_s = stuck_after_s
        # By relayer, then nonce (in the order sent, so a relayer's first entry is its oldest).
        self._families: dict[str, dict[int, _Family]] = {}
        self._by_hash: dict[str, _Family] = {}
        self._at_ceiling: set[tuple[str, int]] = set()  # usually empty: checked on every pick
        self._task: asyncio.Task[None] | None = None
        self.replacements_sent = 0
        self.revivals = 0

    def watch(
        self, relayer: Relayer, sent: SentTransaction, *, to: str, data: str, gas: int, claim_id: str | None
    ) -> None:
        """Keep an eye on `sent` (just accepted by the node) until its nonce is mined."""
        now = time.monotonic()
        family = _Family(relayer, to, data, gas, [sent], claim_id, now, now)
        self._families.setdefault(sent.sender, {})[sent.nonce] = family
        self._by_hash[sent.tx_hash] = family
        self._ensure_running()

    def adopt(self, relayer: Relayer, raw_tx: str, claim_id: str) -> None:
        """Watch a transaction of `relayer` sent by another process (one whose key this process took over)."""
        fields = TypedTransaction.from_bytes(HexBytes(raw_tx)).as_dict()
        nonce = int(fields["nonce"])
        if nonce in self._families.get(relayer.address, {}):
            return
        tx_hash = "0x" + keccak(HexBytes(raw_tx)).hex()
        sent = SentTransaction(
            tx_hash=tx_hash,
            raw=raw_tx,
            nonce=nonce,
            sender=relayer.address,
            max_fee_per_gas=int(fields["maxFeePerGas"]),
            max_priority_fee_per_gas=int(fields["maxPriorityFeePerGas"]),
        )
        self.watch(
            relayer,
            sent,
            to=checksum_address("0x" + bytes(fields["to"]).hex()),
            data="0x" + bytes(fields["data"]).hex(),
            gas=int(fields["gas"]),
            claim_id=claim_id,
        )

    def in_flight(self, relayer: str) -> int:
        """How many of `relayer`'s nonces this process sent and has not seen mined."""
        return len(self._families.get(relayer, ()))

    def stuck(self, relayer: str) -> bool:
        """Whether `relayer`'s oldest watched transaction is stuck: at the fee ceiling under the base fee, or
        unmined for longer than the stuck delay."""
        families = self._families.get(relayer)
        if not families:
            return False
        oldest = next(iter(families.values()))
        if time.monotonic() - oldest.first_sent_at > self._stuck_after_s:
            return True
        return any(sender == relayer for sender, _ in self._at_ceiling)

    def sent(self, tx_hash: str) -> SentTransaction | None:
        """The transaction with this hash, if this process sent or replaced it and still watches it."""
        family = self._by_hash.get(tx_hash)
        if family is None:
            return None
        return next((tx for tx in family.members if tx.tx_hash == tx_hash), None)

    async def wait(self, tx_hash: str, *, confirmations: int, timeout_s: float) -> Receipt | None:
        """The receipt of whichever transaction of `tx_hash`'s nonce is mined (see `ReceiptWatcher.wait`).

        The receipt names the transaction that was mined: a replacement, or the original that overtook it.
        """
        loop = asyncio.get_running_loop()
        deadline = time.monotonic() + timeout_s
        family = self._by_hash.get(tx_hash)
        hashes = [tx_hash]
        if family is None:
            # Sent by another process, or before a restart: its replacements are in the database.
            with contextlib.suppress(SQLAlchemyError):
                hashes = [tx.tx_hash for tx in await self._sent.of_claim_with(tx_hash)] or hashes
        while True:
            if family is not None:
                hashes = [tx.tx_hash for tx in family.members]
            # The common case costs one plain wait: a single transaction that cannot be replaced before the
            # wait ends (the bump delay has not passed), or one with no family to grow.
            if len(hashes) == 1:
                until = (
                    deadline if family is None else min(deadline, family.last_sent_at + self._grows_after_s)
                )
                left = until - time.monotonic()
                if left > 0 or family is None:
                    receipt = await self._watcher.wait(
                        hashes[0], confirmations=confirmations, timeout_s=max(left, 0)
                    )
                    if receipt is not None or family is None or time.monotonic() >= deadline:
                        return receipt
                    continue
            # A family no longer watched (its nonce mined) grows no more: wait for its receipts alone.
            watched = family is not None and self._by_hash.get(tx_hash) is family
            grown: asyncio.Future[Any] = (
                asyncio.ensure_future(family.changed.wait())
                if family is not None and watched
                else loop.create_future()
            )
            receipts: list[asyncio.Future[Any]] = [
                asyncio.ensure_future(
                    self._watcher.wait(
                        h, confirmations=confirmations, timeout_s=max(deadline - time.monotonic(), 0)
                    )
                )
                for h in hashes
            ]
            try:
                receipt = await _first_receipt(receipts, grown)
            finally:
                for task in (*receipts, grown):
                    task.cancel()
            if receipt is not None:
                return receipt
            if not grown.done() or time.monotonic() >= deadline:
                return None

    async def aclose(self) -> None:
        """Stop watching."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def _ensure_running(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(), name="fee-bumper")

    async def _run(self) -> None:
        # A held next nonce stalls its whole key (anvil's race leaves one every few thousand sends), so it
        # is looked for a few times per revive delay, but never more often than receipts are polled: an
        # operator who set that near a slow chain's block time (a metered provider) meant it for this too.
        interval = min(1.0, max(self._watcher.poll_interval_s, self._grows_after_s / 4))
        while self._families:
            await asyncio.sleep(interval)
            try:
                await self._tick()
            except ChainError as exc:
                logger.warning("fee check failed: %s", exc)

    async def _tick(self) -> None:
        senders = sorted(self._families)
        replies = await self._rpc.batch(
            [
                RpcCall("eth_getBlockByNumber", ["pending", False]),
                RpcCall("eth_blockNumber", []),
                *(
                    RpcCall("eth_getTransactionCount", [sender, block])
                    for sender in senders
                    for block in ("latest", "pending")
                ),
            ]
        )
        values: list[Any] = []
        for reply in replies:
            if isinstance(reply, RpcError):
                raise reply
            values.append(reply)
        base_fee = int(values[0].get("baseFeePerGas", "0x0"), 16)
        pending_number = values[0].get("number")
        blind = pending_number is not None and int(pending_number, 16) <= int(values[1], 16)
        counts = [int(count, 16) for count in values[2:]]
        mined = dict(zip(senders, counts[0::2], strict=True))
        # The node's pending count stops below a nonce it holds but would not mine (queued, or dropped).
        executable = dict(zip(senders, counts[1::2], strict=True))
        now = time.monotonic()
        # Only the keys asked about: one whose first transaction was watched during the batch (a key this
        # process just took over, say) is looked at next tick.
        watched = [(r, n, f) for r in senders for n, f in list(self._families.get(r, {}).items())]
        for sender, nonce, family in watched:
            key = (sender, nonce)
            if nonce < mined[sender]:
                self._forget(key)
                continue
            newest = family.newest
            if newest.max_fee_per_gas >= base_fee:
                family.at_ceiling = False
                self._at_ceiling.discard(key)
                held = nonce == mined[sender] >= executable[sender] and not family.revived
                if held and self._held(sender, nonce, family, now):
                    await self._revive(key, family, base_fee, blind=blind)
                continue
            if now - family.last_sent_at < self._bump_after_s:
                continue
            await self._replace(key, family, base_fee)

    def _held(self, sender: str, nonce: int, family: _Family, now: float) -> bool:
        """Whether `family`, at the account's next nonce and not executable on the node, has waited past
        the revive delay with later nonces of its key behind it."""
        if now - family.last_sent_at < self._revive_after_s:
            return False
        return any(later > nonce for later in self._families.get(sender, ()))

    async def _revive(self, key: tuple[str, int], family: _Family, base_fee: int, *, blind: bool) -> None:
        """Send a held next nonce again if the node no longer holds it, else replace it with bumped fees;
        on a node `blind` to its pool (its pending block is its latest), leave what it holds to be mined."""
        newest = family.newest
        try:
            holds = await self._rpc.call("eth_getTransactionByHash", newest.tx_hash) is not None
        except ChainError as exc:
            logger.warning("relayer %s nonce %d: could not ask for %s: %s", *key, newest.tx_hash, exc)
            family.last_sent_at = time.monotonic()
            return
        if holds and blind:
            # Waiting for its block, as far as anyone can tell: looked at again a revive delay later.
            family.last_sent_at = time.monotonic()
            return
        self.revivals += 1
        if not holds:
            try:
                answer = await family.relayer.resend(newest.raw)
            except ChainError as exc:
                logger.warning("relayer %s nonce %d: sending it again refused: %s", *key, exc)
                family.last_sent_at = time.monotonic()
                return
            if answer == "used":
                self._forget(key)  # mined meanwhile: the receipt will tell by which
                return
            if answer == "taken":
                logger.warning(
                    "relayer %s nonce %d: the node had dropped %s; sent again", *key, newest.tx_hash
                )
                family.last_sent_at = time.monotonic()
                return
        # The node holds it and still will not mine it (anvil: queued behind a predecessor already mined).
        logger.warning(
            "relayer %s nonce %d: the node holds %s unmined while later nonces wait; replacing it",
            *key,
            newest.tx_hash,
        )
        family.revived = True
        await self._replace(key, family, base_fee)

    async def _replace(self, key: tuple[str, int], family: _Family, base_fee: int) -> None:
        newest = family.newest
        fees = bumped_fees(newest.max_fee_per_gas, newest.max_priority_fee_per_gas, base_fee, self._ceiling)
        if fees is None:
            if not family.at_ceiling:
                logger.warning(
                    "relayer %s nonce %d: the base fee %d is over the fee ceiling; the key takes no new work",
                    key[0],
                    key[1],
                    base_fee,
                )
            family.at_ceiling = True
            self._at_ceiling.add(key)
            return
        max_fee, priority = fees
        try:
            replacement = await family.relayer.replace(
                newest, to=family.to, data=family.data, gas=family.gas, max_fee=max_fee, priority_fee=priority
            )
        except ChainError as exc:
            logger.warning("relayer %s nonce %d: replacement refused: %s", key[0], key[1], exc)
            family.last_sent_at = time.monotonic()
            return
        if replacement is None:
            self._forget(key)  # the nonce was mined meanwhile: by one of the family, the receipt will tell
            return
        self.replacements_sent += 1
        logger.info(
            "relayer %s nonce %d: %s replaced by %s at max fee %d (base fee %d)",
            key[0],
            key[1],
            newest.tx_hash,
            replacement.tx_hash,
            max_fee,
            base_fee,
        )
        family.members.append(replacement)
        if family.claim_id is not None:
            originals = family.members[:1] if len(family.members) == 2 else []
            try:
                await self._sent.record_replacement(family.claim_id, [*originals, replacement])
            except SQLAlchemyError as exc:
                # Still waited for here (it is in the family); a revive sends the claim's recorded one again.
                logger.warning(
                    "claim %s: could not record replacement %s: %s", family.claim_id, replacement.tx_hash, exc
                )
        family.last_sent_at = time.monotonic()
        self._by_hash[replacement.tx_hash] = family
        family.changed.set()
        family.changed = asyncio.Event()

    def _forget(self, key: tuple[str, int]) -> None:
        self._at_ceiling.discard(key)
        families = self._families.get(key[0], {})
        family = families.pop(key[1], None)
        if not families:
            self._families.pop(key[0], None)
        if family is not None:
            for tx in family.members:
                self._by_hash.pop(tx.tx_hash, None)
            family.changed.set()


async def _first_receipt(receipts: list[asyncio.Future[Any]], grown: asyncio.Future[Any]) -> Receipt | None:
    """The first receipt one of `receipts` resolves to; None once all ended without one, or `grown` fired."""
    waiting = set(receipts)
    while waiting:
        done, _ = await asyncio.wait([*waiting, grown], return_when=asyncio.FIRST_COMPLETED)
        for task in waiting & done:
            receipt: Receipt | None = task.result()
            if receipt is not None:
                return receipt
        waiting -= done
        if grown in done:
            return None
    return None

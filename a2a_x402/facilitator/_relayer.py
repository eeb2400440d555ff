"""The relayer: the facilitator's own account that pays gas to submit payers' authorizations.

Transactions from one account must use consecutive nonces, and a nonce that is taken but never reaches
the node leaves a gap that stalls every later transaction. So one sender task per key allocates, signs
and sends: what concurrent settlements queued while the previous round was under way goes out as one
JSON-RPC batch in nonce order (one HTTP request, where one send each cost a request and a round trip),
and each reply is read as a lone send's. A send refused below one the node accepted leaves its nonce
empty: the sender fills it at once with a zero-value transfer to itself, so later nonces never wait on
a gap. After an error reply the next allocation asks the node for its pending count; after a lost answer
the node is asked whether it holds each transaction's hash (a send that timed out counts as maybe sent
whatever the node says of it then: a slow node may take it later). Receipt waits happen elsewhere, so
sends pipeline while earlier transactions are still being mined.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

import coincurve
from eth_account import Account

from ._errors import ChainError, ChainUnavailableError, RpcError, RpcTimeoutError
from ._nonce_words import nonce_too_high, nonce_too_low
from ._rpc import RpcCall, RpcClient
from ._txsign import sign_eip1559

__all__ = ["FILLER_GAS", "BroadcastUncertainError", "Relayer", "SentTransaction"]

logger = logging.getLogger(__name__)

_FEE_TTL_S = 1.0
_SEND_ATTEMPTS = 3
# Sends of one round: well under the RPC client's batch limit, so a round is never split between requests.
_ROUND_MAX = 100
# A filler refused for a passing reason (fees moved) is tried again this long after, if nothing else is sent.
_FILL_RETRY_S = 1.0
FILLER_GAS = 21_000
"""The gas of the zero-value transfer to itself that fills a nonce a refused send left empty."""


@dataclass(frozen=True, slots=True)
class SentTransaction:
    """A transaction the node accepted into its pool."""

    tx_hash: str
    raw: str
    nonce: int
    sender: str
    max_fee_per_gas: int = 0
    max_priority_fee_per_gas: int = 0


@dataclass(eq=False, slots=True)
class _Send:
    """One call queued for the sender task, and the caller's future."""

    to: str
    data: str
    gas: int
    future: asyncio.Future[SentTransaction] = field(repr=False)
    attempt: int = 1


class BroadcastUncertainError(ChainUnavailableError):
    """The node went away while taking a transaction: it may hold it (and mine it) or not.

    Such a transaction must be treated as broadcast — waited for, and revived if it never shows up —
    never as "nothing was sent", or a payer could be charged for a settlement reported as failed.
    """

    def __init__(self, sent: SentTransaction, detail: str):
        super().__init__(f"the node became unreachable while taking {sent.tx_hash}: {detail}")
        self.sent = sent


class Relayer:
    """Signs and submits EIP-1559 transactions from one key with gap-free nonces."""

    def __init__(
        self,
        rpc: RpcClient,
        key: str,
        chain_id: int,
        *,
        priority_fee_wei: int | None = None,
        max_fee_per_gas: int | None = None,
    ):
        self._rpc = rpc
        self._key = coincurve.PrivateKey(bytes.fromhex(key.removeprefix("0x")))
        self._address: str = Account.from_key(key).address
        self._chain_id = chain_id
        self._priority_fee_wei = priority_fee_wei
        self._max_fee_per_gas = max_fee_per_gas
        self._next_nonce: int | None = None
        self._fees: tuple[float, int, int] | None = None  # (fetched_at, max_fee, priority_fee)
        self._fee_read: asyncio.Task[tuple[int, int]] | None = None
        self._queue: list[_Send] = []
        self._holes: list[int] = []  # nonces left empty below an accepted one, not yet filled
        self._posted: dict[_Send, SentTransaction] = {}  # the round's sends handed to the node, by call
        # The highest-nonce transaction the node took from this key: what the key has in flight.
        self._top_taken: SentTransaction | None = None
        self._sender: asyncio.Task[None] | None = None
        self.on_filler: Callable[[SentTransaction], None] | None = None
        """Called with each zero-value transfer sent to fill a nonce (so it is watched like the others)."""

    @property
    def address(self) -> str:
        """The relayer's checksummed address."""
        return self._address

    @property
    def next_nonce(self) -> int | None:
        """The nonce the next transaction will carry, if known without asking the node."""
        return self._next_nonce

    async def send(self, to: str, data: str, gas: int) -> SentTransaction:
        """Sign and submit a call to `to` with `data`; return once the node has accepted it.

        Calls made while the previous round of sends is under way go out together as one batch.

        Raises:
            RpcError: the node refused the transaction; nothing was submitted.
            ChainUnavailableError: the node could not be reached, and it does not hold the transaction (a lost
                answer is resolved by asking the node for the transaction's hash).
        """
        send = _Send(to, data, gas, asyncio.get_running_loop().create_future())
        self._queue.append(send)
        if self._sender is None or self._sender.done():
            self._sender = asyncio.get_running_loop().create_task(self._sending(), name="relayer-sends")
        return await send.future

    async def aclose(self) -> None:
        """Stop the sender task; calls still queued fail as unsent."""
        if self._fee_read is not None:
            self._fee_read.cancel()
            await asyncio.gather(self._fee_read, return_exceptions=True)
        if self._sender is not None:
            self._sender.cancel()
            await asyncio.gather(self._sender, return_exceptions=True)
            self._sender = None
        for send in self._queue:
            if not send.future.done():
                send.future.set_exception(ChainUnavailableError("the relayer was closed"))
        self._queue = []

    async def _sending(self) -> None:
        while self._queue or self._holes:
            if not self._queue:
                await asyncio.sleep(_FILL_RETRY_S)
            # A round goes out as one request, in nonce order: no larger than the client sends at once.
            most = min(_ROUND_MAX, self._rpc.batch_limit)
            sends = [send for send in self._queue[:most] if not send.future.done()]
            del self._queue[:most]
            try:
                await self._round(sends)
            except asyncio.CancelledError:
                self._fail_round(sends, ChainUnavailableError("the relayer was closed"))
                raise
            except Exception as exc:  # noqa: BLE001 - every caller must get an answer; the task carries on
                if not isinstance(exc, ChainError):
                    logger.exception("relayer %s: a round of sends failed", self._address)
                self._next_nonce = None
                self._fail_round(sends, exc)
            finally:
                self._posted = {}

    def _fail_round(self, sends: list[_Send], error: BaseException) -> None:
        """Answer the sends of a round cut short: one whose transaction was already handed to the node may
        be mined, so it is uncertain, never unsent (its claim must wait for it); the others get `error`."""
        for send in sends:
            sent = self._posted.get(send)
            if sent is None:
                self._fail(send, error)
            else:
                self._fail(send, BroadcastUncertainError(sent, f"its round of sends was cut short ({error})"))

    async def _round(self, sends: list[_Send]) -> None:
        """Send `sends` at the next nonces as one batch, after fillers for holes an earlier round left."""
        nonce = await self._nonce()
        max_fee, priority_fee = await self.fee_caps()
        # A hole at the node's next nonce is filled by this round's first send, or by a filler if it has none
        # (a pending count that stops at a gap must not drop it); one above it waits for a later round.
        left = sorted(self._holes)
        fill = [hole for hole in left if hole < nonce or (hole == nonce and not sends)]
        self._holes = [hole for hole in left if hole > nonce]
        if nonce in fill:
            self._next_nonce = None  # the filler takes it: the next round asks the node again
        earlier = [self._filler(hole, max_fee, priority_fee) for hole in fill]
        signed = [
            self._sign(nonce + i, max_fee, priority_fee, to=send.to, data=send.data, gas=send.gas)
            for i, send in enumerate(sends)
        ]
        self._posted = dict(zip(sends, signed, strict=True))
        replies = await self._submit([*earlier, *signed])
        self._settle_fillers(earlier, replies[: len(earlier)])
        replies = replies[len(earlier) :]
        accepted = [i for i, reply in enumerate(replies) if reply is None or _uncertain(reply)]
        top = max(accepted, default=-1)
        if sends:
            # Unsure whether the node holds some, or none taken: the next round asks the node's pending count.
            sure = not any(_uncertain(reply) for reply in replies)
            self._next_nonce = nonce + top + 1 if accepted and sure else None
        holes: list[int] = []
        retry: list[_Send] = []
        for i, (send, sent, reply) in enumerate(zip(sends, signed, replies, strict=True)):
            if reply is None:
                if self._top_taken is None or sent.nonce > self._top_taken.nonce:
                    self._top_taken = sent
                self._answer(send, sent)
                continue
            if i < top and not _uncertain(reply):
                holes.append(sent.nonce)
            if isinstance(reply, RpcError) and _stale_nonce_or_fee(reply) and send.attempt < _SEND_ATTEMPTS:
                logger.info("relayer resync after %s (nonce %d)", reply.message, sent.nonce)
                self._fees = None
                send.attempt += 1
                retry.append(send)
                continue
            self._fail(send, reply)
        if holes:
            # Refused below an accepted one: filled now, or every later nonce would wait on the gap.
            fillers = [self._filler(hole, max_fee, priority_fee) for hole in holes]
            self._settle_fillers(fillers, await self._submit(fillers))
        self._queue[:0] = retry

    def _filler(self, nonce: int, max_fee: int, priority_fee: int) -> SentTransaction:
        return self._sign(nonce, max_fee, priority_fee, to=self._address, data="0x", gas=FILLER_GAS)

    def _settle_fillers(self, fillers: list[SentTransaction], replies: list[ChainError | None]) -> None:
        for filler, reply in zip(fillers, replies, strict=True):
            if reply is None or _uncertain(reply):
                logger.warning(
                    "relayer %s: nonce %d filled by %s", self._address, filler.nonce, filler.tx_hash
                )
                if self.on_filler is not None:
                    self.on_filler(filler)
            elif isinstance(reply, RpcError) and nonce_too_low(reply.message):
                continue  # the nonce was used after all: no hole
            else:
                logger.warning("relayer %s: nonce %d not filled yet: %s", self._address, filler.nonce, reply)
                self._fees = None
                self._holes.append(filler.nonce)

    async def _submit(self, signed: list[SentTransaction]) -> list[ChainError | None]:
        """Send `signed` as one batch; per transaction None if the node holds it, else why not.

        A lost answer is settled by asking the node for each hash; a transaction it cannot be asked about,
        or one whose request timed out (a slow node may take it after answering that it does not hold it),
        is a `BroadcastUncertainError`.
        """
        if not signed:
            return []
        try:
            replies = await self._rpc.batch([RpcCall("eth_sendRawTransaction", [tx.raw]) for tx in signed])
        except ChainUnavailableError as lost:
            return await self._held(signed, lost)
        return [
            reply if isinstance(reply, RpcError) and not _already_known(reply) else None for reply in replies
        ]

    async def _held(
        self, signed: list[SentTransaction], lost: ChainUnavailableError
    ) -> list[ChainError | None]:
        """Which of `signed` the node holds (None) or not (`lost`), after a batch whose answer was lost."""
        try:
            found = await self._rpc.batch(
                [RpcCall("eth_getTransactionByHash", [tx.tx_hash]) for tx in signed]
            )
        except ChainUnavailableError:
            return [BroadcastUncertainError(tx, str(lost)) for tx in signed]
        out: list[ChainError | None] = []
        for tx, reply in zip(signed, found, strict=True):
            if reply is not None and not isinstance(reply, RpcError):
                out.append(None)
            elif isinstance(reply, RpcError) or isinstance(lost, RpcTimeoutError):
                out.append(BroadcastUncertainError(tx, str(lost)))
            else:
                out.append(lost)
        return out

    @staticmethod
    def _answer(send: _Send, sent: SentTransaction) -> None:
        if not send.future.done():
            send.future.set_result(sent)

    @staticmethod
    def _fail(send: _Send, error: BaseException) -> None:
        if not send.future.done():
            send.future.set_exception(error)

    async def replace(
        self, sent: SentTransaction, *, to: str, data: str, gas: int, max_fee: int, priority_fee: int
    ) -> SentTransaction | None:
        """Send the call of `sent` again with its nonce and higher fees; None if that nonce is already mined.

        Raises:
            RpcError: the node refused the replacement (underpriced, say); the original stands.
            ChainUnavailableError: the node could not be reached and does not hold the replacement.
        """
        replacement = self._sign(sent.nonce, max_fee, priority_fee, to=to, data=data, gas=gas)
        try:
            await self._rpc.call("eth_sendRawTransaction", replacement.raw)
        except RpcError as exc:
            if _already_known(exc):
                return replacement
            if nonce_too_low(exc.message):
                return None
            raise
        except ChainUnavailableError as exc:
            # A timed-out replacement may still be taken: it is kept with the others of its nonce.
            if not isinstance(exc, RpcTimeoutError) and not await self._node_knows(replacement, exc):
                raise
        return replacement

    def _sign(
        self, nonce: int, max_fee: int, priority_fee: int, *, to: str, data: str, gas: int
    ) -> SentTransaction:
        signed = sign_eip1559(
            self._key,
            chain_id=self._chain_id,
            nonce=nonce,
            max_priority_fee_per_gas=priority_fee,
            max_fee_per_gas=max_fee,
            gas=gas,
            to=to,
            data=bytes.fromhex(data[2:]),
        )
        return SentTransaction(
            tx_hash="0x" + signed.hash.hex(),
            raw="0x" + signed.raw.hex(),
            nonce=nonce,
            sender=self.address,
            max_fee_per_gas=max_fee,
            max_priority_fee_per_gas=priority_fee,
        )

    async def rebroadcast(self, raw: str) -> bool:
        """Send an already-signed transaction of ours again (it left the pool); False if its nonce is taken.

        Raises:
            RpcError: the node refused it for another reason.
            ChainUnavailableError: the node could not be reached.
        """
        return await self.resend(raw) != "used"

    async def resend(self, raw: str) -> Literal["taken", "held", "used"]:
        """Send an already-signed transaction of ours again: "taken" if the node took it anew (it had
        dropped it), "held" if it already holds it, "used" if its nonce is taken.

        Raises:
            RpcError: the node refused it for another reason.
            ChainUnavailableError: the node could not be reached.
        """
        try:
            await self._rpc.call("eth_sendRawTransaction", raw)
        except RpcError as exc:
            if _already_known(exc):
                return "held"
            if nonce_too_low(exc.message):
                return "used"
            raise
        return "taken"

    async def _nonce(self) -> int:
        if self._next_nonce is None:
            pending = int(await self._rpc.call("eth_getTransactionCount", self.address, "pending"), 16)
            top = self._top_taken
            # A node whose pending count leaves out its own pool (ganache: `pending` is `latest`) would have
            # the next send replace a settlement in flight: the count is checked against what the key has
            # in flight, which counts while the node still holds it (one dropped leaves its nonce free).
            if top is not None and top.nonce >= pending:
                if await self._rpc.call("eth_getTransactionByHash", top.tx_hash) is not None:
                    pending = top.nonce + 1
            self._next_nonce = pending
        return self._next_nonce

    async def _node_knows(self, sent: SentTransaction, lost: ChainUnavailableError) -> bool:
        """Whether the node holds `tx_hash` (after a send whose answer was lost).

        Raises:
            BroadcastUncertainError: the node cannot be asked either, so the transaction may be out there.
        """
        try:
            return await self._rpc.call("eth_getTransactionByHash", sent.tx_hash) is not None
        except ChainUnavailableError:
            raise BroadcastUncertainError(sent, str(lost)) from lost

    async def fee_caps(self) -> tuple[int, int]:
        """(maxFeePerGas, maxPriorityFeePerGas) the next send carries: read at most once a second.

        Verification simulates with these too, so a wallet sees the gas price in the simulation that it
        will see on chain (a node runs a call without fees at a gas price of zero).

        Raises:
            ChainError: the node could not be read.
        """
        fees = self._fees
        if fees is not None and time.monotonic() - fees[0] <= _FEE_TTL_S:
            return fees[1], fees[2]
        # One read for every caller that finds the caps stale (a burst of verifications, a round of sends).
        reading = self._fee_read
        if reading is None or reading.done():
            reading = self._fee_read = asyncio.get_running_loop().create_task(self._read_fees())
        return await asyncio.shield(reading)

    async def _read_fees(self) -> tuple[int, int]:
        now = time.monotonic()
        block, tip = await self._rpc.batch(
            [RpcCall("eth_getBlockByNumber", ["latest", False]), RpcCall("eth_maxPriorityFeePerGas", [])]
        )
        if isinstance(block, RpcError):
            raise block
        base_fee = int(block.get("baseFeePerGas", "0x0"), 16)
        priority = self._priority_fee_wei
        if priority is None:
            priority = int(tip, 16) if isinstance(tip, str) else 1_000_000_000
        # Twice the base fee survives six consecutive full blocks of +12.5% each; a spike beyond that is
        # met by replacing the transaction (`FeeBumper`), never by a cap above the operator's ceiling.
        max_fee = 2 * base_fee + priority
        if self._max_fee_per_gas is not None:
            max_fee = min(max_fee, self._max_fee_per_gas)
            priority = min(priority, max_fee)
        self._fees = (now, max_fee, priority)
        return max_fee, priority


def _uncertain(reply: ChainError | None) -> bool:
    """Whether a send's outcome counts as accepted: the node may hold the transaction and mine it."""
    return isinstance(reply, BroadcastUncertainError)


def _already_known(exc: RpcError) -> bool:
    text = exc.message.lower()
    return "already known" in text or "already imported" in text or "known transaction" in text


def _stale_nonce_or_fee(exc: RpcError) -> bool:
    text = exc.message.lower()
    return (
        nonce_too_low(text)
        or nonce_too_high(text)
        or "replacement transaction underpriced" in text
        or "less than block base fee" in text
    )

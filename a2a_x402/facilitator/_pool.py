"""The relayer pool: a process's share of the relayer keys, each leased so no two processes use one key.

Keys come from `X402_RELAYER_KEYS` (or the single `X402_RELAYER_KEY`). At start, and every third of the
lease after, the pool renews the keys it holds and tries the others: a free key is taken at once; one
whose holder's lease ran out (a process killed or cut off) is taken over, but takes no work until its
pending transactions are accounted for: the taker reconciles the claims the vanished holder broadcast
with that key (reviving or recording each), and waits until the node holds none of the key's nonces
unmined, so new sends start at the chain's next nonce and never collide with one left in flight.

A process takes at most `X402_RELAYER_MAX_KEYS` keys, so replicas sharing one list split it between them.
Settlements go to the usable key with the fewest transactions in flight, but an `upto` settlement goes
from the one key its payer named (the x402 proxy takes it from no other), which this process must hold. A
key is not usable while its balance is below the floor, or while its oldest transaction is stuck (see
`FeeBumper.stuck`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from sqlalchemy.exc import SQLAlchemyError

from ._errors import ChainError, ChainUnavailableError, RpcError
from ._leases import LeaseStore
from ._relayer import FILLER_GAS, BroadcastUncertainError, Relayer, SentTransaction
from ._replacement import FeeBumper
from ._rpc import RpcCall, RpcClient

__all__ = ["NoRelayerError", "RelayerPool", "RelayerState", "holder_id"]

logger = logging.getLogger(__name__)

AccountFor = Callable[[Relayer], Awaitable[bool]]


class NoRelayerError(ChainUnavailableError):
    """No relayer key of this process can take a settlement now (all held elsewhere, short of gas, stuck)."""


def holder_id() -> str:
    """A lease holder id naming this process (host and pid, for operators) and unique to this start."""
    return f"{socket.gethostname()[:48]}:{os.getpid()}:{secrets.token_hex(4)}"


@dataclass(frozen=True, slots=True)
class RelayerState:
    """One key of the pool as this process sees it (for metrics and health)."""

    address: str
    held: bool
    usable: bool
    reason: str | None
    balance_wei: int | None
    next_nonce: int | None
    in_flight: int


class RelayerPool:
    """Sends settlements through the keys this process holds the lease of."""

    def __init__(
        self,
        rpc: RpcClient,
        relayers: list[Relayer],
        leases: LeaseStore,
        bumper: FeeBumper,
        *,
        lease_s: float,
        min_balance_wei: int = 0,
        max_keys: int | None = None,
    ):
        if not relayers:
            raise ValueError("a relayer pool needs at least one key")
        self._rpc = rpc
        self._relayers = {relayer.address: relayer for relayer in relayers}
        for relayer in relayers:
            relayer.on_filler = self._filled_by(relayer)
        self._leases = leases
        self._bumper = bumper
        self._lease_s = lease_s
        self._min_balance_wei = min_balance_wei
        self._max_keys = len(relayers) if max_keys is None else max_keys
        self._held: set[str] = set()
        self._accounting: dict[str, asyncio.Task[None]] = {}
        self._ready: set[str] = set()
        self._balances: dict[str, int] = {}
        self._account_for: AccountFor | None = None
        self._task: asyncio.Task[None] | None = None
        self._started: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()
        self._turn = 0
        self.spent_out: Callable[[str], bool] | None = None
        """Whether a key spent its budget for reverted settlements (`RevertGuard.spent_out`): then it sends
        nothing new."""

    @property
    def address(self) -> str:
        """The first key's address (what verification simulates the settlement from)."""
        return next(iter(self._relayers))

    async def fee_caps(self) -> tuple[int, int]:
        """The fee caps of the first key (`address`): see `Relayer.fee_caps`."""
        return await self._relayers[self.address].fee_caps()

    @property
    def held_ready(self) -> tuple[str, ...]:
        """The keys this process holds and has accounted for (whatever else keeps them from work)."""
        return tuple(
            address for address in self._relayers if address in self._held and address in self._ready
        )

    @property
    def addresses(self) -> tuple[str, ...]:
        """Every key's address, held here or not."""
        return tuple(self._relayers)

    def on_take_over(self, account_for: AccountFor) -> None:
        """Set how a key taken over from a vanished holder is accounted for (True once it is)."""
        self._account_for = account_for

    async def start(self) -> None:
        """Take the free keys and start renewing; safe to call again (it runs once)."""
        if self._started is None:
            self._started = asyncio.get_running_loop().create_task(self._first_round())
        await asyncio.shield(self._started)

    async def aclose(self) -> None:
        """Stop renewing and give back every key held, so other processes may take them at once."""
        tasks = [t for t in (self._started, self._task, *self._accounting.values()) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._task = None
        for relayer in self._relayers.values():
            await relayer.aclose()
        held, self._held, self._ready = sorted(self._held), set(), set()
        with contextlib.suppress(SQLAlchemyError):
            await self._leases.release(held)

    async def send(
        self,
        to: str,
        data: str,
        gas: int,
        *,
        claim_id: str | None = None,
        wait_s: float | None = None,
        sender: str | None = None,
    ) -> SentTransaction:
        """`Relayer.send` through a usable key (`sender`'s alone, when given), waiting up to `wait_s` (or a
        lease) if none is usable now.

        Raises:
            NoRelayerError: no key became usable in time, or `sender` is not a key this process holds;
                nothing was sent.
            RpcError, ChainUnavailableError: as `Relayer.send`.
        """
        await self.start()
        relayer = await self._pick(self._lease_s if wait_s is None else min(wait_s, self._lease_s), sender)
        try:
            sent = await relayer.send(to, data, gas)
        except BroadcastUncertainError as exc:
            # Maybe out there: watched like any other, so a spike cannot leave it behind either.
            self._bumper.watch(relayer, exc.sent, to=to, data=data, gas=gas, claim_id=claim_id)
            raise
        self._bumper.watch(relayer, sent, to=to, data=data, gas=gas, claim_id=claim_id)
        return sent

    def _filled_by(self, relayer: Relayer) -> Callable[[SentTransaction], None]:
        """What `relayer` calls with a zero-value transfer it sent to fill a nonce: watched like a settlement,
        so a held or underpriced filler is revived or replaced too."""

        def watch(filler: SentTransaction) -> None:
            self._bumper.watch(relayer, filler, to=relayer.address, data="0x", gas=FILLER_GAS, claim_id=None)

        return watch

    async def rebroadcast(self, raw: str) -> bool:
        """Send an already-signed transaction again; see `Relayer.rebroadcast` (it needs no lease: its nonce
        is its own)."""
        return await next(iter(self._relayers.values())).rebroadcast(raw)

    def holds(self, address: str) -> bool:
        """Whether `address` is a key this process holds the lease of (usable now or not)."""
        return address in self._held

    def relayer(self, address: str) -> Relayer | None:
        """The pool's relayer of `address`, if it is one of its keys."""
        return self._relayers.get(address)

    def states(self) -> list[RelayerState]:
        """Every key's state, in the order configured."""
        return [self._state(address) for address in self._relayers]

    def _state(self, address: str) -> RelayerState:
        relayer = self._relayers[address]
        return RelayerState(
            address=address,
            held=address in self._held,
            usable=self._why_not(address) is None,
            reason=self._why_not(address),
            balance_wei=self._balances.get(address),
            next_nonce=relayer.next_nonce,
            in_flight=self._bumper.in_flight(address),
        )

    def _why_not(self, address: str) -> str | None:
        if address not in self._held:
            return "held by another process"
        if address not in self._ready:
            return "accounting for an earlier holder's transactions"
        balance = self._balances.get(address)
        if balance is not None and balance < self._min_balance_wei:
            return "balance below the floor"
        if self.spent_out is not None and self.spent_out(address):
            return "revert gas budget spent"
        if self._bumper.stuck(address):
            return "oldest transaction stuck"
        return None

    async def _pick(self, wait_s: float, sender: str | None = None) -> Relayer:
        """A usable key (`sender`'s, when given), once one is (within `wait_s`)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        keys = list(self._relayers) if sender is None else [sender]
        while True:
            if sender is not None and sender not in self._held:
                raise NoRelayerError(f"the relayer key {sender} is not held by this process")
            usable = [address for address in keys if self._why_not(address) is None]
            if usable:
                self._turn += 1
                # Fewest in flight first; ties in turn, so a burst spreads over every key.
                rotated = usable[self._turn % len(usable) :] + usable[: self._turn % len(usable)]
                return self._relayers[min(rotated, key=self._bumper.in_flight)]
            left = deadline - loop.time()
            if left <= 0:
                raise NoRelayerError("no relayer key of this process can take a settlement now")
            changed = self._changed
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), min(left, 0.5))

    async def _first_round(self) -> None:
        try:
            await self._round()
        except (ChainError, SQLAlchemyError) as exc:
            logger.warning("relayer pool: first lease round failed: %s", exc)
        self._task = asyncio.get_running_loop().create_task(self._renewing(), name="relayer-leases")

    async def _renewing(self) -> None:
        while True:
            await asyncio.sleep(self._lease_s / 3)
            try:
                await self._round()
            except (ChainError, SQLAlchemyError) as exc:
                logger.warning("relayer pool: lease round failed: %s", exc)

    async def _round(self) -> None:
        """Renew what is held, try what is not, read the balances."""
        kept = await self._leases.renew(sorted(self._held))
        for lost in self._held - kept:
            # Another process took it (this one was silent past the lease): stop using it at once.
            logger.warning("relayer %s: lease lost to another process", lost)
            self._ready.discard(lost)
        self._held = kept
        for address in self._relayers:
            if len(self._held) >= self._max_keys:
                break
            if address in self._held:
                continue
            lease = await self._leases.take(address)
            if lease is None:
                continue
            self._held.add(address)
            if lease.taken_over:
                logger.info("relayer %s: lease taken over from a vanished holder", address)
                self._accounting[address] = asyncio.get_running_loop().create_task(self._account(address))
            else:
                self._ready.add(address)
        await self._read_balances()
        self._wake()

    async def _account(self, address: str) -> None:
        """Make a taken-over key usable once its earlier holder's transactions are accounted for."""
        relayer = self._relayers[address]
        try:
            while address in self._held:
                try:
                    if self._account_for is None or await self._account_for(relayer):
                        self._ready.add(address)
                        logger.info("relayer %s: earlier holder's transactions accounted for", address)
                        self._wake()
                        return
                except (ChainError, SQLAlchemyError) as exc:
                    logger.warning("relayer %s: accounting failed: %s", address, exc)
                await asyncio.sleep(min(1.0, self._lease_s / 3))
        finally:
            self._accounting.pop(address, None)

    async def _read_balances(self) -> None:
        held = sorted(self._held)
        if not held:
            return
        replies = await self._rpc.batch([RpcCall("eth_getBalance", [address, "latest"]) for address in held])
        for address, reply in zip(held, replies, strict=True):
            if isinstance(reply, RpcError):
                raise reply
            self._balances[address] = int(reply, 16)

    def _wake(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

"""The facilitator core: verify and settle payments on one EVM chain, exactly once: `exact` by EIP-3009,
and by Permit2 witness transfers `exact` (`assetTransferMethod: "permit2"`) and `upto` (`_permit2_settle`).

This is the one implementation behind both the HTTP service and the merchant's in-process use. Its
answers are x402 v2 `VerifyResponse` / `SettleResponse` documents; a payment that fails a check is an
answer (`isValid: false`, `success: false`), never an exception.

Settling, in order: reading the request; an existing claim for the authorization or the idempotency key
short-circuits to its answer (before any clock check, so a retry after `validBefore` still gets it); the
checks without chain access; chain checks in one RPC batch; the durable claim; the broadcast; a bounded
wait for the receipt at the configured depth. A settlement still unconfirmed at the deadline is answered
`settlement_pending` with its transaction hash; a later settle with the same idempotency key, or a status
call, finishes it (first checking that the transaction is still in the pool, and sending it again if not).
Every chain wait of a settle keeps to the caller's budget, even on a node that stops answering. Every
answer about a claim is the one stored with it, so repeated answers are identical.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from typing import Self

from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.storage import create_engine, ensure_schema_current

from ._answers import Answers, verify_answer
from ._checks import FOREIGN_SETTLEMENTS_COUNTED
from ._claims import ClaimState, ClaimStore
from ._config import FacilitatorSettings
from ._elsewhere import SettledElsewhere
from ._errors import ChainMismatchError, PaymentInvalidError
from ._leases import LeaseStore
from ._node_start import node_chain_id as read_node_chain_id
from ._outcome import Outcomes
from ._permit2_settle import Permit2Payments
from ._permit2_verify import Permit2Verifier
from ._pool import RelayerPool, RelayerState, holder_id
from ._presented import Presented
from ._probe import ChainStatus, read_chain_status
from ._receipts import ReceiptWatcher
from ._reconcile import reconcile_claims
from ._records import ClaimRecords
from ._recovery import Recovery
from ._relayer import Relayer
from ._replacement import FeeBumper
from ._request import idempotency_key_of, namespaced_key, read_payment
from ._reverted import RevertedRelease
from ._reverts import RevertGuard
from ._rpc import RpcClient
from ._sent import SentTransactionStore
from ._settlement import Settlement
from ._supported import supported_response
from ._takeover import account_for_key
from ._truth import ChainTruth
from ._verify import Verifier
from .wire import (
    PaymentPayload,
    PaymentRequirements,
    Permit2PaymentPayload,
    SettleResponse,
    SupportedResponse,
    VerifyResponse,
    payer_of,
)

__all__ = ["Facilitator"]

logger = logging.getLogger(__name__)


class Facilitator:
    """Verifies and settles payments on the chain of its RPC node. Safe for concurrent use.

    The composition of the settlement's parts: `Settlement` (verify, claim, answer a known claim),
    `Outcomes` (broadcast, receipt wait, pool check), `SettledElsewhere` (front-running),
    `RevertedRelease` and `ClaimRecords`, sharing one RPC client, claim store and relayer pool (whose
    `FeeBumper` replaces settlements a base-fee spike left behind).
    """

    def __init__(
        self,
        *,
        rpc: RpcClient,
        claims: ClaimStore,
        relayers: RelayerPool,
        bumper: FeeBumper,
        watcher: ReceiptWatcher,
        network: str,
        confirmations: int = 1,
        receipt_timeout_s: float = 20.0,
        validity_margin_s: int = 6,
        gas_limit_cap: int = 300_000,
        erc6492_factories: Iterable[str] = (),
        revert_cooloff_s: float = 3600.0,
        revert_cooloff_code_payers: int = 3,
        relayer_revert_budget_wei: int | None = 10**16,
        count_foreign_settlements: bool = False,
    ):
        self.network = network
        self.chain_id = int(network.split(":", 1)[1])
        self._rpc = rpc
        self._claims = claims
        self._relayer = relayers
        self._bumper = bumper
        self._receipt_timeout_s = receipt_timeout_s
        self._owned_engine: AsyncEngine | None = None
        self._database_url: str | None = None
        self._answers = Answers(network)
        self._watcher = watcher
        self._recovery = Recovery(rpc, claims, relayers)
        self.revert_guard = RevertGuard(
            claims.engine,
            chain_id=self.chain_id,
            cooloff_s=revert_cooloff_s,
            code_payers=revert_cooloff_code_payers,
            budget_wei=relayer_revert_budget_wei,
        )
        """What reverted settlements cost and made suspect (cool-offs, the relayers' revert budget)."""
        relayers.spent_out = self.revert_guard.spent_out
        records = ClaimRecords(claims, self._answers, confirmations=confirmations)
        self._elsewhere = SettledElsewhere(
            rpc,
            self._recovery,
            self._watcher,
            records,
            self._answers,
            confirmations=confirmations,
            relayers=relayers.addresses,
            count_foreign=count_foreign_settlements,
        )
        self._outcomes = Outcomes(
            claims=claims,
            relayer=relayers,
            watcher=bumper,
            recovery=self._recovery,
            records=records,
            elsewhere=self._elsewhere,
            reverted=RevertedRelease(rpc, records, self._answers, self.revert_guard),
            truth=ChainTruth(rpc, self._elsewhere),
            answers=self._answers,
            confirmations=confirmations,
            gas_limit_cap=gas_limit_cap,
        )
        verifier = Verifier(
            rpc,
            chain_id=self.chain_id,
            relayer=relayers.address,
            fees=relayers.fee_caps,
            validity_margin_s=validity_margin_s,
            gas_limit_cap=gas_limit_cap,
            erc6492_factories=erc6492_factories,
        )
        self._permit2 = Permit2Payments(
            Permit2Verifier(
                rpc,
                chain_id=self.chain_id,
                relayer=relayers.address,
                facilitators=relayers.addresses,
                fees=relayers.fee_caps,
                validity_margin_s=validity_margin_s,
                gas_limit_cap=gas_limit_cap,
                erc6492_factories=erc6492_factories,
            ),
            self.revert_guard,
            chain_id=self.chain_id,
            network=network,
        )
        self._settlement = Settlement(
            rpc=rpc,
            claims=claims,
            verifier=verifier,
            outcomes=self._outcomes,
            elsewhere=self._elsewhere,
            records=records,
            answers=self._answers,
            network=network,
            chain_id=self.chain_id,
            guard=self.revert_guard,
            relayers=lambda: relayers.held_ready,
            holds=relayers.holds,
        )
        relayers.on_take_over(
            lambda relayer: account_for_key(
                relayer, rpc=rpc, claims=claims, outcomes=self._outcomes, bumper=bumper
            )
        )

    @classmethod
    def from_settings(cls, settings: FacilitatorSettings, *, engine: AsyncEngine | None = None) -> Self:
        """Build a facilitator without network I/O (connections open on first use); see `startup_checks`.

        Call it at startup, not while serving: a relayer key given as a file path is read here.

        Raises:
            ValueError: no usable relayer key is configured.
        """
        rpc = RpcClient(settings.rpc_url, timeout_s=settings.rpc_timeout_s)
        keys = settings.relayer_private_keys()
        owned = engine is None
        engine = engine or create_engine(settings.database_url)
        watcher = ReceiptWatcher(rpc, poll_interval_s=settings.receipt_poll_s)
        bumper = FeeBumper(
            rpc,
            watcher,
            SentTransactionStore(engine),
            bump_after_s=settings.fee_bump_after_s,
            max_fee_per_gas=settings.max_fee_per_gas,
            stuck_after_s=settings.relayer_stuck_after_s,
            revive_after_s=settings.relayer_revive_after_s,
        )
        relayers = [
            Relayer(rpc, key, settings.chain_id, max_fee_per_gas=settings.max_fee_per_gas) for key in keys
        ]
        leases = LeaseStore(
            engine, chain_id=settings.chain_id, holder=holder_id(), lease_s=settings.relayer_lease_s
        )
        pool = RelayerPool(
            rpc,
            relayers,
            leases,
            bumper,
            lease_s=settings.relayer_lease_s,
            min_balance_wei=settings.relayer_min_balance_wei,
            max_keys=settings.relayer_max_keys,
        )
        facilitator = cls(
            rpc=rpc,
            claims=ClaimStore(engine, lease_s=settings.claim_lease_s),
            relayers=pool,
            bumper=bumper,
            watcher=watcher,
            network=settings.network,
            confirmations=settings.confirmations,
            receipt_timeout_s=settings.receipt_timeout_s,
            validity_margin_s=settings.validity_margin_s,
            gas_limit_cap=settings.gas_limit_cap,
            erc6492_factories=settings.erc6492_factory_addresses,
            revert_cooloff_s=settings.revert_cooloff_s,
            revert_cooloff_code_payers=settings.revert_cooloff_code_payers,
            relayer_revert_budget_wei=settings.relayer_revert_budget_wei,
            count_foreign_settlements=settings.count_foreign_settlements,
        )
        facilitator._owned_engine = engine if owned else None
        facilitator._database_url = settings.database_url
        return facilitator

    @classmethod
    async def open(cls, settings: FacilitatorSettings, *, engine: AsyncEngine | None = None) -> Self:
        """`from_settings` then `startup_checks`: a facilitator ready to serve.

        Raises:
            ChainMismatchError: the node's eth_chainId is not the configured network's.
            ChainUnavailableError: the node could not be reached.
            storage.SchemaOutdatedError: the claim store was not migrated.
            ValueError: no usable relayer key is configured.
        """
        # The key may be a file path: build off the event loop.
        facilitator = await asyncio.to_thread(cls.from_settings, settings, engine=engine)
        try:
            await facilitator.startup_checks()
        except BaseException:
            await facilitator.aclose()
            raise
        return facilitator

    async def startup_checks(self) -> None:
        """Refuse to serve on a wrong chain or an outdated claim store; then take the free relayer keys.

        Raises:
            ChainMismatchError: the node's eth_chainId is not the configured network's.
            ChainUnavailableError: the node could not be reached.
            storage.SchemaOutdatedError: the claim store was not migrated.
        """
        if self._database_url is not None:
            await ensure_schema_current(self._database_url, "facilitator")
        node_chain_id = await read_node_chain_id(self._rpc)
        if node_chain_id != self.chain_id:
            raise ChainMismatchError(
                f"the RPC node serves chain {node_chain_id}, but X402_NETWORK is {self.network}"
            )
        schemes = await self._permit2.probe()
        logger.info(
            "Permit2 schemes this chain has the contracts for: %s", ", ".join(sorted(schemes)) or "none"
        )
        if self._elsewhere.count_foreign:
            # Not refused: one deployment, or several on one database, is a sound configuration; but no
            # check can see another deployment paying to the same payTo with a database of its own.
            logger.warning(FOREIGN_SETTLEMENTS_COUNTED)
        await self._relayer.start()

    async def aclose(self) -> None:
        """Stop background work, give back the relayer keys, and close connections this facilitator opened."""
        await self._relayer.aclose()
        await self._outcomes.aclose()
        await self._bumper.aclose()
        await self._watcher.aclose()
        await self._rpc.aclose()
        if self._owned_engine is not None:
            await self._owned_engine.dispose()

    @property
    def relayer_address(self) -> str:
        """The account that pays gas for settlements."""
        return self._relayer.address

    @property
    def relayer_addresses(self) -> tuple[str, ...]:
        """Every relayer account this facilitator settles with (what `/readyz` and `/metrics` report on)."""
        return self._relayer.addresses

    @property
    def engine(self) -> AsyncEngine:
        """The database of the claim store."""
        return self._claims.engine

    async def chain_status(self) -> ChainStatus:
        """The node's chain id and head, and every relayer's balance and next nonce, in one round trip.

        Raises:
            ChainUnavailableError: the node could not be reached or refused a read.
        """
        return await read_chain_status(self._rpc, self.relayer_addresses)

    async def unfinished_claims(self) -> dict[ClaimState, int]:
        """How many claims are `claimed` (nothing sent yet) and `broadcast` (sent, not yet final)."""
        return await self._claims.unfinished_counts()

    def relayer_states(self) -> list[RelayerState]:
        """Each relayer key as this process sees it: held, usable or why not, balance, nonce, in flight."""
        return self._relayer.states()

    @property
    def replacements_sent(self) -> int:
        """How many fee-bumped replacements this process has sent."""
        return self._bumper.replacements_sent

    def supported(self) -> SupportedResponse:
        """The kinds this facilitator verifies and settles, and its signers (`_supported`): the Permit2 ones
        where the chain has the contracts (as `startup_checks` found them)."""
        return supported_response(
            self.network, self.chain_id, self._relayer.addresses, permit2_schemes=self._permit2.schemes
        )

    async def verify(
        self, payload: PaymentPayload | Permit2PaymentPayload, requirements: PaymentRequirements
    ) -> VerifyResponse:
        """Check `payload` (an EIP-3009 `exact` payment, or a Permit2 one of `exact` or `upto`) against
        `requirements` without changing anything anywhere."""
        checks = (
            self._verify_eip3009(payload, requirements)
            if isinstance(payload, PaymentPayload)
            else self._permit2.verify(payload, requirements)
        )
        return await verify_answer(checks, payer_of(payload))

    async def _verify_eip3009(self, payload: PaymentPayload, requirements: PaymentRequirements) -> None:
        await self._settlement.verify(read_payment(payload, requirements, self.network))

    async def settle(
        self,
        payload: PaymentPayload | Permit2PaymentPayload,
        requirements: PaymentRequirements,
        *,
        idempotency_key: str | None = None,
        timeout_s: float | None = None,
        presented_at: int | None = None,
        namespace: str | None = None,
    ) -> SettleResponse:
        """Settle `payload` on chain at most once; see the module docstring for the sequence.

        A Permit2 payment's requirements are the settlement's: an `upto` one's `amount` is what to charge,
        at most the maximum the payer permitted; 0 charges nothing and sends no transaction, answered as
        success with an empty `transaction` and an `amount` of 0 (x402's `upto` scheme). An `upto` settlement
        is sent from the relayer key its payer named (`witness.facilitator`), refused with nothing sent
        when this process does not hold that key's lease.

        `idempotency_key` (or the payload's `payment-identifier` extension id) makes retries safe: the same
        key gets the first answer again, the transaction hash included. Without one, a second settle of an
        authorization is refused as `duplicate_settlement`, naming the original transaction.

        `presented_at` (unix seconds) is when the caller durably took this payment. An authorization that
        someone else's transaction already used to pay the payee counts as settled only if foreign
        settlements count here (`count_foreign_settlements`: every deployment paying to this payTo shares
        this claim store; otherwise such a settle is refused naming the transaction) and that transaction
        was mined at or after it, within a few seconds' skew (spec §15.6): one mined earlier may be a copy of
        a payment made elsewhere. Without it (the HTTP API cannot vouch for its callers) such a settle is
        refused as a used nonce, naming the transaction under `extensions.settledElsewhere`.

        `namespace` (the HTTP service's caller) scopes the idempotency key: the same key of two namespaces
        names two claims, so no caller can reach another's settlement by guessing its key.

        Raises:
            IdempotencyConflictError: the key was first used for a different payment.
            InvalidIdempotencyKeyError: the key is not 1 to 255 printable ASCII characters.
        """
        budget_s = self._receipt_timeout_s if timeout_s is None else min(timeout_s, self._receipt_timeout_s)
        deadline = time.monotonic() + budget_s
        key_text = idempotency_key_of(idempotency_key, payload)
        if key_text is not None and namespace is not None:
            key_text = namespaced_key(namespace, key_text)
        try:
            presented = self._presented(payload, requirements)
        except PaymentInvalidError as exc:
            return self._answers.failure(exc.reason, exc.message, payer_of(payload))
        return await self._settlement.settle(presented, key_text, deadline, presented_at)

    def _presented(
        self, payload: PaymentPayload | Permit2PaymentPayload, requirements: PaymentRequirements
    ) -> Presented:
        """`payload` as a settle against `requirements` presents it.

        Raises:
            PaymentInvalidError: the checks that need neither the chain nor the clock refused it.
        """
        if isinstance(payload, PaymentPayload):
            return self._settlement.presented(read_payment(payload, requirements, self.network))
        return self._permit2.presented(payload, requirements)

    async def settlement_status(
        self,
        payload: PaymentPayload | Permit2PaymentPayload,
        requirements: PaymentRequirements,
        *,
        timeout_s: float = 0.0,
    ) -> SettleResponse | None:
        """The settlement answer for this authorization, finishing a pending one; None if never claimed."""
        try:
            presented = self._presented(payload, requirements)
        except PaymentInvalidError:
            return None
        return await self._settlement.status(presented, timeout_s)

    async def reconcile(
        self, *, reorg_window_blocks: int = 64, on_failure: Callable[[], None] | None = None
    ) -> int:
        """Finish what crashes, dropped transactions and reorgs left behind; return how many claims moved.

        Broadcast claims are awaited briefly (and revived if their transaction left the pool); claims whose
        owner vanished before broadcasting are released, or recorded as settled if their authorization was
        used meanwhile; recent successes whose transaction a reorg removed are broadcast again while their
        authorization is still unused. A claim that fails (whatever it raises) is logged in one line,
        reported to `on_failure` and left to the next pass; the others go on.
        """
        return await reconcile_claims(
            rpc=self._rpc,
            claims=self._claims,
            outcomes=self._outcomes,
            recovery=self._recovery,
            elsewhere=self._elsewhere,
            reorg_window_blocks=reorg_window_blocks,
            on_failure=on_failure,
        )

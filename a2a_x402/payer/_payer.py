"""Paying an A2A merchant that prices its skills with the x402 extension (v0.3 on A2A 1.0).

Usage::

    policy = PaymentPolicy(max_amount_atomic=1_000_000)  # at most 1 USDC (6 decimals) a payment
    async with Payer.connect("https://shop.example", key, policy=policy) as payer:
        result = await payer.pay("count the words in this")
        print(result.transaction, result.artifacts)

The run: send the request; the merchant answers ``TASK_STATE_INPUT_REQUIRED`` with ``payment-required``
terms; the policy picks the entry to sign (payTo pinned to the card); the payer signs an EIP-3009
authorization, or a Permit2 witness transfer (``exact`` by Permit2, or ``upto``: at most a maximum, of which
the merchant settles what the task used; its Permit2 allowance read first on the node of ``rpc_urls``, and
shared with the payer's payments in flight: ``_allowance_leases``), and
sends it as ``payment-submitted`` on the same task; the task then completes (artifacts and
receipts), works on (the payer polls GetTask until it resolves), asks again with fresh terms after a
retryable failure (only then is a new authorization signed, at most ``max_payments`` per run), or fails.
Fresh terms after ``INSUFFICIENT_FUNDS`` are signed only when an ``on_fresh_terms`` hook may have topped the
payer up; without one the run stops at the first such refusal (``InsufficientFundsError``).

Never paying twice. A transport error while submitting (timeout, reset, lost answer) leaves the payer not
knowing whether the merchant took the payment, so it presents the same signed payment again: the same
message, byte for byte, including its ``messageId`` (it is the same message; a server that deduplicates by
``messageId`` sees one, and the merchant recognises the payload and its nonce, which the token (EIP-3009)
or Permit2 accepts once). When the merchant refuses the re-presentation because the task moved on, or the
retries run out, GetTask tells the outcome. A new authorization is signed only for a new
``payment-required`` status; the status already answered never leads to a second signature.

AP2 mandates (§20). A payer given the user's open mandates (``mandates=``) pays a tenant the card declares
in ``params.ap2`` with closed mandates whenever its terms carry an ``ap2-checkout``: the checkout and the
open mandates' constraints are checked, and their use reserved, before anything is signed (``_ap2_round``).

Every request carries ``A2A-Version`` and ``A2A-Extensions: <EXTENSION_URI>`` (SDK service parameters), goes
through the a2a-sdk client for the chosen binding and tenant, and has a timeout.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from dataclasses import dataclass
from types import TracebackType

import httpx
from a2a.client import A2AClientError
from a2a.types import Message, SendMessageRequest, Task, TaskState, TaskStatus
from a2a.utils.errors import A2AError
from eth_account import Account

from a2a_x402.agentcard import CardVerifier, JwksCache
from a2a_x402.extension import (
    Ap2Receipts,
    PaymentCompletedData,
    PaymentData,
    PaymentErrorCode,
    PaymentRequiredData,
)
from a2a_x402.facilitator.wire import PaymentRequired, PaymentRequirements

from ._allowance_leases import NO_LEASE, AllowanceLease
from ._ap2_round import Ap2Round, Ap2Rounds
from ._ap2_sdk import OpenMandates
from ._card import Binding, ResolvedCard, resolve_card
from ._chain import ChainAccess, RpcUrls
from ._connecting import connecting
from ._errors import (
    ChainError,
    InsufficientFundsError,
    MerchantError,
    MerchantUnreachableError,
    PaymentAttemptsExhaustedError,
    PaymentRefusedError,
)
from ._merchant_calls import MerchantCalls, client_failure
from ._messages import submitted_payload, user_message
from ._paying import sign_chosen
from ._policy import PaymentPolicy
from ._settings import FreshTermsHook, PayerSettings
from ._stages import (
    PaidResult,
    PaymentStage,
    SignedPayment,
    StageKind,
    TaskView,
    failure_of,
)

__all__ = ["Payer"]

logger = logging.getLogger(__name__)

_ENDED = frozenset(
    {TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_CANCELED, TaskState.TASK_STATE_REJECTED}
)
_RUNNING = frozenset({TaskState.TASK_STATE_WORKING, TaskState.TASK_STATE_SUBMITTED})
# The tenant's checkout keys are a small JWK Set: no reason to wait for them as long as for a settlement.
_JWKS_TIMEOUT_S = 10.0


@dataclass(slots=True)
class _RunState:
    """What one payment run has done: authorizations signed, the last one's terms, the status it answered."""

    payments: int = 0
    paid: PaymentRequirements | None = None
    answered: TaskStatus | None = None
    # The Permit2 allowance the last payment counts on, held until its outcome is known.
    lease: AllowanceLease = NO_LEASE
    # The AP2 mandates the last payment was presented with, their use reserved until its outcome is known.
    ap2: Ap2Round | None = None


class Payer:
    """Pays one merchant (card, binding, tenant) with one key.

    Build it with ``connect`` (or from a ``ResolvedCard``); close it with ``aclose`` or ``async with``.

    Raises:
        CardError: the card has no A2A 1.x interface for ``binding`` and ``tenant``.
        ValueError: ``private_key`` is not a secp256k1 private key.
    """

    def __init__(
        self,
        card: ResolvedCard,
        private_key: str,
        *,
        http: httpx.AsyncClient,
        binding: Binding = Binding.JSONRPC,
        tenant: str = "",
        policy: PaymentPolicy | None = None,
        settings: PayerSettings | None = None,
        on_fresh_terms: FreshTermsHook | None = None,
        rpc_urls: RpcUrls | None = None,
        mandates: OpenMandates | None = None,
        ap2_jwks: JwksCache | None = None,
        owns_http: bool = False,
    ) -> None:
        interface = card.interface(binding, tenant)
        try:
            self._address: str = Account.from_key(private_key).address
        except ValueError:
            # `from None`: eth-account's message may quote the key.
            raise ValueError("the payer key is not a valid secp256k1 private key") from None
        self._key = private_key
        self.card = card
        self.tenant = tenant
        self.policy = policy or PaymentPolicy()
        self.settings = settings or PayerSettings()
        self._on_fresh_terms = on_fresh_terms
        self._http = http
        self._owns_http = owns_http
        self._chains = ChainAccess(http, rpc_urls, timeout_s=self.settings.request_timeout_s)
        jwks = ap2_jwks or JwksCache(http, timeout_s=min(self.settings.request_timeout_s, _JWKS_TIMEOUT_S))
        self._ap2 = Ap2Rounds(card, tenant, mandates, jwks)
        self._calls = MerchantCalls(
            card.narrowed_to(interface),
            http,
            binding,
            protocol_version=interface.protocol_version,
            settings=self.settings,
        )

    @classmethod
    @connecting
    async def connect(
        cls,
        card_url: str,
        private_key: str,
        *,
        binding: Binding = Binding.JSONRPC,
        tenant: str = "",
        policy: PaymentPolicy | None = None,
        settings: PayerSettings | None = None,
        card_verifier: CardVerifier | None = None,
        jwks: JwksCache | None = None,
        on_fresh_terms: FreshTermsHook | None = None,
        http: httpx.AsyncClient | None = None,
        rpc_urls: RpcUrls | None = None,
        mandates: OpenMandates | None = None,
        ap2_jwks: JwksCache | None = None,
    ) -> Payer:
        """Resolve the card at ``card_url`` and return a payer for it.

        ``async with Payer.connect(...) as payer:`` closes the payer when the block ends; ``await
        Payer.connect(...)`` returns it, for the caller to close (``aclose``).

        Args:
            card_url: the card's URL, or the agent's origin.
            private_key: the paying account's key (``0x`` hex).
            binding: JSON-RPC or HTTP+JSON.
            tenant: the merchant tenant to pay (``""``: the default tenant).
            policy: what the payer agrees to pay; default: whatever the card pins.
            settings: timeouts and bounds.
            card_verifier: checks the card's signatures; under ``require`` an untrusted card is refused.
                Default: the ``warn`` policy with keys from the card's ``jku`` (HTTPS, the card's origin),
                which logs an unsigned or failing card and continues; ``SignaturePolicy.OFF`` checks nothing.
            jwks: the default verifier's key cache; share one across payers so that a merchant's JWK Set is
                fetched once per its TTL (default: a cache of this connection's own).
            on_fresh_terms: awaited before signing again for fresh terms.
            http: the HTTP client to use (not closed by the payer); default: one of its own.
            rpc_urls: JSON-RPC nodes, by CAIP-2 network, or one URL for whichever network its chain is:
                the payer reads its Permit2 allowance there before paying by Permit2 (only then needed).
            mandates: the user's open AP2 mandates and the agent key: a tenant the card declares in
                ``params.ap2`` is then paid with closed mandates (§20.4) whenever its terms carry an
                ``ap2-checkout``; without them such a tenant is paid standalone, unless it requires mandates.
            ap2_jwks: the cache the tenant's checkout keys (``jwksUrl``) are fetched through; default: one
                of this payer's own, https only.

        Raises:
            ValueError: both ``card_verifier`` and ``jwks`` are given.
            CardError: the card cannot be fetched or used.
            UntrustedCardError: ``card_verifier`` requires a valid signature and the card has none.
        """
        settings = settings or PayerSettings()
        own = http is None
        client = http if http is not None else httpx.AsyncClient(timeout=settings.request_timeout_s)
        try:
            card = await resolve_card(
                client, card_url, verifier=card_verifier, jwks=jwks, timeout_s=settings.request_timeout_s
            )
            return cls(
                card,
                private_key,
                http=client,
                binding=binding,
                tenant=tenant,
                policy=policy,
                settings=settings,
                on_fresh_terms=on_fresh_terms,
                rpc_urls=rpc_urls,
                mandates=mandates,
                ap2_jwks=ap2_jwks,
                owns_http=own,
            )
        except BaseException:
            if own:
                await client.aclose()
            raise

    @property
    def address(self) -> str:
        """The paying address."""
        return self._address

    async def __aenter__(self) -> Payer:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Release the SDK clients and, if the payer made it, the HTTP client."""
        await self._calls.close()
        if self._owns_http:
            await self._http.aclose()

    async def pay(
        self, request: str | Message, *, on_stage: Callable[[PaymentStage], None] | None = None
    ) -> PaidResult:
        """Send ``request`` and pay for it; return when the task completed.

        Args:
            request: the text to send, or a whole user message.
            on_stage: called with each stage as it happens (progress reporting).

        Returns:
            The completed task, its artifacts and receipts.

        Raises:
            PaymentRefusedError: the policy refused the terms, or Permit2 may not move the token
                (``Permit2NotApprovedError``): nothing signed; the task is declined.
            ChainError: a payment by Permit2 whose allowance could not be read (nothing signed; declined).
            PaymentFailedError: the task failed, was canceled or rejected.
            InsufficientFundsError: the payer's balance is below the price (and no hook may top it up).
            PaymentAttemptsExhaustedError: fresh terms came more than ``max_payments`` times.
            PaymentPendingError: the settlement did not resolve within ``pending_timeout_s``.
            MerchantUnreachableError: transport errors outlasted the retries.
            MerchantError: the merchant refused a request or broke the protocol.
        """
        # Closed on the way out, so that the run gives back what it holds (its allowance lease) at once.
        async with aclosing(self._run(request, streaming=False)) as stages:
            async for stage in stages:
                if on_stage is not None:
                    on_stage(stage)
                if stage.result is not None:
                    return stage.result
        raise RuntimeError("a payment run ends with a result or an error")

    async def pay_streaming(self, request: str | Message) -> AsyncIterator[PaymentStage]:
        """Like ``pay``, but over SendStreamingMessage, yielding each stage as it arrives.

        The last stage is ``COMPLETED`` with the result; failures raise as in ``pay``. A merchant whose card
        does not declare streaming is paid without it (the stages then come from answers and polling).
        """
        async with aclosing(self._run(request, streaming=self._calls.streams)) as stages:
            async for stage in stages:
                yield stage

    # -- the run ---------------------------------------------------------------------------------------

    async def _run(self, request: str | Message, *, streaming: bool) -> AsyncGenerator[PaymentStage, None]:
        run = _RunState()
        try:
            async with aclosing(self._run_task(request, run, streaming=streaming)) as stages:
                async for stage in stages:
                    yield stage
        finally:
            run.lease.release()

    async def _run_task(
        self, request: str | Message, run: _RunState, *, streaming: bool
    ) -> AsyncGenerator[PaymentStage, None]:
        view = TaskView()
        try:
            first = SendMessageRequest(message=user_message(request))
            async for stage in self._calls.send(first, view, streaming):
                yield stage
        except A2AClientError as exc:
            raise MerchantUnreachableError(f"sending the request failed: {client_failure(exc)}") from exc
        except A2AError as exc:
            raise MerchantError(f"the merchant refused the request: {exc}") from exc
        while True:
            task, payment = view.task, view.payment
            state = task.status.state
            if state == TaskState.TASK_STATE_COMPLETED:
                run.lease.release()  # settled: the next payment reads the allowance (and nonce) it left
                yield await self._completed(view, payment, run)
                return
            if state in _ENDED:
                await self._end_ap2_round(run, task, settled=False)
                raise failure_of(task, payment, signed=run.payments > 0)
            if state in _RUNNING:
                async for stage in self._calls.wait(view, _RUNNING):
                    yield stage
                continue
            if state != TaskState.TASK_STATE_INPUT_REQUIRED or not isinstance(payment, PaymentRequiredData):
                raise MerchantError(
                    f"the task is {TaskState.Name(state)} without payment terms: the payer cannot go on",
                    task_id=task.id,
                    signed=run.payments > 0,
                )
            async for stage in self._pay_terms(view, payment, run, streaming):
                yield stage

    async def _pay_terms(
        self, view: TaskView, terms: PaymentRequiredData, run: _RunState, streaming: bool
    ) -> AsyncIterator[PaymentStage]:
        """Answer a ``payment-required`` status with a new authorization, if it is one not answered yet."""
        task = view.task
        if run.answered is not None and task.status == run.answered:
            raise MerchantUnreachableError(
                "the payment never reached the merchant: the task still shows the terms it answered",
                task_id=task.id,
                signed=True,
            )
        # Fresh terms: the payment before was not taken, and no longer counts on the open mandate's budget
        # (nor, below, on the allowance).
        await self._end_ap2_round(run, task, settled=False)
        if (
            terms.error is PaymentErrorCode.INSUFFICIENT_FUNDS
            and run.paid is not None
            and self._on_fresh_terms is None
        ):
            # Another signature cannot raise the balance; only a hook that tops the payer up can.
            raise InsufficientFundsError(run.paid, payer=self._address, task_id=task.id)
        if run.payments == self.settings.max_payments:
            reason = terms.error.value if terms.error is not None else "no reason given"
            raise PaymentAttemptsExhaustedError(
                f"the merchant asked for payment again ({reason}) after {run.payments} payments",
                task_id=task.id,
                error=terms.error,
            )
        if run.payments and self._on_fresh_terms is not None:
            await self._on_fresh_terms(terms)
        run.lease.release()
        payload, run.lease, run.ap2 = await self._sign(task, terms, signed=run.payments > 0)
        run.payments, run.paid, run.answered = run.payments + 1, payload.accepted, _copy_status(task.status)
        yield PaymentStage(
            StageKind.PAYMENT_SIGNED, task.id, task.status.state, payment=terms, payload=payload
        )
        fallback = self.policy.ap2_standalone_fallback
        async for stage in self._ap2.submit(
            self._calls, view, streaming, payload, run.ap2, fallback=fallback
        ):
            yield stage

    async def _sign(
        self, task: Task, terms: PaymentRequiredData, *, signed: bool
    ) -> tuple[SignedPayment, AllowanceLease, Ap2Round | None]:
        """Choose the terms to pay under the policy and sign them, with the closed AP2 mandates when the
        round is paid with them; decline the task if the policy or the open mandates refuse, the checkout
        is bad, or a Permit2 payment cannot be made."""
        if not isinstance(terms.required, PaymentRequired):  # extension v0.3 carries x402 v2 only
            raise MerchantError("the merchant's terms are not x402 v2", task_id=task.id)
        reservation = ap2_round = None
        lease = NO_LEASE
        try:
            # Off the event loop: a policy may count its upto cap per day in a file.
            requirements = await asyncio.to_thread(
                self.policy.choose, terms.required, self.card.terms, self.tenant
            )
            # Checked, and their use reserved, before anything is signed (§20.3, §20.4).
            ap2_round = await self._ap2.prepare(task, requirements, self._address)
            reservation = await asyncio.to_thread(self.policy.reserve, requirements, self.card.terms)
            asset = self.card.terms.asset(requirements.network, requirements.asset)
            payload, lease = await sign_chosen(self._key, requirements, chains=self._chains, card_asset=asset)
            if ap2_round is not None:
                await ap2_round.close(submitted_payload(payload))
        except BaseException as exc:
            lease.release()
            if ap2_round is not None:  # nothing was presented: the open mandate's budget gets it back
                await ap2_round.release()
            if reservation is not None:  # nothing was signed: the day's upto cap gets it back, off the loop
                await asyncio.to_thread(reservation.release)
            if isinstance(exc, PaymentRefusedError | ChainError):
                # The policy knows nothing of tasks; the caller needs to know which one was declined.
                exc.task_id, exc.signed = task.id, signed
                await self._calls.decline(task)
            raise
        logger.info(
            "signed payment task_id=%s scheme=%s amount=%s asset=%s pay_to=%s network=%s",
            task.id,
            requirements.scheme,
            requirements.amount,
            requirements.asset,
            requirements.pay_to,
            requirements.network,
        )
        return payload, lease, ap2_round

    async def _end_ap2_round(self, run: _RunState, task: Task, *, settled: bool) -> Ap2Receipts | None:
        """Resolve the use of the mandates the last payment was presented with, once its round ended."""
        ap2_round, run.ap2 = run.ap2, None
        if ap2_round is None:
            return None
        return await self._ap2.settle(ap2_round, task, settled=settled)

    async def _completed(self, view: TaskView, payment: PaymentData | None, run: _RunState) -> PaymentStage:
        completed = payment if isinstance(payment, PaymentCompletedData) else None
        mandates = run.ap2.mandates if run.ap2 is not None else None
        ap2_receipts = await self._end_ap2_round(run, view.task, settled=True)
        result = PaidResult(
            task=view.task,
            receipts=completed.receipts if completed is not None else (),
            paid=run.paid,
            payer=self._address,
            usage=completed.usage if completed is not None else None,
            ap2_mandates=mandates,
            ap2_receipts=ap2_receipts,
        )
        return PaymentStage(
            StageKind.COMPLETED,
            view.task.id,
            view.task.status.state,
            payment=payment,
            transaction=result.transaction,
            result=result,
        )


def _copy_status(status: TaskStatus) -> TaskStatus:
    copy = TaskStatus()
    copy.CopyFrom(status)
    return copy

"""One authorization, one delivery, across deployments that share a payTo (docs/concepts/exactly-once.md:
One authorization, one delivery).

Two reference merchants serve the same payee on one chain, each with a relayer key of its own. A payer
presents one signed authorization to a task at each (the second copy carries that task's terms and the
very same signature), in every order, and in some rounds also submits it itself with a raw
`transferWithAuthorization` from its own account: before presenting it, racing the presentations, or
while both merchants hold the verified payment and run the work (the front-run that counts, if any does).

With a database each (the default rule: a transaction a deployment did not send is never its settlement),
at most one delivery and one booking come of it: exactly one when a deployment's own transaction used the
authorization, none when the payer's did; a deployment that delivered nothing says so, books nothing, and
its reconciler reports the transfer instead of booking it. Sharing one database with
`X402_COUNT_FOREIGN_SETTLEMENTS` on, the claim is unique across them: one delivery and one booking,
the payer's own transaction during the work included. The control: a database each with the setting on
(the configuration the documentation forbids) delivers and books the payer's front-run twice.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, Protocol

import pytest

from a2a_x402.devchain import DevChain, encode_call
from a2a_x402.facilitator import AUTHORIZATION_USED_TOPIC, Facilitator
from a2a_x402.facilitator.wire import PaymentPayload
from a2a_x402.merchant.ledger import Ledger
from a2a_x402.merchant.payments import OfferStore
from a2a_x402.merchant.reconciler import ReconcileReport
from a2a_x402.merchant.webhooks import Outbox
from a2a_x402.merchant.wiring import build_reconciler
from a2a_x402.payer import sign_payment
from a2a_x402.storage import create_engine
from tests.fixtures.deadlines import wait_until
from tests.fixtures.merchant import (
    DEFAULT_PAY_TO,
    DEFAULT_PRICE,
    A2ACallError,
    MerchantStarter,
    MerchantWire,
    RunningMerchant,
    ledger_entries,
    offered_terms,
    own_relayer_key,
    payment_message,
)

from .executors import MidWorkExecutor
from .flows import JSON, address_of, extension, offer

ROUNDS = 3
"""Rounds of each order: a race may fall either way, so each is run more than once."""

ORDERS = ("a-then-b", "b-then-a", "together", "payer-first", "payer-racing", "payer-during-work")
"""How the payer presents the authorization: to A and then B, B and then A, both at once; or it submits
the authorization itself first and then presents it to both at once; or all three at once; or it presents
it to both at once and submits it while the merchants run the work (after they verified it)."""

_UNDECIDED = frozenset({"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"})
_BOTH_WORKING_S = 20.0
"""How long a merchant's work waits for the other's before the payer submits anyway (a merchant that
refused the payment never starts the work)."""


@dataclass(frozen=True)
class Round:
    """What one round left: the two tasks once decided, and the transaction that used the authorization."""

    answers: tuple[JSON, JSON]
    payer: str
    tx_hash: str
    sender: str


@dataclass
class DuringWork:
    """The work hook both merchants share: in a `payer-during-work` round, the payer submits its own
    authorization once `parties` merchants are running the work (each tries; one lands)."""

    chain: DevChain
    armed: tuple[str, PaymentPayload, threading.Barrier] | None = field(default=None)

    def arm(self, payer_key: str, payload: PaymentPayload, parties: int) -> None:
        """Submit `payload` as the payer during the next round's work."""
        self.armed = (payer_key, payload, threading.Barrier(parties))

    def disarm(self) -> None:
        """No front-run in the next round's work."""
        self.armed = None

    def __call__(self) -> None:
        if self.armed is None:
            return
        payer_key, payload, barrier = self.armed
        try:
            barrier.wait(_BOTH_WORKING_S)
        except threading.BrokenBarrierError:
            pass
        _submit_as_payer(self.chain, payer_key, payload)


@dataclass
class Pair:
    """Two merchants paid to `DEFAULT_PAY_TO`, with relayer keys of their own and a shared work hook."""

    a: RunningMerchant
    b: RunningMerchant
    during_work: DuringWork

    def relayers(self) -> dict[str, int]:
        """Each merchant's relayer address (lower case): 0 for A, 1 for B."""
        return {_relayer_of(self.a): 0, _relayer_of(self.b): 1}


class Deployments(Protocol):
    """The `deployments` fixture's signature."""

    def __call__(self, url_a: str, url_b: str, **settings: Any) -> Pair: ...


@pytest.fixture
def deployments(start_merchant: MerchantStarter, chain: DevChain) -> Deployments:
    """`deployments(url_a, url_b, **settings)`: a `Pair` on those databases (the same URL: one shared)."""

    def start(url_a: str, url_b: str, **settings: Any) -> Pair:
        hook = DuringWork(chain)
        a, b = (
            start_merchant(
                url,
                relayer_key=own_relayer_key(chain),
                grpc_port=None,
                delegate=MidWorkExecutor(hook),
                **settings,
            )
            for url in (url_a, url_b)
        )
        return Pair(a, b, hook)

    return start


def _presented_to(payload: PaymentPayload, task: JSON) -> PaymentPayload:
    """The same signed authorization, carrying `task`'s terms (what a payer presenting it twice sends)."""
    [terms] = offered_terms(task).accepts
    return payload.model_copy(update={"accepted": terms})


def _submit_as_payer(chain: DevChain, payer_key: str, payload: PaymentPayload) -> None:
    """The payer front-runs its own payment: a raw `transferWithAuthorization` from its own account."""
    auth = payload.payload.authorization
    data = encode_call(
        "transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,bytes)",
        [
            auth.from_address,
            auth.to,
            auth.value,
            auth.valid_after,
            auth.valid_before,
            bytes.fromhex(auth.nonce[2:]),
            bytes.fromhex(payload.payload.signature[2:]),
        ],
    )
    try:
        chain.rpc.transact(payer_key, to=chain.asset, data=data)
    except Exception:  # noqa: BLE001 - another transaction used it first: the payer's is refused
        return


async def _decided(wire: MerchantWire, task_id: str) -> JSON:
    """The task, once no settlement of it is under way (a racing settlement may still be finishing)."""
    found: list[JSON] = []

    async def decided() -> bool:
        found.append(await wire.get_task(task_id))
        return found[-1]["status"]["state"] not in _UNDECIDED

    await wait_until(decided, what=f"task {task_id} decided")
    return found[-1]


async def _play(order: str, chain: DevChain, pair: Pair, *, working_parties: int = 2) -> Round:
    """One round in `order`: a fresh payer, a task at each merchant, one authorization presented to both."""
    payer_key = chain.new_payer()
    chain.rpc.call("anvil_setBalance", [address_of(payer_key), hex(10**18)])  # gas for its own transfer
    async with pair.a.http() as http_a, pair.b.http() as http_b:
        wire_a, wire_b = MerchantWire(http_a, "jsonrpc"), MerchantWire(http_b, "jsonrpc")
        task_a, task_b = await offer(wire_a), await offer(wire_b)
        [terms] = offered_terms(task_a).accepts
        payload = sign_payment(payer_key, terms)
        if order == "payer-during-work":
            pair.during_work.arm(payer_key, payload, working_parties)
        else:
            pair.during_work.disarm()

        async def pay(wire: MerchantWire, task: JSON) -> JSON:
            """The task once its payment is decided; a payment refused before it reached the task (the
            merchant knows the authorization from another task) leaves the task as it was."""
            try:
                await wire.send(payment_message(task["id"], _presented_to(payload, task)))
            except A2ACallError as exc:
                assert "already presented for another task" in exc.message, exc
            return await _decided(wire, task["id"])

        def front_run() -> Awaitable[None]:
            return asyncio.to_thread(_submit_as_payer, chain, payer_key, payload)

        answers: list[JSON]
        if order == "a-then-b":
            answers = [await pay(wire_a, task_a), await pay(wire_b, task_b)]
        elif order == "b-then-a":
            answer_b = await pay(wire_b, task_b)
            answers = [await pay(wire_a, task_a), answer_b]
        elif order in ("together", "payer-during-work"):
            answers = list(await asyncio.gather(pay(wire_a, task_a), pay(wire_b, task_b)))
        elif order == "payer-first":
            await front_run()
            answers = list(await asyncio.gather(pay(wire_a, task_a), pay(wire_b, task_b)))
        else:
            answer_a, answer_b, _ = await asyncio.gather(
                pay(wire_a, task_a), pay(wire_b, task_b), front_run()
            )
            answers = [answer_a, answer_b]
    tx_hash, sender = _transaction_that_used(chain, payload)
    return Round((answers[0], answers[1]), address_of(payer_key).lower(), tx_hash, sender)


def _transaction_that_used(chain: DevChain, payload: PaymentPayload) -> tuple[str, str]:
    """The one transaction whose `AuthorizationUsed` log names the payload's authorization, and its sender."""
    auth = payload.payload.authorization
    payer_topic = "0x" + auth.from_address[2:].lower().rjust(64, "0")
    logs = chain.rpc.call(
        "eth_getLogs",
        [
            {
                "address": chain.asset,
                "fromBlock": "0x0",
                "toBlock": "latest",
                "topics": [AUTHORIZATION_USED_TOPIC, payer_topic, auth.nonce],
            }
        ],
    )
    [log] = logs
    sent = chain.rpc.call("eth_getTransactionByHash", [log["transactionHash"]])
    return str(log["transactionHash"]), str(sent["from"]).lower()


def _delivered(answer: JSON) -> bool:
    return answer["status"]["state"] == "TASK_STATE_COMPLETED" and "artifacts" in answer


def _assert_refused(answer: JSON) -> None:
    """Not delivered: refused by the facilitator (failed, naming the used nonce), or by the merchant before
    the task took it (it knows the authorization from another task), which leaves the task waiting."""
    assert "artifacts" not in answer
    if answer["status"]["state"] == "TASK_STATE_INPUT_REQUIRED":
        return
    assert answer["status"]["state"] == "TASK_STATE_FAILED", answer["status"]
    data = extension(answer)
    assert data["status"] == "payment-failed"
    assert data["error"] in ("DUPLICATE_NONCE", "SETTLEMENT_FAILED"), data


async def _bookings_of(tx_hash: str, pair: Pair) -> list[str]:
    """The tasks booked with `tx_hash`, in every distinct database of the pair."""
    urls = dict.fromkeys((pair.a.database_url, pair.b.database_url))
    return [e.task_id for url in urls for e in await ledger_entries(url) if e.tx_hash == tx_hash]


async def _reconcile(merchant: RunningMerchant) -> ReconcileReport:
    """One reconciliation pass of `merchant`'s records, whatever it leaves unresolved."""
    settings = merchant.settings
    engine = create_engine(settings.database_url)
    facilitator = Facilitator.from_settings(settings.facilitator_settings(), engine=engine)
    try:
        reconciler = build_reconciler(
            settings,
            engine=engine,
            facilitator=facilitator,
            offers=OfferStore(engine),
            ledger=Ledger(engine, Outbox(engine)),
        )
        try:
            return await reconciler.run_once()
        finally:
            await reconciler.aclose()
    finally:
        await facilitator.aclose()
        await engine.dispose()


def _relayer_of(merchant: RunningMerchant) -> str:
    key = merchant.settings.relayer_key
    assert key is not None
    return address_of(key.get_secret_value()).lower()


@pytest.mark.parametrize("order", ORDERS)
async def test_deployments_with_a_database_each_deliver_and_book_one_authorization_at_most_once(
    order: str, database_url: str, another_database_url: str, chain: DevChain, deployments: Deployments
) -> None:
    pair = deployments(database_url, another_database_url)
    relayers = pair.relayers()
    # For each deployment, the transfers it did not deliver for: its reconciler must report them.
    undelivered: tuple[list[str], list[str]] = ([], [])

    for _ in range(ROUNDS):
        payee_before = chain.balance_of(DEFAULT_PAY_TO)
        played = await _play(order, chain, pair)

        delivered = [i for i, answer in enumerate(played.answers) if _delivered(answer)]
        booked = await _bookings_of(played.tx_hash, pair)
        # One transfer, whoever sent it.
        assert chain.balance_of(DEFAULT_PAY_TO) == payee_before + DEFAULT_PRICE
        if played.sender in relayers:
            # A deployment's own transaction: that deployment, and only it, delivers and books.
            winner = relayers[played.sender]
            assert delivered == [winner], (order, played)
            assert booked == [played.answers[winner]["id"]]
            assert extension(played.answers[winner])["receipts"][-1]["transaction"] == played.tx_hash
        else:
            # The payer's own transaction: neither deployment sent it, so neither may count it.
            assert played.sender == played.payer, played
            assert (delivered, booked) == ([], []), (order, played)
        for i, answer in enumerate(played.answers):
            if i not in delivered:
                undelivered[i].append(played.tx_hash)
                _assert_refused(answer)
                assert answer["status"]["state"] == "TASK_STATE_FAILED"  # no other task here knows it

    for merchant, missing in zip((pair.a, pair.b), undelivered, strict=True):
        entries = len(await ledger_entries(merchant.database_url))
        report = await _reconcile(merchant)
        assert (report.booked_from_chain, report.booked_late) == (0, 0)
        assert len(await ledger_entries(merchant.database_url)) == entries
        reported = [tx for tx in missing if any(tx in text for text in report.unresolved)]
        assert reported == missing, report.unresolved


@pytest.mark.parametrize("order", ORDERS)
async def test_deployments_sharing_a_database_deliver_and_book_one_authorization_once(
    order: str, database_url: str, chain: DevChain, deployments: Deployments
) -> None:
    """The configuration foreign settlements may count in: one claim store for both deployments."""
    pair = deployments(database_url, database_url, count_foreign_settlements=True)
    relayers = pair.relayers()

    for _ in range(ROUNDS):
        payee_before = chain.balance_of(DEFAULT_PAY_TO)
        # One task may be refused before its work starts (the shared offers know the authorization).
        played = await _play(order, chain, pair, working_parties=1)

        delivered = [answer["id"] for answer in played.answers if _delivered(answer)]
        assert chain.balance_of(DEFAULT_PAY_TO) == payee_before + DEFAULT_PRICE
        assert await _bookings_of(played.tx_hash, pair) == delivered
        for answer in played.answers:
            if answer["id"] not in delivered:
                _assert_refused(answer)
        if played.sender in relayers or order == "payer-during-work":
            assert len(delivered) == 1, (order, played)
        else:
            # The payer's transaction may be mined before either merchant verified the payment: then it
            # is a payment made before it was presented, and refused by both (spec §15.6).
            assert len(delivered) <= 1, (order, played)
    report = await _reconcile(pair.a)
    assert (report.booked_from_chain, report.booked_late) == (0, 0)


async def test_control_deployments_with_a_database_each_counting_foreign_settlements_deliver_twice(
    database_url: str, another_database_url: str, chain: DevChain, deployments: Deployments
) -> None:
    """What `X402_COUNT_FOREIGN_SETTLEMENTS` must not be turned on for: the payer's own transaction, sent
    while both merchants run the work, is counted by each as its settlement."""
    pair = deployments(database_url, another_database_url, count_foreign_settlements=True)

    played = await _play("payer-during-work", chain, pair)

    assert played.sender == played.payer
    assert [_delivered(answer) for answer in played.answers] == [True, True]
    assert sorted(await _bookings_of(played.tx_hash, pair)) == sorted(a["id"] for a in played.answers)

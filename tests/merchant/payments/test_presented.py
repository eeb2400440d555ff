"""An authorization presented for a task belongs to that task (issue 24 point 4, specification §11).

Once a (payer, nonce) was presented for a task of this deployment, whatever became of that payment
(refused for lack of funds, expired, rejected, failed), it is refused at any other task or tenant with
`InvalidParamsError` naming `DUPLICATE_NONCE`, without the payload, and the refusal changes nothing:
the task, its offer, the chain, the ledger and the webhook outbox stay as they were. Two tasks racing
for one authorization: one gets it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from eth_account import Account
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402 import migrations
from a2a_x402.devchain import DevChain
from a2a_x402.facilitator.wire import PaymentPayload
from a2a_x402.merchant.payments import OfferStore, Presentations
from a2a_x402.merchant.payments._handler import USED_ELSEWHERE
from a2a_x402.merchant.payments._presented import presentations_table
from a2a_x402.payer import sign_payment
from a2a_x402.storage import create_engine, normalize_url, upgrade_schema
from tests.fixtures.merchant import (
    DEFAULT_PAY_TO,
    DEFAULT_PRICE,
    A2ACallError,
    MerchantStarter,
    MerchantWire,
    RunningMerchant,
    ledger_entries,
    payment_message,
    rejection_message,
    write_tenants_file,
)

from .flows import JSON, ChainSnapshot, offer, snapshot
from .test_handler import refused, terms_of

_RACE_ROUNDS = 5
"""Rounds of two tasks racing for one authorization (each round settles one payment on chain)."""


@dataclass(frozen=True)
class Records:
    """What a refusal must leave as it was: the chain, the ledger, the outbox and the task's offer."""

    chain: ChainSnapshot
    ledger: int
    outbox: int
    offer: Any


async def records(merchant: RunningMerchant, chain: DevChain, payer: str, task_id: str) -> Records:
    """The records now, the offer of `task_id` included."""
    engine = create_engine(merchant.database_url)
    try:
        async with engine.connect() as connection:
            outbox = (await connection.execute(sa.text("SELECT count(*) FROM webhook_events"))).scalar_one()
        offer_row = await OfferStore(engine).get(task_id)
    finally:
        await engine.dispose()
    return Records(
        snapshot(chain, payer),
        len(await ledger_entries(merchant.database_url)),
        int(outbox),
        offer_row,
    )


async def presented_for(merchant: RunningMerchant, payment: PaymentPayload) -> tuple[str, str] | None:
    """The (task, tenant) the payment's authorization was presented for, as stored."""
    engine = create_engine(merchant.database_url)
    try:
        authorization = payment.payload.authorization
        return await Presentations(engine).owner(authorization.from_address, authorization.nonce)
    finally:
        await engine.dispose()


def stolen_for(payment: PaymentPayload, task: JSON) -> PaymentPayload:
    """The payment as a stranger presents it to its own task: `accepted` (unsigned) swapped for its terms."""
    return payment.model_copy(update={"accepted": terms_of(task)})


async def test_an_authorization_refused_for_lack_of_funds_pays_no_other_task(
    merchant: RunningMerchant, binding: str, chain: DevChain, new_payer: Callable[..., str]
) -> None:
    """The attack of issue 24: a buyer pays unfunded, funds and pays again; a stranger takes the first
    authorization (still valid for minutes) to a task of its own with that task's terms."""
    buyer_key = new_payer(DEFAULT_PRICE - 1)
    buyer = Account.from_key(buyer_key).address
    async with merchant.http() as http:
        wire = MerchantWire(http, binding)
        task = await offer(wire)
        first = sign_payment(buyer_key, terms_of(task))
        again = (await wire.send(payment_message(task["id"], first)))["task"]
        assert again["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", again["status"]
        chain.mint(buyer, DEFAULT_PRICE)
        done = (await wire.send(payment_message(task["id"], sign_payment(buyer_key, terms_of(again)))))[
            "task"
        ]
        assert done["status"]["state"] == "TASK_STATE_COMPLETED", done["status"]
        theirs = await offer(wire)
        before = await records(merchant, chain, buyer, theirs["id"])

        await refused(
            wire.send(payment_message(theirs["id"], stolen_for(first, theirs))),
            wire,
            "INVALID_PARAMS",
            USED_ELSEWHERE,
        )

        assert (await wire.get_task(theirs["id"]))["status"] == theirs["status"]
    assert await records(merchant, chain, buyer, theirs["id"]) == before
    assert before.ledger == 1
    assert await presented_for(merchant, first) == (task["id"], "")


@pytest.mark.parametrize("fate", ["rejected", "failed"])
async def test_an_authorization_presented_for_a_task_that_ended_pays_no_other_task(
    sqlite_merchant: RunningMerchant, chain: DevChain, new_payer: Callable[..., str], fate: str
) -> None:
    """Presented for a task whose payment failed for good (a signature by another key: the task ends
    FAILED), or refused for lack of funds and then rejected by the buyer: still refused elsewhere, once
    the buyer is funded."""
    buyer_key = new_payer(DEFAULT_PRICE - 1)
    buyer = Account.from_key(buyer_key).address
    async with sqlite_merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task = await offer(wire)
        if fate == "failed":
            forged = sign_payment(new_payer(), terms_of(task))
            authorization = forged.payload.authorization.model_copy(update={"from_address": buyer})
            payment = forged.model_copy(
                update={"payload": forged.payload.model_copy(update={"authorization": authorization})}
            )
            ended = (await wire.send(payment_message(task["id"], payment)))["task"]
            assert ended["status"]["state"] == "TASK_STATE_FAILED", ended["status"]
        else:
            payment = sign_payment(buyer_key, terms_of(task))
            again = (await wire.send(payment_message(task["id"], payment)))["task"]
            assert again["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", again["status"]
            ended = (await wire.send(rejection_message(task["id"])))["task"]
            assert ended["status"]["state"] == "TASK_STATE_CANCELED", ended["status"]
        chain.mint(buyer, DEFAULT_PRICE)
        theirs = await offer(wire)
        before = await records(sqlite_merchant, chain, buyer, theirs["id"])

        await refused(
            wire.send(payment_message(theirs["id"], stolen_for(payment, theirs))),
            wire,
            "INVALID_PARAMS",
            USED_ELSEWHERE,
        )

        assert (await wire.get_task(theirs["id"]))["status"] == theirs["status"]
    assert await records(sqlite_merchant, chain, buyer, theirs["id"]) == before


async def test_an_authorization_presented_for_one_tenant_pays_no_other_tenant(
    start_merchant: MerchantStarter,
    sqlite_url: str,
    chain: DevChain,
    new_payer: Callable[..., str],
    tmp_path: Path,
) -> None:
    """Two tenants paid to the same payTo at the same price: their terms differ only in the offer id."""
    tenants = {"acme": (DEFAULT_PAY_TO, DEFAULT_PRICE), "globex": (DEFAULT_PAY_TO, DEFAULT_PRICE)}
    merchant = start_merchant(sqlite_url, tenants_file=write_tenants_file(tmp_path / "t.toml", tenants))
    buyer_key = new_payer(DEFAULT_PRICE - 1)
    buyer = Account.from_key(buyer_key).address
    async with merchant.http() as http:
        acme, globex = MerchantWire(http, "jsonrpc", "acme"), MerchantWire(http, "jsonrpc", "globex")
        task = await offer(acme)
        first = sign_payment(buyer_key, terms_of(task))
        again = (await acme.send(payment_message(task["id"], first)))["task"]
        assert again["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", again["status"]
        chain.mint(buyer, DEFAULT_PRICE)
        theirs = await offer(globex)
        before = await records(merchant, chain, buyer, theirs["id"])

        await refused(
            globex.send(payment_message(theirs["id"], stolen_for(first, theirs))),
            globex,
            "INVALID_PARAMS",
            USED_ELSEWHERE,
        )

        assert (await globex.get_task(theirs["id"]))["status"] == theirs["status"]
    assert await records(merchant, chain, buyer, theirs["id"]) == before
    assert await presented_for(merchant, first) == (task["id"], "acme")


async def test_two_tasks_racing_for_one_authorization_one_gets_it(
    merchant: RunningMerchant, chain: DevChain, new_payer: Callable[..., str]
) -> None:
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        for round_ in range(_RACE_ROUNDS):
            buyer_key = new_payer()
            buyer = Account.from_key(buyer_key).address
            tasks = [await offer(wire), await offer(wire)]
            payment = sign_payment(buyer_key, terms_of(tasks[0]))
            before = snapshot(chain, buyer)
            booked = len(await ledger_entries(merchant.database_url))

            answers = await asyncio.gather(
                *(wire.send(payment_message(t["id"], stolen_for(payment, t))) for t in tasks),
                return_exceptions=True,
            )

            won = [i for i, answer in enumerate(answers) if not isinstance(answer, BaseException)]
            assert len(won) == 1, (round_, answers)
            [lost] = [answer for answer in answers if isinstance(answer, BaseException)]
            assert isinstance(lost, A2ACallError) and lost.message == USED_ELSEWHERE, (round_, lost)
            winner, loser = tasks[won[0]], tasks[1 - won[0]]
            assert answers[won[0]]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"  # type: ignore[index]
            assert (await wire.get_task(loser["id"]))["status"] == loser["status"]
            assert snapshot(chain, buyer).payer == before.payer - DEFAULT_PRICE
            assert len(await ledger_entries(merchant.database_url)) == booked + 1
            assert await presented_for(merchant, payment) == (winner["id"], "")


async def test_m0007_binds_the_authorizations_taken_before_it(engine: AsyncEngine, database_url: str) -> None:
    store = OfferStore(engine)
    for task_id in ("task-1", "task-2"):
        await store.offer(
            task_id=task_id,
            tenant="acme",
            context_id="ctx",
            skill="text-stats",
            dialect="v0.3",
            required={},
            request={},
        )
    taken_at = await store.submit(
        "task-1", round_=1, payer="0xPayer", nonce="0x01", payload={}, payload_hash="h", accepted={}
    )
    config = Config()
    config.set_main_option("script_location", str(Path(migrations.__file__).parent))
    config.set_main_option("sqlalchemy.url", normalize_url(database_url).replace("%", "%%"))
    await engine.dispose()

    await asyncio.to_thread(command.downgrade, config, "m0006")
    await upgrade_schema(database_url)

    presentations = Presentations(engine)
    assert await presentations.owner("0xPayer", "0x01") == ("task-1", "acme")
    assert await presentations.present(payer="0xPayer", nonce="0x01", task_id="task-2", tenant="acme") == (
        "task-1",
        "acme",
    )
    async with engine.connect() as connection:
        rows = (await connection.execute(sa.select(presentations_table))).all()
    assert [(row.task_id, row.presented_at) for row in rows] == [("task-1", taken_at)]


async def test_of_many_tasks_presenting_one_authorization_at_once_one_gets_it(engine: AsyncEngine) -> None:
    presentations = Presentations(engine)
    for round_ in range(_RACE_ROUNDS):
        nonce = f"0x{round_:02x}"

        owners = await asyncio.gather(
            *(
                presentations.present(payer="0xPayer", nonce=nonce, task_id=f"task-{i}", tenant=f"t{i % 2}")
                for i in range(4)
            )
        )

        assert len(set(owners)) == 1, (round_, owners)
        assert await presentations.owner("0xPayer", nonce) == owners[0]

"""Issue 25, against real processes: a remote facilitator (`x402-facilitator serve`, API keys required)
and the merchant presenting its own key.

- The attack: with a pending task's id, a stranger's `POST /settle` under the task's guessable idempotency
  key and a 1-unit payment to itself is refused (no key: 401, nothing claimed); with another caller's
  valid key it settles in that caller's namespace only; the buyer then pays, the task completes, and the
  reconciler finalizes the booking.
- Whatever the facilitator answers a settle with (409, garbage, an unknown reason, a 500: scripted by a
  real HTTP server in front of the real facilitator), the paid turn ends definite (failed, saying why,
  nothing charged) and the merchant goes on settling the next task.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator import ApiKeyStore
from a2a_x402.facilitator.wire import PaymentPayload, PaymentRequirements
from a2a_x402.merchant.ledger import Ledger
from a2a_x402.merchant.webhooks import Outbox
from a2a_x402.payer import sign_payment
from a2a_x402.storage import create_engine
from tests.fixtures.deadlines import HANG_S, wait_until
from tests.fixtures.facilitator import make_requirements
from tests.fixtures.facilitator_processes import facilitator_processes
from tests.fixtures.merchant import (
    MerchantStarter,
    MerchantWire,
    ledger_entries,
    offered_terms,
    payment_message,
)
from tests.fixtures.metrics import sample

from .flows import JSON, address_of, assert_nothing_happened, extension, offer, snapshot, texts

ATTACKER = "0x000000000000000000000000000000000000dEaD"


async def _key(database_url: str, name: str) -> str:
    engine = create_engine(database_url)
    try:
        _record, key = await ApiKeyStore(engine).create(name)
    finally:
        await engine.dispose()
    return key


def _settle_body(payload: PaymentPayload, requirements: PaymentRequirements) -> bytes:
    return orjson.dumps(
        {
            "x402Version": 2,
            "paymentPayload": payload.to_json_dict(),
            "paymentRequirements": requirements.to_json_dict(),
        }
    )


@asynccontextmanager
async def _private_facilitator(chain: DevChain, database_url: str, tmp_path: Path) -> AsyncIterator[str]:
    async with facilitator_processes(chain, tmp_path) as processes:
        yield (await processes.serve(database_url, X402_FACILITATOR_PUBLIC="false")).url


async def _unfinalized(database_url: str) -> int:
    engine = create_engine(database_url)
    try:
        return len(await Ledger(engine, Outbox(engine)).unfinalized_settlements())
    finally:
        await engine.dispose()


async def test_a_stranger_cannot_poison_a_pending_tasks_settlement(
    start_merchant: MerchantStarter, sqlite_url: str, chain: DevChain, tmp_path: Path
) -> None:
    merchant_key, other_caller = (
        await _key(sqlite_url, "merchant"),
        await _key(sqlite_url, "other caller"),
    )
    async with _private_facilitator(chain, sqlite_url, tmp_path) as remote:
        merchant = start_merchant(
            sqlite_url,
            facilitator_url=remote,
            facilitator_api_key=merchant_key,
            reconcile_interval_s=0.5,
        )
        async with merchant.http() as http, httpx.AsyncClient(base_url=remote, timeout=HANG_S) as stranger:
            wire = MerchantWire(http, "jsonrpc")
            task = await offer(wire)
            theirs = make_requirements(chain, amount=1, pay_to=ATTACKER)
            poison = _settle_body(sign_payment(chain.new_payer(), theirs), theirs)
            guessed = {"content-type": "application/json", "idempotency-key": f"a2a-task:{task['id']}:1"}
            anonymous = await stranger.post("/settle", content=poison, headers=guessed)
            keyed = await stranger.post(
                "/settle", content=poison, headers={**guessed, "authorization": f"Bearer {other_caller}"}
            )
            payer_key = chain.new_payer()
            [terms] = offered_terms(task).accepts
            done = (await wire.send(payment_message(task["id"], sign_payment(payer_key, terms))))["task"]

            async def finalized() -> bool:
                return await _unfinalized(sqlite_url) == 0

            await wait_until(finalized, what="the reconciler finalizes the booking")

    assert anonymous.status_code == 401 and anonymous.json()["success"] is False
    assert keyed.status_code == 200 and keyed.json()["success"] is True  # in its own namespace only
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
    assert extension(done)["status"] == "payment-completed"
    assert [entry.task_id for entry in await ledger_entries(sqlite_url)] == [task["id"]]


def _scripted(real: str, answers: dict[str, Response | None]) -> Starlette:
    """A facilitator that forwards everything to `real` but answers `/settle` with `answers["settle"]` and
    `/settle/status` with `answers["settle status"]` (each forwarded too while it is None or absent)."""

    async def forward(request: Request) -> Response:
        scripted = answers.get(request.url.path.strip("/").replace("/", " "))
        if scripted is not None:
            return scripted
        headers = {
            name: value
            for name, value in request.headers.items()
            if name in ("authorization", "content-type", "idempotency-key")
        }
        async with httpx.AsyncClient(base_url=real, timeout=HANG_S) as http:
            answered = await http.request(
                request.method, request.url.path, content=await request.body(), headers=headers
            )
        return Response(answered.content, answered.status_code, media_type="application/json")

    paths = ("/verify", "/settle", "/settle/status", "/supported", "/healthz")
    return Starlette(routes=[Route(path, forward, methods=["GET", "POST"]) for path in paths])


_UNKNOWN = {
    "success": False,
    "errorReason": "some_reason_from_the_future",
    "errorMessage": "a reason this merchant never heard of",
    "transaction": "",
    "network": "eip155:84532",
}
# Whatever the answer, the payer reads the outcome in the merchant's own words (the facilitator's text stays
# in the operator's log).
_ANSWERS: dict[str, Callable[[], Response]] = {
    "conflict": lambda: Response(orjson.dumps({"success": False, "errorReason": "invalid_payload"}), 409),
    "garbage": lambda: Response(b"<html>oops</html>", 200),
    "unknown reason": lambda: Response(orjson.dumps(_UNKNOWN), 200, media_type="application/json"),
    "server error": lambda: Response(b"Internal Server Error", 500),
}


@pytest.mark.parametrize("answer", list(_ANSWERS))
async def test_whatever_the_facilitator_answers_the_paid_turn_ends_definite(
    answer: str,
    start_merchant: MerchantStarter,
    sqlite_url: str,
    chain: DevChain,
    tmp_path: Path,
    asgi_server: Callable[..., str],
) -> None:
    make_answer = _ANSWERS[answer]
    key = await _key(sqlite_url, "merchant")
    async with _private_facilitator(chain, sqlite_url, tmp_path) as remote:
        answers: dict[str, Response | None] = {"settle": make_answer()}
        front = asgi_server(_scripted(remote, answers))
        merchant = start_merchant(sqlite_url, facilitator_url=front, facilitator_api_key=key)
        async with merchant.http() as http:
            wire = MerchantWire(http, "jsonrpc")
            task = await offer(wire)
            payer_key = chain.new_payer()
            before = snapshot(chain, address_of(payer_key))
            [terms] = offered_terms(task).accepts
            answered: JSON = (await wire.send(payment_message(task["id"], sign_payment(payer_key, terms))))[
                "task"
            ]
            stored = await wire.get_task(task["id"])
            await assert_nothing_happened(chain, before, address_of(payer_key), sqlite_url)
            # The next buyer is served as ever once the facilitator answers again.
            answers["settle"] = None
            following = await offer(wire)
            [next_terms] = offered_terms(following).accepts
            paid: Any = (
                await wire.send(payment_message(following["id"], sign_payment(chain.new_payer(), next_terms)))
            )["task"]

    for seen in (answered, stored):
        assert seen["status"]["state"] == "TASK_STATE_FAILED", seen
        assert extension(seen)["status"] == "payment-failed"
        assert "nothing was charged" in texts(seen)[0]
        assert str(_UNKNOWN["errorMessage"]) not in texts(seen)[0]
    assert paid["status"]["state"] == "TASK_STATE_COMPLETED", paid
    assert [entry.task_id for entry in await ledger_entries(sqlite_url)] == [following["id"]]


async def test_a_conflict_met_by_recovery_ends_the_task_too(
    start_merchant: MerchantStarter,
    sqlite_url: str,
    chain: DevChain,
    tmp_path: Path,
    asgi_server: Callable[..., str],
) -> None:
    """The facilitator answers nothing usable while the paid turn settles (the task is left working, its
    outcome unknown); then it refuses the idempotency key: the reconciler's recovery ends the task."""
    key = await _key(sqlite_url, "merchant")
    unavailable = Response(b"Service Unavailable", 503)
    async with _private_facilitator(chain, sqlite_url, tmp_path) as remote:
        answers: dict[str, Response | None] = {"settle": unavailable, "settle status": unavailable}
        front = asgi_server(_scripted(remote, answers))
        merchant = start_merchant(
            sqlite_url,
            facilitator_url=front,
            facilitator_api_key=key,
            reconcile_interval_s=1.0,
            reconcile_stale_after_s=2.0,
        )
        async with merchant.http() as http:
            wire = MerchantWire(http, "jsonrpc")
            task = await offer(wire)
            payer_key = chain.new_payer()
            before = snapshot(chain, address_of(payer_key))
            [terms] = offered_terms(task).accepts
            await wire.send(payment_message(task["id"], sign_payment(payer_key, terms)))

            async def reported_unknown() -> bool:
                return "outcome is not known yet" in " ".join(texts(await wire.get_task(task["id"])))

            await wait_until(reported_unknown, what="the task says the outcome is not known", timeout_s=120)
            answers["settle"] = make_conflict()
            answers["settle status"] = None

            async def ended() -> bool:
                return bool((await wire.get_task(task["id"]))["status"]["state"] == "TASK_STATE_FAILED")

            await wait_until(ended, what="the recovery ends the task")
            done = await wire.get_task(task["id"])
            await assert_nothing_happened(chain, before, address_of(payer_key), sqlite_url)

    assert extension(done)["status"] == "payment-failed"
    assert "nothing was charged" in texts(done)[0]


def make_conflict() -> Response:
    return _ANSWERS["conflict"]()


async def test_a_facilitator_answering_garbage_for_good_ends_the_task_once_the_authorization_expired(
    start_merchant: MerchantStarter,
    sqlite_url: str,
    chain: DevChain,
    tmp_path: Path,
    asgi_server: Callable[..., str],
) -> None:
    """The facilitator answers garbage to /settle and /settle/status and never recovers: while the
    authorization is valid the recovery waits (the task says the outcome is not known); once the chain
    shows it unused past its validBefore, nothing can ever be charged, and the recovery fails the task."""
    key = await _key(sqlite_url, "merchant")
    garbage = Response(b"<html>oops</html>", 200)
    async with _private_facilitator(chain, sqlite_url, tmp_path) as remote:
        front = asgi_server(_scripted(remote, {"settle": garbage, "settle status": garbage}))
        merchant = start_merchant(
            sqlite_url,
            facilitator_url=front,
            facilitator_api_key=key,
            reconcile_interval_s=1.0,
            reconcile_stale_after_s=2.0,
        )
        async with merchant.http() as http:
            wire = MerchantWire(http, "jsonrpc")
            task = await offer(wire)
            payer_key = chain.new_payer()
            before = snapshot(chain, address_of(payer_key))
            [terms] = offered_terms(task).accepts
            await wire.send(payment_message(task["id"], sign_payment(payer_key, terms)))

            async def recovery_postponed() -> bool:
                text = await metrics_text(merchant.base_url)
                return (sample(text, "x402_merchant_reconciler_failures_total", stage="turns") or 0) >= 2

            await wait_until(recovery_postponed, what="recovery tried and postponed the task", timeout_s=120)
            waiting = await wire.get_task(task["id"])
            # Past validBefore on chain: no transaction can use the authorization any more.
            chain.rpc.call("evm_increaseTime", [terms.max_timeout_seconds + 60])
            chain.rpc.call("evm_mine", [])

            async def ended() -> bool:
                return bool((await wire.get_task(task["id"]))["status"]["state"] == "TASK_STATE_FAILED")

            await wait_until(ended, what="the recovery ends the task")
            done = await wire.get_task(task["id"])
            await assert_nothing_happened(chain, before, address_of(payer_key), sqlite_url)

    assert waiting["status"]["state"] == "TASK_STATE_WORKING", waiting
    assert "outcome is not known yet" in " ".join(texts(waiting))
    assert extension(done)["status"] == "payment-failed"
    assert "expired unused" in texts(done)[0] and "nothing was charged" in texts(done)[0]
    assert "oops" not in texts(done)[0]


async def metrics_text(base_url: str) -> str:
    async with httpx.AsyncClient(base_url=base_url, timeout=HANG_S) as http:
        return (await http.get("/metrics")).text

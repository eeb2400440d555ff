"""The reference merchant, driven through every flow of the specification, says what the examples say.

Each test sends the specification's example request (with the live task id and a payment signed on the
test chain) to a real merchant on anvil and compares every message it answers with to the corresponding
example after `shapes.shape` (ids, hashes, addresses, timestamps and free text normalised). A difference
means the specification and the implementation disagree about the wire.
"""

from __future__ import annotations

import asyncio
import copy
import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.extensions.common import HTTP_EXTENSION_HEADER
from a2a.utils.constants import VERSION_HEADER
from eth_account import Account

from a2a_x402.devchain import DevChain
from a2a_x402.extension import EXTENSION_URI
from a2a_x402.facilitator.wire import PaymentPayload, PaymentRequired, PaymentRequirements
from a2a_x402.merchant.edge import AGENT_CARD_PATH, JSONRPC_PATH, REST_PATH
from a2a_x402.payer import sign_payment
from tests.facilitator.payments import submit_directly
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.merchant import (
    DEFAULT_PAY_TO,
    DEFAULT_PRICE,
    MerchantStarter,
    RunningMerchant,
    write_tenants_file,
)
from tests.merchant.payments.executors import FailingExecutor, MidWorkExecutor

from .shapes import shape
from .support import JSON, example

# anvil's well-known account 7 is paid for the tenant `acme`.
ACME_PAY_TO = "0x14dC79964da2C08b23698B3D3cc7Ca32193d9955"
# Short enough that a settlement held back by anvil's manual mining is reported pending at once.
PENDING_SETTLE_TIMEOUT_S = 0.5
_POLL_S = 0.05


@pytest.fixture
def start(start_merchant: MerchantStarter, sqlite_url: str, tmp_path: Path) -> Callable[..., RunningMerchant]:
    """`start(**settings)`: a merchant serving the default tenant and `acme` over the two HTTP bindings, as
    the card example does (no gRPC interface)."""
    tenants = write_tenants_file(
        tmp_path / "tenants.toml", {"": (DEFAULT_PAY_TO, DEFAULT_PRICE), "acme": (ACME_PAY_TO, DEFAULT_PRICE)}
    )

    def run(**settings: Any) -> RunningMerchant:
        return start_merchant(sqlite_url, tenants_file=tenants, **{"grpc_port": None, **settings})

    return run


def _request(name: str, *, task_id: str = "", payload: PaymentPayload | JSON | None = None) -> JSON:
    """The example request `name` with a fresh message id, naming `task_id` and carrying `payload`."""
    request: JSON = example(name)
    message = request["params"]["message"]
    message["messageId"] = str(uuid.uuid4())
    if task_id:
        message["taskId"] = task_id
    if payload is not None:
        wire = payload.to_json_dict() if isinstance(payload, PaymentPayload) else payload
        message["metadata"][EXTENSION_URI]["payload"] = wire
    return request


def _paying(task_id: str, payment: PaymentPayload | JSON) -> JSON:
    """The example payment request for task `task_id`, carrying `payment`."""
    return _request("payment-submitted.request.json", task_id=task_id, payload=payment)


def _streaming(request: JSON) -> JSON:
    return {**request, "method": "SendStreamingMessage"}


async def _call(http: httpx.AsyncClient, request: JSON) -> JSON:
    async with asyncio.timeout(HANG_S):
        response = await http.post(JSONRPC_PATH, json=request)
    assert response.status_code == 200, response.text
    body: JSON = response.json()
    return body


async def _stream(
    http: httpx.AsyncClient, request: JSON, on_event: Callable[[int], None] | None = None
) -> list[JSON]:
    """Every JSON-RPC response of a stream, until the server closes it; `on_event(count)` after each."""
    events: list[JSON] = []
    # A stream the server never closes would otherwise hold the test until the global timeout.
    async with asyncio.timeout(HANG_S), http.stream("POST", JSONRPC_PATH, json=request) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                events.append(json.loads(line[5:]))
                if on_event is not None:
                    on_event(len(events))
    return events


def _terms(task: JSON) -> PaymentRequired:
    value = task["status"]["message"]["metadata"][EXTENSION_URI]
    assert value["status"] == "payment-required"
    return PaymentRequired.from_wire(value["required"])


def _assert_shape(live: Any, expected: Any) -> None:
    assert shape(live) == shape(expected)


async def _ask(http: httpx.AsyncClient, name: str = "payment-required.request.json") -> JSON:
    body = await _call(http, _request(name))
    _assert_shape(body, example("payment-required.response.json"))
    task: JSON = body["result"]["task"]
    return task


async def _wait_for(http: httpx.AsyncClient, task_id: str, done: Callable[[JSON], bool]) -> JSON:
    request = {"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": task_id}}
    async with asyncio.timeout(HANG_S):
        while True:
            body = await _call(http, request)
            if done(body["result"]):
                return body
            await asyncio.sleep(_POLL_S)


async def test_card_declares_the_extension_as_the_example_does(start: Callable[..., RunningMerchant]) -> None:
    merchant = start()
    async with merchant.http() as http:
        response = await http.get(AGENT_CARD_PATH)
        task = await _ask(http)
    card = response.json()
    expected = example("agent-card.json")
    # Everything but the merchant's own identity (and the signature, which the test merchant does not make):
    # interfaces per tenant and version, modes, skills, and the declaration with its params.
    for member in ("name", "description", "version", "signatures"):
        card.pop(member, None)
        expected.pop(member)
    _assert_shape(card, expected)
    [declaration] = card["capabilities"]["extensions"]
    assert declaration["uri"] == EXTENSION_URI and declaration["required"] is True
    params = declaration["params"]
    assert [entry["address"] for entry in params["payTo"]] == [DEFAULT_PAY_TO, ACME_PAY_TO]
    # The terms offered use only what the declaration lists (§3).
    [accepted] = _terms(task).accepts
    assert accepted.network in params["networks"]
    [asset] = params["assets"]
    assert (asset["network"], asset["address"]) == (accepted.network, accepted.asset)
    assert accepted.extra is not None
    assert (asset["name"], asset["version"]) == (accepted.extra["name"], accepted.extra["version"])


async def test_paid_skill_without_the_extension_is_refused(start: Callable[..., RunningMerchant]) -> None:
    merchant = start()
    async with merchant.http(extensions=None) as http:
        body = await _call(http, _request("payment-required.request.json"))
    _assert_shape(body, example("extension-required.error.json"))


async def test_payment_required_then_completed(
    start: Callable[..., RunningMerchant], chain: DevChain
) -> None:
    merchant = start()
    async with merchant.http() as http:
        response = await http.post(JSONRPC_PATH, json=_request("payment-required.request.json"))
        assert EXTENSION_URI in response.headers.get(HTTP_EXTENSION_HEADER, "").split(",")
        assert response.headers[VERSION_HEADER] == "1.0"
        _assert_shape(response.json(), example("payment-required.response.json"))
        task = response.json()["result"]["task"]
        payment = sign_payment(chain.payer_keys[0], _terms(task).accepts[0])
        before = chain.balance_of(DEFAULT_PAY_TO)
        body = await _call(
            http, _request("payment-submitted.request.json", task_id=task["id"], payload=payment)
        )
    _assert_shape(body, example("payment-completed.response.json"))
    assert chain.balance_of(DEFAULT_PAY_TO) == before + DEFAULT_PRICE


async def test_streamed_flow(start: Callable[..., RunningMerchant], chain: DevChain) -> None:
    merchant = start()
    async with merchant.http() as http:
        events = await _stream(http, _streaming(_request("payment-required.request.json")))
        _assert_shape(events, example("payment-required.stream.json"))
        task_id = events[0]["result"]["task"]["id"]
        terms = _terms(events[-1]["result"]["statusUpdate"])
        payment = sign_payment(chain.payer_keys[0], terms.accepts[0])
        paid = _request("payment-submitted.request.json", task_id=task_id, payload=payment)
        events = await _stream(http, _streaming(paid))
    _assert_shape(events, example("payment-completed.stream.json"))


async def test_verification_failure_ends_the_task(
    start: Callable[..., RunningMerchant], chain: DevChain
) -> None:
    merchant = start()
    async with merchant.http() as http:
        task = await _ask(http)
        payment = sign_payment(chain.payer_keys[0], _terms(task).accepts[0]).to_json_dict()
        signature = payment["payload"]["signature"]
        # Another valid-looking signature: r changes, so it recovers to some other address.
        payment["payload"]["signature"] = (
            signature[:4] + ("1" if signature[4] != "1" else "2") + signature[5:]
        )
        body = await _call(
            http, _request("payment-submitted.request.json", task_id=task["id"], payload=payment)
        )
    _assert_shape(body, example("verification-failed.response.json"))


async def test_retry_with_fresh_terms(
    start: Callable[..., RunningMerchant], chain: DevChain, new_payer: Callable[..., str]
) -> None:
    merchant = start()
    async with merchant.http() as http:
        task = await _ask(http)
        first = _terms(task)
        broke = sign_payment(new_payer(0), first.accepts[0])
        body = await _call(
            http, _request("payment-submitted.request.json", task_id=task["id"], payload=broke)
        )
        _assert_shape(body, example("insufficient-funds.response.json"))
        fresh = _terms(body["result"]["task"])
        assert fresh.accepts[0].extra != first.accepts[0].extra, "fresh terms name a new offer"
        stale = sign_payment(chain.payer_keys[0], first.accepts[0])
        refused = await _call(
            http, _request("payment-submitted.request.json", task_id=task["id"], payload=stale)
        )
        _assert_shape(refused, example("payment-mismatch.error.json"))
        payment = sign_payment(chain.payer_keys[0], fresh.accepts[0])
        body = await _call(
            http, _request("payment-submitted.request.json", task_id=task["id"], payload=payment)
        )
    _assert_shape(body, example("payment-completed.response.json"))


async def test_rejection_cancels_the_task(start: Callable[..., RunningMerchant]) -> None:
    merchant = start()
    async with merchant.http() as http:
        task = await _ask(http)
        body = await _call(http, _request("payment-rejected.request.json", task_id=task["id"]))
    _assert_shape(body, example("payment-rejected.response.json"))


async def test_payment_of_another_amount_is_refused(
    start: Callable[..., RunningMerchant], chain: DevChain
) -> None:
    merchant = start()
    async with merchant.http() as http:
        task = await _ask(http)
        offered = _terms(task).accepts[0]
        cheaper = sign_payment(chain.payer_keys[0], offered.model_copy(update={"amount": offered.amount - 1}))
        body = await _call(
            http, _request("payment-submitted.request.json", task_id=task["id"], payload=cheaper)
        )
        _assert_shape(body, example("payment-mismatch.error.json"))
        # Refused before the task: it still waits for its payment.
        state = await _wait_for(http, task["id"], lambda t: True)
    assert state["result"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


async def test_tenant_is_offered_its_own_terms_and_keeps_its_task(
    start: Callable[..., RunningMerchant], chain: DevChain
) -> None:
    merchant = start()
    async with merchant.http() as http:
        task = await _ask(http, "tenant.payment-required.request.json")
        assert _terms(task).accepts[0].pay_to == ACME_PAY_TO
        payment = sign_payment(chain.payer_keys[0], _terms(task).accepts[0])
        # The same payment sent to the default tenant: the task does not exist there (§12).
        body = await _call(
            http, _request("payment-submitted.request.json", task_id=task["id"], payload=payment)
        )
    assert body["error"]["code"] == -32001


async def test_pending_settlement_answers_then_completes(
    start: Callable[..., RunningMerchant], chain: DevChain
) -> None:
    merchant = start(settle_timeout_s=PENDING_SETTLE_TIMEOUT_S)
    async with merchant.http() as http:
        task = await _ask(http)
        payment = sign_payment(chain.payer_keys[0], _terms(task).accepts[0])
        chain.rpc.call("evm_setAutomine", [False])
        body = await _call(
            http, _request("payment-submitted.request.json", task_id=task["id"], payload=payment)
        )
        pending: JSON = copy.deepcopy(example("settlement-pending.response.json"))
        _assert_shape(body["result"]["task"], pending["result"])
        stored = await _wait_for(http, task["id"], lambda t: True)
        _assert_shape(stored, pending)
        chain.rpc.call("evm_mine")
        done = await _wait_for(http, task["id"], lambda t: t["status"]["state"] != "TASK_STATE_WORKING")
    _assert_shape(done["result"], example("payment-completed.response.json")["result"]["task"])


async def test_pending_settlement_streamed(start: Callable[..., RunningMerchant], chain: DevChain) -> None:
    merchant = start(settle_timeout_s=PENDING_SETTLE_TIMEOUT_S)
    async with merchant.http() as http:
        task = await _ask(http)
        payment = sign_payment(chain.payer_keys[0], _terms(task).accepts[0])
        chain.rpc.call("evm_setAutomine", [False])

        def mine_once_pending(count: int) -> None:
            # The second event reports the pending settlement; only then is the block mined.
            if count == 2:
                chain.rpc.call("evm_mine")

        paid = _streaming(_request("payment-submitted.request.json", task_id=task["id"], payload=payment))
        events = await _stream(http, paid, mine_once_pending)
    _assert_shape(events, example("settlement-pending.stream.json"))


async def test_new_request_while_waiting_gets_fresh_terms(
    start: Callable[..., RunningMerchant], chain: DevChain
) -> None:
    """T15: a plain message to a task waiting for payment is a new request; the previous terms are void."""
    merchant = start()
    async with merchant.http() as http:
        task = await _ask(http)
        body = await _call(http, _request("payment-required.request.json", task_id=task["id"]))
        _assert_shape(body, example("payment-required.response.json"))
        fresh = body["result"]["task"]
        assert fresh["id"] == task["id"]
        fresh_extra, void_extra = _terms(fresh).accepts[0].extra, _terms(task).accepts[0].extra
        assert fresh_extra is not None and void_extra is not None
        assert fresh_extra["offerId"] != void_extra["offerId"]
        void = sign_payment(chain.payer_keys[0], _terms(task).accepts[0])
        refused = await _call(http, _paying(task["id"], void))
        _assert_shape(refused, example("payment-mismatch.error.json"))
        payment = sign_payment(chain.payer_keys[0], _terms(fresh).accepts[0])
        body = await _call(http, _paying(task["id"], payment))
    _assert_shape(body, example("payment-completed.response.json"))


async def test_payment_in_request_metadata_is_refused(
    start: Callable[..., RunningMerchant], chain: DevChain
) -> None:
    """§5.1: a payment in `params.metadata` is refused, never ignored (the task would be priced again)."""
    merchant = start()
    async with merchant.http() as http:
        task = await _ask(http)
        payment = sign_payment(chain.payer_keys[0], _terms(task).accepts[0])
        request = _paying(task["id"], payment)
        request["params"]["metadata"] = request["params"]["message"].pop("metadata")
        body = await _call(http, request)
        assert body["error"]["code"] == -32602, body
        assert "request's" in body["error"]["message"]
        stored = await _wait_for(http, task["id"], lambda t: True)
    assert stored["result"]["status"] == task["status"], "the task did not change"


async def test_represented_payment_answers_with_the_task_as_it_stands(
    start: Callable[..., RunningMerchant], chain: DevChain
) -> None:
    """T13, T16, T14: the same payment again gets the stored task (pending receipt included); a plain
    message meanwhile, or anything after the end, is refused."""
    merchant = start(settle_timeout_s=PENDING_SETTLE_TIMEOUT_S)
    async with merchant.http() as http:
        task = await _ask(http)
        payment = sign_payment(chain.payer_keys[0], _terms(task).accepts[0])
        chain.rpc.call("evm_setAutomine", [False])
        paid = _paying(task["id"], payment)
        first = await _call(http, paid)
        again = await _call(http, _paying(task["id"], payment))
        _assert_shape(again, example("payment-represented.response.json"))
        assert again["result"]["task"]["status"] == first["result"]["task"]["status"], "the task as it stands"
        plain = await _call(http, _request("payment-required.request.json", task_id=task["id"]))
        assert plain["error"]["code"] == -32004, plain
        chain.rpc.call("evm_mine")
        await _wait_for(http, task["id"], lambda t: t["status"]["state"] == "TASK_STATE_COMPLETED")
        for request in (
            _paying(task["id"], payment),
            _request("payment-required.request.json", task_id=task["id"]),
        ):
            _assert_shape(await _call(http, request), example("task-finished.error.json"))


@pytest.mark.error_logs("why: the paid skill raises, which the merchant logs for its operator")
async def test_work_failure_fails_the_task_unpaid(
    start: Callable[..., RunningMerchant], chain: DevChain
) -> None:
    merchant = start(delegate=FailingExecutor())
    async with merchant.http() as http:
        task = await _ask(http)
        payment = sign_payment(chain.payer_keys[0], _terms(task).accepts[0])
        body = await _call(http, _paying(task["id"], payment))
        _assert_shape(body, example("work-failed.response.json"))
        task = await _ask(http)
        payment = sign_payment(chain.payer_keys[0], _terms(task).accepts[0])
        paid = _streaming(_paying(task["id"], payment))
        events = await _stream(http, paid)
    _assert_shape(events, example("work-failed.stream.json"))


async def test_retryable_settlement_failure_then_paid_in_a_second_round(
    start: Callable[..., RunningMerchant], chain: DevChain, new_payer: Callable[..., str]
) -> None:
    """T11 then T8: the receipts of the completed task span both rounds."""
    key = new_payer()
    payer = Account.from_key(key).address
    offered: list[PaymentRequirements] = []

    def spend_everything_once() -> None:
        if len(offered) == 1:
            drain = offered[0].model_copy(
                update={"pay_to": Account.create().address, "amount": chain.balance_of(payer)}
            )
            offered.append(drain)
            submit_directly(chain, sign_payment(key, drain))

    merchant = start(delegate=MidWorkExecutor(spend_everything_once))
    async with merchant.http() as http:
        task = await _ask(http)
        offered.append(_terms(task).accepts[0])
        paid = _paying(task["id"], sign_payment(key, offered[0]))
        body = await _call(http, paid)
        _assert_shape(body, example("insufficient-funds.response.json"))
        chain.mint(payer, DEFAULT_PRICE)
        fresh = _terms(body["result"]["task"]).accepts[0]
        paid = _paying(task["id"], sign_payment(key, fresh))
        body = await _call(http, paid)
    _assert_shape(body, example("payment-completed.two-rounds.response.json"))


async def test_settlement_failure_fails_the_task(
    start: Callable[..., RunningMerchant], chain: DevChain, new_payer: Callable[..., str]
) -> None:
    """T10: the payer spends the authorization's nonce on another transfer while the work runs."""
    key = new_payer()
    payments: list[PaymentPayload] = []

    def spend_the_nonce() -> None:
        elsewhere = payments[0].accepted.model_copy(update={"pay_to": Account.create().address, "amount": 1})
        nonce = bytes.fromhex(payments[0].payload.authorization.nonce[2:])
        submit_directly(chain, sign_payment(key, elsewhere, nonce=nonce))

    merchant = start(delegate=MidWorkExecutor(spend_the_nonce))
    async with merchant.http() as http:
        task = await _ask(http)
        payments.append(sign_payment(key, _terms(task).accepts[0]))
        paid = _paying(task["id"], payments[0])
        answered = await _call(http, paid)
        stored = await _wait_for(http, task["id"], lambda t: True)
    _assert_shape(stored, example("settlement-failed.response.json"))
    assert answered["result"]["task"]["status"] == stored["result"]["status"]


async def test_expired_payment_gets_fresh_terms(
    start: Callable[..., RunningMerchant], chain: DevChain
) -> None:
    merchant = start()
    async with merchant.http() as http:
        task = await _ask(http)
        now = int(time.time())
        expired = sign_payment(
            chain.payer_keys[0], _terms(task).accepts[0], valid_after=now - 600, valid_before=now - 300
        )
        body = await _call(http, _paying(task["id"], expired))
    _assert_shape(body, example("expired-payment.response.json"))


async def test_cancel_before_paying(start: Callable[..., RunningMerchant]) -> None:
    merchant = start()
    async with merchant.http() as http:
        task = await _ask(http)
        request = example("cancel-before-payment.request.json")
        request["params"]["id"] = task["id"]
        body = await _call(http, request)
    _assert_shape(body, example("cancel-before-payment.response.json"))


async def test_http_json_binding_answers_as_the_example(start: Callable[..., RunningMerchant]) -> None:
    merchant = start()
    async with merchant.http() as http, asyncio.timeout(HANG_S):
        request = example("http.payment-required.request.json")
        response = await http.post(REST_PATH + "/message:send", json=request)
    assert response.status_code == 200, response.text
    assert EXTENSION_URI in response.headers.get(HTTP_EXTENSION_HEADER, "").split(",")
    _assert_shape(response.json(), example("http.payment-required.response.json"))

"""0.3 and 1.0 clients paying the reference merchant (`merchant.app`) through the edge, on the test chain.

A 0.3 client is served the x402 extension v0.2 (flat `x402.payment.*` keys, x402 v1 terms, v1 or v2
payloads); a 1.0 client extension v0.3. Both are booked in the same ledger exactly alike. The concurrent
payments run on SQLite and PostgreSQL, the rest on SQLite (`sqlite_merchant`): the booking is the same
code, and every test on the chain costs suite time.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from a2a.client import A2ACardResolver, ClientCallContext, ClientConfig, ClientFactory
from a2a.types import Message, Role, SendMessageRequest, TaskState
from a2a.utils.constants import TransportProtocol
from eth_account import Account
from google.protobuf.json_format import MessageToDict, ParseDict

from a2a_x402.devchain import DevChain
from a2a_x402.extension import (
    EXTENSION_URI,
    EXTENSION_URI_V01,
    EXTENSION_URI_V02,
    Dialect,
    PaymentCompletedData,
    decode,
)
from a2a_x402.facilitator.wire import PaymentRequiredV1, requirements_v1_to_v2
from a2a_x402.merchant.edge import JSONRPC_PATH, REST_PATH
from a2a_x402.merchant.ledger import LedgerEntry
from a2a_x402.payer import sign_payment
from a2a_x402.storage import create_engine
from tests.facilitator.payments import cancel_authorization
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.merchant import (
    DEFAULT_PAY_TO,
    DEFAULT_PRICE,
    A2ACallError,
    MerchantStarter,
    MerchantWire,
    RunningMerchant,
    activation,
    ledger_entries,
    offered_terms,
    payment_data,
    payment_message,
    sdk_client,
    user_message,
)
from tests.merchant.payments.executors import MidWorkExecutor

JSON = dict[str, Any]
_VARYING = frozenset({"timestamp", "blockNumber", "validAfter", "validBefore"})
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
TEXT = "The quick brown fox. The dog sleeps."


@dataclass(frozen=True)
class Paid:
    """What a client saw at the end: its task, the final state and the payer's address."""

    task_id: str
    state: str
    payer: str


@pytest.fixture
def sqlite_merchant(start_merchant: MerchantStarter, sqlite_url: str) -> RunningMerchant:
    """The default reference merchant on a fresh SQLite database."""
    return start_merchant(sqlite_url)


# -- 0.3 clients --------------------------------------------------------------------------------------


def v1_payload(
    key: str, terms: JSON, *, valid_after: int | None = None, valid_before: int | None = None
) -> JSON:
    """An x402 v1 PaymentPayload (`network` name, no `accepted`) for the first of the v1 `terms`.

    `valid_after` and `valid_before` override the authorization's window.
    """
    required = PaymentRequiredV1.from_wire(terms)
    requirements = requirements_v1_to_v2(required.accepts[0])
    payment = sign_payment(key, requirements, valid_after=valid_after, valid_before=valid_before)
    signed = payment.to_json_dict()
    return {
        "x402Version": 1,
        "scheme": required.accepts[0].scheme,
        "network": required.accepts[0].network,
        "payload": signed["payload"],
    }


async def pay_v0_3_raw(merchant: RunningMerchant, key: str, extension: str = EXTENSION_URI_V02) -> Paid:
    """Pay with JSON shaped exactly like the a2a-x402 v0.2 spec examples (no A2A-Version: 0.3)."""
    async with httpx.AsyncClient(
        base_url=merchant.base_url, headers={"X-A2A-Extensions": extension}, timeout=HANG_S
    ) as http:

        async def send(message: JSON, request_id: str) -> JSON:
            params = {"message": message}
            body = {"jsonrpc": "2.0", "method": "message/send", "id": request_id, "params": params}
            response = await http.post(JSONRPC_PATH, json=body)
            assert response.headers["a2a-version"] == "0.3"
            assert response.headers["x-a2a-extensions"] == extension
            answer: JSON = response.json()
            assert answer["id"] == request_id, answer
            result: JSON = answer["result"]
            return result

        part = {"kind": "text", "text": TEXT}
        ask = {"kind": "message", "messageId": str(uuid.uuid4()), "role": "user", "parts": [part]}
        task = await send(ask, "req-001")
        assert (task["kind"], task["status"]["state"]) == ("task", "input-required")
        metadata = task["status"]["message"]["metadata"]
        assert metadata["x402.payment.status"] == "payment-required"
        terms = metadata["x402.payment.required"]
        # Integral numbers stay integers on the 0.3 routes too (the protobuf Struct made them doubles).
        assert type(terms["x402Version"]) is int and type(terms["accepts"][0]["maxTimeoutSeconds"]) is int
        assert_v1_terms(terms)
        submission = {
            "kind": "message",
            "messageId": str(uuid.uuid4()),
            "taskId": task["id"],
            "role": "user",
            "parts": [{"kind": "text", "text": "Here is the payment authorization."}],
            "metadata": {
                "x402.payment.status": "payment-submitted",
                "x402.payment.payload": v1_payload(key, terms),
            },
        }
        done = await send(submission, "req-003")
    metadata = done["status"]["message"]["metadata"]
    assert metadata["x402.payment.status"] == "payment-completed"
    [receipt] = metadata["x402.payment.receipts"]
    assert (receipt["success"], receipt["network"]) == (True, "base-sepolia")
    assert done["artifacts"], done
    return Paid(done["id"], done["status"]["state"], Account.from_key(key).address)


async def pay_v0_3_sdk(merchant: RunningMerchant, key: str, binding: str) -> Paid:
    """Pay with the a2a-sdk 0.3 compat client (from the 0.3 card), an x402 v2 payload in the v0.2 keys."""
    async with httpx.AsyncClient(timeout=HANG_S) as http:
        # The 0.3 card: without `A2A-Version` this client, which speaks both, would pick a 1.0 interface.
        card = await A2ACardResolver(http, merchant.base_url).get_agent_card(
            http_kwargs={"headers": {"A2A-Version": "0.3"}}
        )
        config = ClientConfig(httpx_client=http, supported_protocol_bindings=[binding], streaming=False)
        client = ClientFactory(config).create(card)
        context = ClientCallContext(service_parameters={"A2A-Extensions": EXTENSION_URI_V02})
        ask = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER)
        ask.parts.add(text=TEXT)
        [first] = [e async for e in client.send_message(SendMessageRequest(message=ask), context=context)]
        data = decode(MessageToDict(first.task.status.message.metadata), Dialect.V02)
        terms = data.required  # type: ignore[union-attr]
        assert isinstance(terms, PaymentRequiredV1)
        payload = sign_payment(key, requirements_v1_to_v2(terms.accepts[0]))
        pay = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, task_id=first.task.id)
        pay.parts.add(text="paying")
        pay.metadata.update(
            {"x402.payment.status": "payment-submitted", "x402.payment.payload": payload.to_json_dict()}
        )
        [last] = [e async for e in client.send_message(SendMessageRequest(message=pay), context=context)]
        await client.close()
    completed = decode(MessageToDict(last.task.status.message.metadata), Dialect.V02)
    assert isinstance(completed, PaymentCompletedData)
    return Paid(last.task.id, TaskState.Name(last.task.status.state), Account.from_key(key).address)


def assert_v1_terms(terms: JSON) -> None:
    """`terms` are the merchant's x402 v1 terms (network name, `maxAmountRequired`), with the fields x402 v1
    clients require that v2 leaves optional: `error` at the top and `mimeType` in the option."""
    assert terms["x402Version"] == 1
    assert terms["error"].startswith(("Payment required: ", "The payment was not taken ("))
    [accepted] = terms["accepts"]
    assert (accepted["network"], accepted["maxAmountRequired"]) == ("base-sepolia", str(DEFAULT_PRICE))
    assert accepted["payTo"] == DEFAULT_PAY_TO
    assert accepted["mimeType"] == "application/json"
    assert accepted["resource"].endswith("/skills/text-stats")
    assert accepted["description"] == "text-stats for 0.25 USDC"


class RawV0_3:
    """Raw 0.3 JSON-RPC shaped like the a2a-x402 v0.2 spec examples: no A2A-Version, `X-A2A-Extensions`."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        self.http = http

    async def send(self, message: JSON, method: str = "message/send") -> httpx.Response:
        body = {"jsonrpc": "2.0", "method": method, "id": "req-1", "params": {"message": message}}
        response = await self.http.post(JSONRPC_PATH, json=body)
        assert response.headers["a2a-version"] == "0.3"
        return response

    async def result(self, message: JSON) -> JSON:
        answer = (await self.send(message)).json()
        assert "error" not in answer, answer
        result: JSON = answer["result"]
        return result

    async def ask(self) -> JSON:
        """A task waiting for payment, its v1 terms checked."""
        part = {"kind": "text", "text": TEXT}
        ask = {"kind": "message", "messageId": str(uuid.uuid4()), "role": "user", "parts": [part]}
        task = await self.result(ask)
        assert task["status"]["state"] == "input-required"
        assert task["status"]["message"]["metadata"]["x402.payment.status"] == "payment-required"
        assert_v1_terms(terms_of(task))
        return task


def terms_of(task: JSON) -> JSON:
    """The v1 terms in a 0.3 task's status message."""
    terms: JSON = task["status"]["message"]["metadata"]["x402.payment.required"]
    return terms


def flat_message(task_id: str, metadata: JSON) -> JSON:
    """A 0.3 user message carrying flat `x402.payment.*` metadata."""
    part = {"kind": "text", "text": "Here is the payment authorization."}
    return {
        "kind": "message",
        "messageId": str(uuid.uuid4()),
        "taskId": task_id,
        "role": "user",
        "parts": [part],
        "metadata": metadata,
    }


def submitted(task_id: str, payload: JSON) -> JSON:
    """The 0.3 payment submission."""
    metadata = {"x402.payment.status": "payment-submitted", "x402.payment.payload": payload}
    return flat_message(task_id, metadata)


@pytest.fixture
async def raw_v0_3(sqlite_merchant: RunningMerchant) -> AsyncIterator[RawV0_3]:
    """A raw 0.3 client of the SQLite merchant with the v0.2 extension activated."""
    async with httpx.AsyncClient(
        base_url=sqlite_merchant.base_url, headers={"X-A2A-Extensions": EXTENSION_URI_V02}, timeout=HANG_S
    ) as http:
        yield RawV0_3(http)


@pytest.mark.parametrize("error", ["EXPIRED_PAYMENT", "INSUFFICIENT_FUNDS"])
async def test_0_3_payment_not_taken_gets_fresh_v1_terms(
    raw_v0_3: RawV0_3, sqlite_merchant: RunningMerchant, chain: DevChain, new_payer: Any, error: str
) -> None:
    task = await raw_v0_3.ask()
    now = int(time.time())
    if error == "EXPIRED_PAYMENT":
        key = new_payer()
        payload = v1_payload(key, terms_of(task), valid_after=now - 600, valid_before=now - 300)
    else:
        key = new_payer(DEFAULT_PRICE - 1)
        payload = v1_payload(key, terms_of(task))

    again = await raw_v0_3.result(submitted(task["id"], payload))

    assert (again["kind"], again["status"]["state"]) == ("task", "input-required")
    metadata = again["status"]["message"]["metadata"]
    assert (metadata["x402.payment.status"], metadata["x402.payment.error"]) == ("payment-required", error)
    assert_v1_terms(terms_of(again))
    # The x402 `error` says, for people, why fresh terms were sent.
    assert terms_of(again)["error"].startswith(f"The payment was not taken ({error}); here are fresh terms.")
    assert await ledger_entries(sqlite_merchant.database_url) == []
    if error == "EXPIRED_PAYMENT":
        done = await raw_v0_3.result(submitted(task["id"], v1_payload(key, terms_of(again))))
        assert done["status"]["state"] == "completed"
        assert len(await ledger_entries(sqlite_merchant.database_url)) == 1
    else:
        assert chain.balance_of(Account.from_key(key).address) == DEFAULT_PRICE - 1


async def test_0_3_settlement_failure_is_payment_failed_with_v1_receipts(
    start_merchant: MerchantStarter, sqlite_url: str, chain: DevChain, new_payer: Any
) -> None:
    key = new_payer()
    payloads: list[JSON] = []
    merchant = start_merchant(
        sqlite_url,
        delegate=MidWorkExecutor(
            lambda: cancel_authorization(chain, key, payloads[0]["payload"]["authorization"]["nonce"])
        ),
    )
    async with httpx.AsyncClient(
        base_url=merchant.base_url, headers={"X-A2A-Extensions": EXTENSION_URI_V02}, timeout=HANG_S
    ) as http:
        wire = RawV0_3(http)
        task = await wire.ask()
        payloads.append(v1_payload(key, terms_of(task)))

        failed = await wire.result(submitted(task["id"], payloads[0]))

    assert failed["status"]["state"] == "failed"
    metadata = failed["status"]["message"]["metadata"]
    outcome = (metadata["x402.payment.status"], metadata["x402.payment.error"])
    assert outcome == ("payment-failed", "DUPLICATE_NONCE")
    [receipt] = metadata["x402.payment.receipts"]
    # An x402 v1 SettleResponse: the network by name, the payer, no v2 `extensions`.
    assert (receipt["success"], receipt["network"]) == (False, "base-sepolia")
    assert receipt["errorReason"] == "invalid_exact_evm_nonce_already_used"
    assert receipt["payer"] == Account.from_key(key).address
    assert "artifacts" not in failed
    assert await ledger_entries(merchant.database_url) == []


async def test_0_3_rejected_terms_cancel_the_task(
    raw_v0_3: RawV0_3, sqlite_merchant: RunningMerchant
) -> None:
    task = await raw_v0_3.ask()

    canceled = await raw_v0_3.result(flat_message(task["id"], {"x402.payment.status": "payment-rejected"}))

    assert canceled["status"]["state"] == "canceled"
    assert canceled["status"]["message"]["metadata"] == {"x402.payment.status": "payment-rejected"}
    assert await ledger_entries(sqlite_merchant.database_url) == []


async def test_0_3_payment_over_message_stream(
    raw_v0_3: RawV0_3, sqlite_merchant: RunningMerchant, new_payer: Any
) -> None:
    key = new_payer()
    task = await raw_v0_3.ask()

    response = await raw_v0_3.send(submitted(task["id"], v1_payload(key, terms_of(task))), "message/stream")

    events = [
        httpx.Response(200, content=line[5:].strip()).json()["result"]
        for line in response.text.splitlines()
        if line.startswith("data:")
    ]
    assert {event["kind"] for event in events} <= {"task", "status-update", "artifact-update"}
    last = events[-1]
    assert (last["kind"], last["final"], last["status"]["state"]) == ("status-update", True, "completed")
    metadata = last["status"]["message"]["metadata"]
    assert metadata["x402.payment.status"] == "payment-completed"
    [receipt] = metadata["x402.payment.receipts"]
    assert (receipt["success"], receipt["network"]) == (True, "base-sepolia")
    assert any(event["kind"] == "artifact-update" for event in events)
    [entry] = await ledger_entries(sqlite_merchant.database_url)
    payer = Account.from_key(key).address
    assert (entry.task_id, entry.payer, entry.amount) == (task["id"], payer, DEFAULT_PRICE)


# -- 1.0 clients --------------------------------------------------------------------------------------


async def pay_v1_0_raw(merchant: RunningMerchant, key: str, binding: str) -> Paid:
    """Pay with raw A2A 1.0 ProtoJSON."""
    async with merchant.http() as http:
        wire = MerchantWire(http, binding)
        task = (await wire.send(user_message(TEXT)))["task"]
        payload = sign_payment(key, offered_terms(task).accepts[0])
        done = (await wire.send(payment_message(task["id"], payload)))["task"]
    assert isinstance(payment_data(done), PaymentCompletedData)
    return Paid(done["id"], done["status"]["state"], Account.from_key(key).address)


async def pay_v1_0_sdk(merchant: RunningMerchant, key: str, binding: str) -> Paid:
    """Pay with the a2a-sdk 1.x client."""
    async with merchant.http() as http:
        client = await sdk_client(http, merchant.base_url, binding, streaming=False)
        ask = SendMessageRequest(message=ParseDict(user_message(TEXT), Message()))
        [first] = [e async for e in client.send_message(ask, context=activation())]
        payload = sign_payment(key, offered_terms(first.task).accepts[0])
        pay = ParseDict(payment_message(first.task.id, payload), Message())
        [last] = [e async for e in client.send_message(SendMessageRequest(message=pay), context=activation())]
        await client.close()
    assert isinstance(payment_data(last.task), PaymentCompletedData)
    return Paid(last.task.id, TaskState.Name(last.task.status.state), Account.from_key(key).address)


async def test_0_3_and_1_0_clients_pay_the_same_merchant_concurrently(
    merchant: RunningMerchant, chain: DevChain, new_payer: Any
) -> None:
    keys = [new_payer() for _ in range(7)]

    paid = await asyncio.gather(
        pay_v0_3_raw(merchant, keys[0]),
        pay_v0_3_sdk(merchant, keys[1], TransportProtocol.JSONRPC.value),
        pay_v0_3_sdk(merchant, keys[2], TransportProtocol.HTTP_JSON.value),
        pay_v1_0_raw(merchant, keys[3], "rest"),
        pay_v1_0_sdk(merchant, keys[4], "jsonrpc"),
        pay_v1_0_raw(merchant, keys[5], "grpc"),
        pay_v1_0_sdk(merchant, keys[6], "grpc"),
    )

    assert [p.state for p in paid] == ["completed"] + ["TASK_STATE_COMPLETED"] * 6
    booked = {entry.task_id: entry for entry in await ledger_entries(merchant.database_url)}
    assert set(booked) == {p.task_id for p in paid}
    for p in paid:
        entry = booked[p.task_id]
        expected = ("", p.payer, DEFAULT_PAY_TO, DEFAULT_PRICE)
        assert (entry.tenant, entry.payer, entry.pay_to, entry.amount) == expected
    # Booked alike whatever the version: same accounts, directions and amounts, on the same asset and chain.
    assert len({entry.lines for entry in booked.values()}) == 1
    assert {(entry.asset, entry.network) for entry in booked.values()} == {
        (merchant.settings.asset, merchant.settings.network)
    }
    chain_ids = await booked_chain_ids(merchant.database_url)
    assert set(chain_ids) == set(booked)
    assert set(chain_ids.values()) == {chain.chain_id}


async def booked_chain_ids(database_url: str) -> dict[str, int]:
    """The chain id of every settlement entry booked in `database_url`, by task id."""
    entries = LedgerEntry.__table__
    statement = sa.select(entries.c.task_id, entries.c.chain_id).where(entries.c.kind == "settlement")
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            rows = (await connection.execute(statement)).all()
    finally:
        await engine.dispose()
    return {row.task_id: row.chain_id for row in rows}


async def test_the_v0_1_uri_is_accepted_on_0_3_and_echoed(
    sqlite_merchant: RunningMerchant, new_payer: Any
) -> None:
    paid = await pay_v0_3_raw(sqlite_merchant, new_payer(), extension=EXTENSION_URI_V01)

    assert paid.state == "completed"


# -- extensions, strictly -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "extension"),
    [
        ("1.0", None),
        ("1.0", EXTENSION_URI_V02),  # another version's URI is ignored, never mapped
        ("1.0", EXTENSION_URI_V01),
        ("0.3", None),
        ("0.3", EXTENSION_URI),
        ("0.3", "https://github.com/google-agentic-commerce/a2a-x402/blob/main/spec/v0.9"),
    ],
)
async def test_a_priced_skill_without_the_extension_activated_is_refused(
    sqlite_merchant: RunningMerchant, version: str, extension: str | None
) -> None:
    headers = {"A2A-Version": version}
    if extension is not None:
        headers["A2A-Extensions"] = extension
    if version == "1.0":
        body = {"message": user_message(TEXT)}
        path = REST_PATH + "/message:send"
    else:
        body = {"message": {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "content": [{"text": TEXT}]}}
        path = REST_PATH + "/v1/message:send"
    async with httpx.AsyncClient(base_url=sqlite_merchant.base_url, timeout=HANG_S) as http:
        response = await http.post(path, json=body, headers=headers)

    assert response.status_code == 400
    assert response.json()["error"]["details"][0]["reason"] == "EXTENSION_SUPPORT_REQUIRED"
    assert "a2a-extensions" not in response.headers


async def test_0_3_jsonrpc_client_learns_the_extension_is_required(sqlite_merchant: RunningMerchant) -> None:
    ask = {"kind": "message", "messageId": "m-1", "role": "user", "parts": [{"kind": "text", "text": TEXT}]}
    async with httpx.AsyncClient(base_url=sqlite_merchant.base_url, timeout=HANG_S) as http:
        response = await http.post(
            JSONRPC_PATH,
            json={"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": ask}},
        )

    error = response.json()["error"]
    # 0.3 has no ExtensionSupportRequired code: it keeps its 1.0 code, a server-defined one on 0.3.
    assert error["code"] == -32008
    assert "x402" in error["message"]
    assert "data" not in error


async def test_flat_keys_on_1_0_and_nested_metadata_on_0_3_are_refused(
    sqlite_merchant: RunningMerchant,
) -> None:
    flat = user_message(TEXT, task_id="")
    flat["metadata"] = {"x402.payment.status": "payment-submitted", "x402.payment.payload": {}}
    async with sqlite_merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task = (await wire.send(user_message(TEXT)))["task"]
        flat["taskId"] = task["id"]
        with pytest.raises(A2ACallError) as current:
            await wire.send(flat)
    nested = {
        "kind": "message",
        "messageId": "m-2",
        "taskId": task["id"],
        "role": "user",
        "parts": [{"kind": "text", "text": "pay"}],
        "metadata": {EXTENSION_URI: {"status": "payment-submitted", "payload": {}}},
    }
    async with httpx.AsyncClient(
        base_url=sqlite_merchant.base_url, headers={"X-A2A-Extensions": EXTENSION_URI_V02}, timeout=HANG_S
    ) as http:
        legacy = await http.post(
            JSONRPC_PATH,
            json={"jsonrpc": "2.0", "id": 2, "method": "message/send", "params": {"message": nested}},
        )

    assert current.value.rpc_code == -32602
    assert legacy.json()["error"]["code"] == -32602


# -- binding equivalence of the paid flow -------------------------------------------------------------


def normalized(value: Any, names: dict[str, str]) -> Any:
    """`value` with ids, addresses, hashes and times replaced by placeholders, numbered as they appear
    (members in key order: a `Struct`'s order is not part of what a binding says)."""
    if isinstance(value, dict):
        return {key: normalized(item, names) for key, item in sorted(value.items()) if key not in _VARYING}
    if isinstance(value, list):
        return [normalized(item, names) for item in value]
    if isinstance(value, str) and (_is_uuid(value) or (value.startswith("0x") and len(value) >= 42)):
        return names.setdefault(value, f"<{len(names)}>")
    if isinstance(value, str) and value.startswith(("Payment settled in transaction", "validA")):
        return value.split(" 0x")[0]
    return value


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


async def paid_flow(merchant: RunningMerchant, key: str, binding: str) -> list[Any]:
    """Every answer of the paid flow and its errors on one binding, normalized."""
    names: dict[str, str] = {}
    answers: list[Any] = []
    async with merchant.http() as http, merchant.http(extensions=None) as plain:
        wire = MerchantWire(http, binding)
        with pytest.raises(A2ACallError) as refused:
            await MerchantWire(plain, binding).send(user_message(TEXT))
        answers.append((refused.value.reason, refused.value.message))
        task = (await wire.send(user_message(TEXT)))["task"]
        answers.append(normalized(task, names))
        terms = offered_terms(task)
        wrong = sign_payment(key, terms.accepts[0].model_copy(update={"amount": terms.accepts[0].amount - 1}))
        for bad in (payment_message(task["id"], wrong), payment_message(str(uuid.uuid4()), wrong)):
            with pytest.raises(A2ACallError) as failure:
                await wire.send(bad)
            answers.append((failure.value.reason, _UUID.sub("<id>", failure.value.message)))
        done = (await wire.send(payment_message(task["id"], sign_payment(key, terms.accepts[0]))))["task"]
        answers.append(normalized(done, names))
        answers.append(normalized(await wire.get_task(task["id"]), names))
        with pytest.raises(A2ACallError) as again:
            await wire.send(payment_message(task["id"], sign_payment(key, terms.accepts[0])))
        answers.append((again.value.reason, _UUID.sub("<id>", again.value.message)))
    return answers


async def test_the_paid_flow_is_the_same_on_every_binding(
    sqlite_merchant: RunningMerchant, new_payer: Any
) -> None:
    """A2A §5.1: the same states, metadata, error reasons and messages on JSON-RPC, HTTP+JSON and gRPC."""
    rpc = await paid_flow(sqlite_merchant, new_payer(), "jsonrpc")
    rest = await paid_flow(sqlite_merchant, new_payer(), "rest")
    grpc = await paid_flow(sqlite_merchant, new_payer(), "grpc")

    assert rpc == rest
    assert grpc == rest
    assert rpc[0][0] == "EXTENSION_SUPPORT_REQUIRED"
    reasons = [answer[0] for answer in (rpc[2], rpc[3], rpc[6])]
    assert reasons == ["INVALID_PARAMS", "TASK_NOT_FOUND", "UNSUPPORTED_OPERATION"]
    assert rpc[4]["status"]["state"] == "TASK_STATE_COMPLETED"


# -- an x402 version the interface does not speak ---------------------------------------------------


async def test_an_x402_v1_payload_on_a2a_1_0_is_refused_and_moves_nothing(
    sqlite_merchant: RunningMerchant, chain: DevChain, new_payer: Any
) -> None:
    # Extension v0.3 (A2A 1.0) speaks x402 v2 only: a v1 payload for the same terms is a client mistake.
    key = new_payer()
    payer = Account.from_key(key).address
    funds = chain.balance_of(payer)
    async with sqlite_merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task = (await wire.send(user_message(TEXT)))["task"]
        requirements = offered_terms(task).accepts[0]
        signed = sign_payment(key, requirements).to_json_dict()
        v1 = {"x402Version": 1, "scheme": "exact", "network": "base-sepolia", "payload": signed["payload"]}
        with pytest.raises(A2ACallError) as refused:
            await wire.send(payment_message(task["id"], v1))
        after = await wire.get_task(task["id"])

    assert refused.value.rpc_code == -32602
    assert after["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert chain.balance_of(payer) == funds
    assert await ledger_entries(sqlite_merchant.database_url) == []


async def test_an_x402_v2_payload_for_v1_terms_on_a2a_0_3_pays(
    raw_v0_3: RawV0_3, sqlite_merchant: RunningMerchant, chain: DevChain, new_payer: Any
) -> None:
    # The reverse: A2A 0.3 offers v1 terms and takes the same authorization in either x402 version.
    key = new_payer()
    funds = chain.balance_of(Account.from_key(key).address)
    task = await raw_v0_3.ask()
    required = PaymentRequiredV1.from_wire(terms_of(task))
    v2 = sign_payment(key, requirements_v1_to_v2(required.accepts[0])).to_json_dict()

    done = await raw_v0_3.result(submitted(task["id"], v2))

    assert done["status"]["state"] == "completed", done["status"]
    assert done["status"]["message"]["metadata"]["x402.payment.status"] == "payment-completed"
    assert chain.balance_of(Account.from_key(key).address) == funds - DEFAULT_PRICE
    assert len(await ledger_entries(sqlite_merchant.database_url)) == 1

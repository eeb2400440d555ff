"""The HTTP service on uvicorn: malformed requests get the operation's answer naming the reason (never a
500), fifty concurrent settles of one authorization make exactly one transaction, with or without an
idempotency key, and a payment someone else already settled is refused naming their transaction, never
counted."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator.wire import (
    PaymentPayload,
    PaymentRequirements,
    Reason,
    SettleResponse,
    SettleResponseV1,
    VerifyResponse,
    VerifyResponseV1,
)
from a2a_x402.payer import sign_payment
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.facilitator import PAY_TO, make_requirements

from .conftest import StartService
from .payments import claim_rows, relayer_nonce, sign_exact, submit_directly
from .x402_sdk import changed

Body = dict[str, Any]


def _body(payload: PaymentPayload, requirements: PaymentRequirements) -> Body:
    return {
        "x402Version": 2,
        "paymentPayload": payload.to_json_dict(),
        "paymentRequirements": requirements.to_json_dict(),
    }


def _changed(path: str, value: object) -> Callable[[Body], Body]:
    """A mutation of a valid body: the field at dotted `path` set to `value` (removed when value is ...)."""
    return lambda body: changed(body, path, value)


AUTH = "paymentPayload.payload.authorization"
MALFORMED: dict[str, tuple[Callable[[Body], Any], Reason]] = {
    "signature is not hex": (
        _changed("paymentPayload.payload.signature", "0x" + "zz" * 65),
        Reason.INVALID_PAYLOAD,
    ),
    "signature of odd length": (
        _changed("paymentPayload.payload.signature", "0x" + "a" * 129),
        Reason.INVALID_PAYLOAD,
    ),
    "signature oversized": (
        _changed("paymentPayload.payload.signature", "0x" + "ab" * 4097),
        Reason.INVALID_PAYLOAD,
    ),
    "nonce of 31 bytes": (_changed(f"{AUTH}.nonce", "0x" + "ab" * 31), Reason.INVALID_PAYLOAD),
    "from of 19 bytes": (_changed(f"{AUTH}.from", "0x" + "ab" * 19), Reason.INVALID_PAYLOAD),
    "from with a broken checksum": (
        _changed(f"{AUTH}.from", "0xA0Ee7A142d267C1f36714E4a8F75612F20a79720"),
        Reason.INVALID_PAYLOAD,
    ),
    "value as a JSON number": (_changed(f"{AUTH}.value", 1_500_000), Reason.INVALID_PAYLOAD),
    "value negative": (_changed(f"{AUTH}.value", "-1"), Reason.INVALID_PAYLOAD),
    "value beyond uint256": (_changed(f"{AUTH}.value", str(2**256)), Reason.INVALID_PAYLOAD),
    "validBefore as a boolean": (_changed(f"{AUTH}.validBefore", True), Reason.INVALID_PAYLOAD),
    "authorization as a list": (_changed(AUTH, []), Reason.INVALID_PAYLOAD),
    "payload missing": (_changed("paymentPayload.payload", ...), Reason.INVALID_PAYLOAD),
    "unknown field": (_changed("paymentPayload.surprise", 1), Reason.INVALID_PAYLOAD),
    "payTo of 21 bytes": (
        _changed("paymentRequirements.payTo", "0x" + "ab" * 21),
        Reason.INVALID_PAYMENT_REQUIREMENTS,
    ),
    "amount as a JSON number": (
        _changed("paymentRequirements.amount", 1_500_000),
        Reason.INVALID_PAYMENT_REQUIREMENTS,
    ),
    "extra larger than 2 KiB": (
        _changed("paymentRequirements.extra", {"name": "U" * 3000, "version": "2"}),
        Reason.INVALID_PAYMENT_REQUIREMENTS,
    ),
    "body larger than 64 KiB": (
        _changed("paymentPayload.resource", {"url": "https://x.example/", "description": "d" * 70_000}),
        Reason.INVALID_PAYLOAD,
    ),
    "x402Version 3": (_changed("x402Version", 3), Reason.INVALID_X402_VERSION),
    "x402Version as a string": (_changed("x402Version", "2"), Reason.INVALID_X402_VERSION),
    "x402Version missing": (_changed("x402Version", ...), Reason.INVALID_X402_VERSION),
    "payload of version 1 in a version 2 body": (
        _changed("paymentPayload.x402Version", 1),
        Reason.INVALID_X402_VERSION,
    ),
    "body is a JSON array": (lambda body: [body], Reason.INVALID_PAYLOAD),
    "body is not JSON": (lambda body: b"{not json", Reason.INVALID_PAYLOAD),
}


async def test_malformed_requests_get_the_operations_answer_with_their_reason(
    chain: DevChain, start_service: StartService, new_payer: Callable[..., str], sqlite_url: str
) -> None:
    base_url = start_service(sqlite_url)
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)
    good = _body(payload, requirements)
    payer = payload.payload.authorization.from_address
    nonce_before = relayer_nonce(chain)
    answers: dict[tuple[str, str], tuple[int, str, bool]] = {}

    async with httpx.AsyncClient(timeout=HANG_S, base_url=base_url) as client:
        for path in ("/verify", "/settle", "/settle/status"):
            for name, (mutate, _) in MALFORMED.items():
                body = mutate(good)
                content = body if isinstance(body, bytes) else httpx.Request("POST", "/", json=body).content
                response = await client.post(
                    path, content=content, headers={"content-type": "application/json"}
                )
                if path == "/verify":
                    verified = VerifyResponse.from_wire(response.json())
                    assert verified.is_valid is False and verified.invalid_message, name
                    reason, named_payer = verified.invalid_reason, verified.payer
                else:
                    settled = SettleResponse.from_wire(response.json())
                    assert (settled.success, settled.transaction, settled.network) == (
                        False,
                        "",
                        chain.network,
                    )
                    assert settled.error_message, name
                    reason, named_payer = settled.error_reason, settled.payer
                assert named_payer in (None, payer), name
                answers[path, name] = (response.status_code, str(reason), named_payer == payer)

    # /verify and /settle answer 200 as x402 does (the SDK clients read no other status); /settle/status,
    # which is ours, a plain 400. The payer is named whenever the authorization's `from` is readable.
    unreadable_from = {"from of 19 bytes", "from with a broken checksum", "authorization as a list"}
    unreadable_from |= {
        "payload missing",
        "body is a JSON array",
        "body is not JSON",
        "body larger than 64 KiB",
    }
    expected = {
        (path, name): (400 if path == "/settle/status" else 200, reason.value, name not in unreadable_from)
        for path, _ in answers
        for name, (_, reason) in MALFORMED.items()
    }
    assert answers == expected
    assert relayer_nonce(chain) == nonce_before
    assert await claim_rows(sqlite_url) == []


async def test_a_version_1_body_that_cannot_be_parsed_gets_version_1_answers(
    chain: DevChain, start_service: StartService, sqlite_url: str
) -> None:
    base_url = start_service(sqlite_url)
    body = {"x402Version": 1, "paymentPayload": {"x402Version": 1}, "paymentRequirements": {}}

    async with httpx.AsyncClient(timeout=HANG_S, base_url=base_url) as client:
        verified = (await client.post("/verify", json=body)).json()
        settled = (await client.post("/settle", json=body)).json()

    assert VerifyResponseV1.from_wire(verified).invalid_reason == Reason.INVALID_PAYLOAD
    assert SettleResponseV1.from_wire(settled).network == "base-sepolia"
    assert settled["errorReason"] == Reason.INVALID_PAYLOAD


async def test_a_version_2_payment_in_a_version_1_body_is_refused_in_version_1(
    chain: DevChain, start_service: StartService, new_payer: Callable[..., str], sqlite_url: str
) -> None:
    base_url = start_service(sqlite_url)
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)
    body = _body(payload, requirements) | {"x402Version": 1}
    nonce_before = relayer_nonce(chain)

    async with httpx.AsyncClient(timeout=HANG_S, base_url=base_url) as client:
        verified = (await client.post("/verify", json=body)).json()
        settled = (await client.post("/settle", json=body)).json()

    assert VerifyResponseV1.from_wire(verified).is_valid is False
    assert verified["invalidReason"] == Reason.INVALID_X402_VERSION
    assert (settled["success"], settled["errorReason"]) == (False, Reason.INVALID_X402_VERSION)
    assert SettleResponseV1.from_wire(settled).network == "base-sepolia"
    assert relayer_nonce(chain) == nonce_before
    assert await claim_rows(sqlite_url) == []


async def test_a_malformed_idempotency_key_header_is_a_400_with_a_settle_answer(
    chain: DevChain, start_service: StartService, new_payer: Callable[..., str], sqlite_url: str
) -> None:
    base_url = start_service(sqlite_url)
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)
    body = _body(payload, requirements)

    async with httpx.AsyncClient(timeout=HANG_S, base_url=base_url) as client:
        response = await client.post("/settle", json=body, headers={"idempotency-key": "two words"})

    answer = SettleResponse.from_wire(response.json())
    assert response.status_code == 400
    assert (answer.success, answer.error_reason, answer.transaction) == (False, Reason.INVALID_PAYLOAD, "")
    assert answer.error_message == "an idempotency key is 1 to 255 printable ASCII characters"
    assert answer.payer == payload.payload.authorization.from_address
    assert await claim_rows(sqlite_url) == []


# Fifty settles at once on a loaded machine may queue for many seconds; a settle still waiting at its
# budget answers pending (a promise tested elsewhere), so these tests give it a budget no queue reaches.
_CONCURRENT_BUDGET_S = 60.0


async def _settle_concurrently(
    base_url: str, body: Body, count: int, headers: dict[str, str]
) -> list[httpx.Response]:
    limits = httpx.Limits(max_connections=count)
    async with httpx.AsyncClient(
        base_url=base_url, limits=limits, timeout=_CONCURRENT_BUDGET_S * 2
    ) as client:
        return await asyncio.gather(
            *(client.post("/settle", json=body, headers=headers) for _ in range(count))
        )


async def test_fifty_concurrent_settles_without_key_make_one_transaction(
    database_url: str, chain: DevChain, start_service: StartService, new_payer: Callable[..., str]
) -> None:
    base_url = start_service(database_url, receipt_timeout_s=_CONCURRENT_BUDGET_S)
    requirements = make_requirements(chain)
    body = _body(sign_payment(new_payer(), requirements), requirements)
    nonce_before, payee_before = relayer_nonce(chain), chain.balance_of(PAY_TO)

    responses = await _settle_concurrently(base_url, body, 50, {})

    assert {r.status_code for r in responses} == {200}
    answers = [r.json() for r in responses]
    [winner] = [a for a in answers if a["success"]]
    refusals = [a for a in answers if not a["success"]]
    assert len(refusals) == 49
    assert {(a["errorReason"], a["transaction"]) for a in refusals} == {("duplicate_settlement", "")}
    assert {a["extensions"]["originalSettlement"]["transaction"] for a in refusals} == {winner["transaction"]}
    assert relayer_nonce(chain) == nonce_before + 1
    assert chain.balance_of(PAY_TO) == payee_before + requirements.amount


async def test_fifty_concurrent_settles_with_one_key_get_byte_identical_answers(
    database_url: str, chain: DevChain, start_service: StartService, new_payer: Callable[..., str]
) -> None:
    base_url = start_service(database_url, receipt_timeout_s=_CONCURRENT_BUDGET_S)
    requirements = make_requirements(chain)
    body = _body(sign_payment(new_payer(), requirements), requirements)
    nonce_before, payee_before = relayer_nonce(chain), chain.balance_of(PAY_TO)

    responses = await _settle_concurrently(base_url, body, 50, {"Idempotency-Key": "order-50"})

    assert {(r.status_code, r.content) for r in responses} == {(200, responses[0].content)}
    answer = responses[0].json()
    assert answer["success"] is True and len(answer["transaction"]) == 66
    assert relayer_nonce(chain) == nonce_before + 1
    assert chain.balance_of(PAY_TO) == payee_before + requirements.amount


async def test_one_key_for_two_payments_is_a_409_and_the_payment_identifier_is_a_key(
    database_url: str, chain: DevChain, start_service: StartService, new_payer: Callable[..., str]
) -> None:
    base_url = start_service(database_url)
    requirements = make_requirements(chain)
    key = new_payer()
    extensions = {"payment-identifier": {"info": {"id": "pay_fedcba9876543210"}}}
    first, second = (
        _body(sign_exact(key, requirements, extensions=extensions), requirements) for _ in range(2)
    )

    async with httpx.AsyncClient(base_url=base_url, timeout=HANG_S) as client:
        by_header = await client.post("/settle", json=first, headers={"Idempotency-Key": "order-9"})
        header_conflict = await client.post("/settle", json=second, headers={"Idempotency-Key": "order-9"})
        by_extension = await client.post("/settle", json=second)
        by_extension_again = await client.post("/settle", json=second)
        other_resource = _changed("paymentPayload.resource", {"url": "https://merchant.example/other"})(
            second
        )
        extension_conflict = await client.post("/settle", json=other_resource)

    conflicts = [SettleResponse.from_wire(r.json()) for r in (header_conflict, extension_conflict)]
    assert by_header.json()["success"] is True
    assert [r.status_code for r in (header_conflict, extension_conflict)] == [409, 409]
    assert {(c.success, c.error_reason, c.transaction) for c in conflicts} == {
        (False, Reason.INVALID_PAYLOAD, "")
    }
    assert all("idempotency key was first used" in (c.error_message or "") for c in conflicts)
    assert by_extension.json()["success"] is True
    assert by_extension_again.content == by_extension.content
    assert len(await claim_rows(database_url)) == 2


async def test_settle_status_reports_a_settlement_and_404s_an_unknown_one(
    chain: DevChain, start_service: StartService, new_payer: Callable[..., str], sqlite_url: str
) -> None:
    base_url = start_service(sqlite_url)
    requirements = make_requirements(chain)
    body = _body(sign_payment(new_payer(), requirements), requirements)

    async with httpx.AsyncClient(base_url=base_url, timeout=HANG_S) as client:
        unknown = await client.post("/settle/status", json=body)
        settled = await client.post("/settle", json=body)
        status = await client.post("/settle/status", json=body)

    assert (unknown.status_code, unknown.json()["error"]) == (404, "settlement_not_found")
    assert settled.json()["success"] is True
    assert (status.status_code, status.content) == (200, settled.content)


async def test_supported_and_health_describe_the_service(
    chain: DevChain, start_service: StartService, sqlite_url: str
) -> None:
    base_url = start_service(sqlite_url)

    async with httpx.AsyncClient(timeout=HANG_S, base_url=base_url) as client:
        supported = (await client.get("/supported")).json()
        health = (await client.get("/healthz")).json()

    exact = {
        "x402Version": 2,
        "scheme": "exact",
        "network": chain.network,
        "extra": {"assetTransferMethods": ["eip3009", "permit2"]},
    }
    assert supported["kinds"][0] == exact
    assert health["network"] == chain.network
    assert supported["signers"] == {"eip155:*": [health["relayer"]]}


@pytest.mark.parametrize("path", ["/verify", "/settle"])
async def test_a_payment_that_fails_a_check_is_a_200_with_its_reason(
    path: str, chain: DevChain, start_service: StartService, new_payer: Callable[..., str], sqlite_url: str
) -> None:
    base_url = start_service(sqlite_url)
    requirements = make_requirements(chain)
    body = _body(sign_exact(new_payer(), requirements, value=requirements.amount - 1), requirements)

    async with httpx.AsyncClient(timeout=HANG_S, base_url=base_url) as client:
        response = await client.post(path, json=body)

    reason_field = "invalidReason" if path == "/verify" else "errorReason"
    assert response.status_code == 200
    assert response.json()[reason_field] == Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALUE_MISMATCH


async def test_a_payment_someone_else_settled_is_refused_over_http_naming_their_transaction(
    chain: DevChain, start_service: StartService, new_payer: Callable[..., str], sqlite_url: str
) -> None:
    """Over HTTP nobody vouches for when the payment was taken, so it may be a copy of one made elsewhere."""
    base_url = start_service(sqlite_url)
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)
    submit_directly(chain, payload)
    block = chain.rpc.call("eth_getBlockByNumber", ["latest", False])
    [theirs] = block["transactions"]
    nonce_before = relayer_nonce(chain)

    async with httpx.AsyncClient(base_url=base_url, timeout=HANG_S) as client:
        response = await client.post(
            "/settle", json=_body(payload, requirements), headers={"idempotency-key": "front-run-http"}
        )

    assert response.status_code == 200
    answer = response.json()
    assert (answer["success"], answer["errorReason"], answer["transaction"]) == (
        False,
        Reason.INVALID_EXACT_EVM_NONCE_ALREADY_USED,
        "",
    )
    assert answer["extensions"] == {
        "settledElsewhere": {"transaction": theirs, "blockNumber": int(block["number"], 16)}
    }
    assert relayer_nonce(chain) == nonce_before
    assert await claim_rows(sqlite_url) == []

"""The facilitator's door against the real HTTP service: API keys for /verify, /settle and /settle/status.

Strangers (no key, a wrong, malformed, revoked or oversized one) are refused with 401 and nothing claimed or
sent, and one presenting wrong keys again and again with 429 (the right key still works from there); every
caller's idempotency keys are its own (two callers with one key never meet, even racing); a public
facilitator serves callers without a key in the payer's namespace; a key's rules refuse before anything is
claimed; a key is never written to a log.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import httpx
import orjson
import pytest

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator import ApiKeyStore, HttpFacilitatorClient, KeyRules
from a2a_x402.facilitator.wire import PaymentPayload, PaymentRequirements
from a2a_x402.payer import sign_payment
from a2a_x402.storage import create_engine
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.facilitator import make_requirements
from tests.fixtures.metrics import promtool_check, sample

from .conftest import StartService
from .payments import claim_rows, relayer_nonce

ATTACKER = "0x000000000000000000000000000000000000dEaD"


async def _create_key(database_url: str, name: str, rules: KeyRules | None = None) -> tuple[str, str]:
    engine = create_engine(database_url)
    try:
        record, key = await ApiKeyStore(engine).create(name, rules)
    finally:
        await engine.dispose()
    return record.id, key


async def _revoke(database_url: str, key_id: str) -> bool:
    engine = create_engine(database_url)
    try:
        return await ApiKeyStore(engine).revoke(key_id)
    finally:
        await engine.dispose()


def _body(payload: PaymentPayload, requirements: PaymentRequirements) -> bytes:
    return orjson.dumps(
        {
            "x402Version": 2,
            "paymentPayload": payload.to_json_dict(),
            "paymentRequirements": requirements.to_json_dict(),
        }
    )


async def _post(
    url: str,
    path: str,
    payload: PaymentPayload,
    requirements: PaymentRequirements,
    *,
    key: str | None = None,
    authorization: str | None = None,
    idempotency_key: str | None = None,
    source: str | None = None,
) -> httpx.Response:
    """POST the payment to `path`; from the loopback address `source` when given (each one is another
    client to the throttle)."""
    headers = {"content-type": "application/json"}
    if key is not None:
        headers["authorization"] = f"Bearer {key}"
    if authorization is not None:
        headers["authorization"] = authorization
    if idempotency_key is not None:
        headers["idempotency-key"] = idempotency_key
    transport = None if source is None else httpx.AsyncHTTPTransport(local_address=source)
    async with httpx.AsyncClient(base_url=url, timeout=HANG_S, transport=transport) as http:
        return await http.post(path, content=_body(payload, requirements), headers=headers)


async def _door_refusals(url: str) -> dict[str, int]:
    """`x402_facilitator_door_refusals_total` by reason, from the service's /metrics (promtool-clean)."""
    async with httpx.AsyncClient(base_url=url, timeout=HANG_S) as http:
        text = (await http.get("/metrics")).text
    promtool_check(text)
    found = {}
    for reason in (
        "no_key",
        "bad_header",
        "unknown_key",
        "throttled",
        "pay_to",
        "asset",
        "min_amount",
        "rate",
    ):
        value = sample(text, "x402_facilitator_door_refusals_total", reason=reason)
        if value:
            found[reason] = int(value)
    return found


@pytest.fixture
def private_service(start_service: StartService, sqlite_url: str) -> str:
    """The HTTP service as it starts by default: API keys required."""
    return start_service(sqlite_url, facilitator_public=False)


async def test_a_stranger_is_refused_and_nothing_is_claimed_or_sent(
    chain: DevChain, private_service: str, sqlite_url: str, new_payer: Callable[..., str]
) -> None:
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)
    sent_before = relayer_nonce(chain)
    key_id, key = await _create_key(sqlite_url, "merchant")
    assert await _revoke(sqlite_url, key_id)
    _other_id, live = await _create_key(sqlite_url, "other")
    strangers: dict[str, dict[str, Any]] = {
        "no key": {},
        "wrong key": {"key": live[:-4] + "AAAA"},
        "malformed key": {"key": "let-me-in"},
        "revoked key": {"key": key},
        "not bearer": {"authorization": f"Basic {live}"},
        "oversized": {"authorization": "Bearer " + "A" * 8000},
    }

    answers = {}
    for n, (name, how) in enumerate(strangers.items()):
        for path in ("/verify", "/settle", "/settle/status"):
            # Each stranger from an address of its own: the throttle is tested on its own below.
            response = await _post(
                private_service,
                path,
                payload,
                requirements,
                idempotency_key="a2a-task:t:1",
                source=f"127.0.0.{10 + n}",
                **how,
            )
            answers[(name, path)] = response.status_code
            assert live not in response.text and key not in response.text
            if path == "/settle":
                body = response.json()
                assert body["success"] is False and body["errorReason"] == "invalid_payload", name
            if path == "/verify":
                assert response.json()["isValid"] is False, name

    assert set(answers.values()) == {401}
    assert await claim_rows(sqlite_url) == []
    assert relayer_nonce(chain) == sent_before
    async with httpx.AsyncClient(base_url=private_service, timeout=HANG_S) as http:
        assert (await http.get("/supported")).status_code == 200
        assert (await http.get("/healthz")).status_code == 200
    # Each refusal counted by why, three paths each: a stranger knocking is visible to the operator.
    assert await _door_refusals(private_service) == {"no_key": 3, "unknown_key": 9, "bad_header": 6}


async def test_a_caller_with_a_key_settles_and_a_replay_gets_the_same_answer(
    chain: DevChain, private_service: str, sqlite_url: str, new_payer: Callable[..., str]
) -> None:
    _id, key = await _create_key(sqlite_url, "merchant")
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)

    verified = await _post(private_service, "/verify", payload, requirements, key=key)
    first = await _post(private_service, "/settle", payload, requirements, key=key, idempotency_key="k-1")
    replay = await _post(private_service, "/settle", payload, requirements, key=key, idempotency_key="k-1")

    assert verified.json()["isValid"] is True
    assert first.status_code == 200 and first.json()["success"] is True
    assert replay.json() == first.json()
    (claim,) = await claim_rows(sqlite_url)
    assert claim["idempotency_key"].startswith(f"key:{_id}:") and "k-1" not in claim["idempotency_key"]


async def test_two_callers_racing_with_one_idempotency_key_never_meet(
    chain: DevChain, private_service: str, sqlite_url: str, new_payer: Callable[..., str]
) -> None:
    _a, key_a = await _create_key(sqlite_url, "merchant a")
    _b, key_b = await _create_key(sqlite_url, "merchant b")
    requirements = make_requirements(chain)
    payment_a = sign_payment(new_payer(), requirements)
    payment_b = sign_payment(new_payer(), requirements)

    first_a, first_b = await asyncio.gather(
        _post(private_service, "/settle", payment_a, requirements, key=key_a, idempotency_key="a2a-task:x:1"),
        _post(private_service, "/settle", payment_b, requirements, key=key_b, idempotency_key="a2a-task:x:1"),
    )
    again_a = await _post(
        private_service, "/settle", payment_a, requirements, key=key_a, idempotency_key="a2a-task:x:1"
    )

    assert (first_a.status_code, first_b.status_code) == (200, 200)
    assert first_a.json()["success"] and first_b.json()["success"]
    assert first_a.json()["transaction"] != first_b.json()["transaction"]
    assert again_a.json() == first_a.json()
    assert len(await claim_rows(sqlite_url)) == 2


async def test_another_callers_key_cannot_poison_a_merchants_settlement(
    chain: DevChain, private_service: str, sqlite_url: str, new_payer: Callable[..., str]
) -> None:
    """Issue 25's attack: a 1-unit payment to the attacker under the merchant's next idempotency key."""
    _m, merchant = await _create_key(sqlite_url, "merchant")
    _x, attacker = await _create_key(sqlite_url, "another caller")
    theirs = make_requirements(chain, amount=1, pay_to=ATTACKER)
    poison = sign_payment(new_payer(), theirs)
    anonymous = await _post(private_service, "/settle", poison, theirs, idempotency_key="a2a-task:t1:1")
    keyed = await _post(
        private_service, "/settle", poison, theirs, key=attacker, idempotency_key="a2a-task:t1:1"
    )
    requirements = make_requirements(chain)
    buyer = sign_payment(new_payer(), requirements)

    paid = await _post(
        private_service, "/settle", buyer, requirements, key=merchant, idempotency_key="a2a-task:t1:1"
    )

    assert anonymous.status_code == 401
    assert keyed.status_code == 200  # the attacker paid itself, in its own namespace
    assert paid.status_code == 200 and paid.json()["success"] is True


async def test_a_public_facilitator_serves_callers_without_a_key_in_the_payers_namespace(
    chain: DevChain, start_service: StartService, sqlite_url: str, new_payer: Callable[..., str]
) -> None:
    url = start_service(sqlite_url, facilitator_public=True)
    theirs = make_requirements(chain, amount=1, pay_to=ATTACKER)
    poison = sign_payment(new_payer(), theirs)
    requirements = make_requirements(chain)
    buyer = sign_payment(new_payer(), requirements)

    stranger = await _post(url, "/settle", poison, theirs, idempotency_key="a2a-task:t1:1")
    honest = await _post(url, "/settle", buyer, requirements, idempotency_key="a2a-task:t1:1")
    wrong_key = await _post(url, "/settle", buyer, requirements, key="x402f_" + "0" * 16 + "_" + "A" * 43)

    assert stranger.json()["success"] is True
    assert honest.status_code == 200 and honest.json()["success"] is True
    assert wrong_key.status_code == 401


async def test_a_keys_rules_refuse_before_anything_is_claimed(
    chain: DevChain, private_service: str, sqlite_url: str, new_payer: Callable[..., str]
) -> None:
    requirements = make_requirements(chain)
    rules = KeyRules(
        pay_to=(requirements.pay_to,), assets=(chain.asset,), min_amount=1_000, settles_per_minute=1
    )
    _id, key = await _create_key(sqlite_url, "public caller", rules)
    elsewhere = make_requirements(chain, pay_to=ATTACKER)
    tiny = make_requirements(chain, amount=999)
    sent_before = relayer_nonce(chain)

    to_elsewhere = await _post(
        private_service, "/settle", sign_payment(new_payer(), elsewhere), elsewhere, key=key
    )
    too_small = await _post(private_service, "/settle", sign_payment(new_payer(), tiny), tiny, key=key)
    refused_verify = await _post(private_service, "/verify", sign_payment(new_payer(), tiny), tiny, key=key)
    assert await claim_rows(sqlite_url) == []
    assert relayer_nonce(chain) == sent_before
    first = await _post(
        private_service, "/settle", sign_payment(new_payer(), requirements), requirements, key=key
    )
    too_soon = await _post(
        private_service, "/settle", sign_payment(new_payer(), requirements), requirements, key=key
    )

    assert to_elsewhere.json()["errorReason"] == "invalid_exact_evm_payload_recipient_mismatch"
    assert too_small.json()["errorReason"] == "invalid_payment_requirements"
    assert refused_verify.json()["isValid"] is False
    assert first.json()["success"] is True
    assert too_soon.status_code == 429 and too_soon.json()["success"] is False
    assert len(await claim_rows(sqlite_url)) == 1
    assert await _door_refusals(private_service) == {"pay_to": 1, "min_amount": 2, "rate": 1}


async def test_a_key_is_never_logged(
    chain: DevChain,
    private_service: str,
    sqlite_url: str,
    new_payer: Callable[..., str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    _id, key = await _create_key(sqlite_url, "merchant")
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)

    await _post(private_service, "/settle", payload, requirements, key=key, idempotency_key="k")
    await _post(private_service, "/settle", payload, requirements, key=key[:-1] + "B")

    secret = key.rsplit("_", 1)[1]
    assert secret[:8] not in caplog.text


async def test_the_http_client_presents_its_key_and_reads_a_refusal_as_an_answer(
    chain: DevChain, private_service: str, sqlite_url: str, new_payer: Callable[..., str]
) -> None:
    _id, key = await _create_key(sqlite_url, "merchant")
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)
    member, stranger = (
        HttpFacilitatorClient(private_service, api_key=key),
        HttpFacilitatorClient(private_service),
    )
    try:
        refused = await stranger.settle(payload, requirements, idempotency_key="k")
        not_verified = await stranger.verify(payload, requirements)
        settled = await member.settle(payload, requirements, idempotency_key="k")
        status = await member.settlement_status(payload, requirements)
    finally:
        await member.aclose()
        await stranger.aclose()

    assert (refused.success, refused.error_reason) == (False, "invalid_payload")
    assert "keys create" in (refused.error_message or "")
    assert not_verified.is_valid is False
    assert settled.success and status == settled


async def test_fifty_wrong_keys_are_throttled_and_the_right_key_still_settles(
    chain: DevChain, private_service: str, sqlite_url: str, new_payer: Callable[..., str]
) -> None:
    _id, key = await _create_key(sqlite_url, "merchant")
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)
    sent_before = relayer_nonce(chain)
    wrong = [key[:-6] + f"{n:06d}" for n in range(50)]

    answers = [
        await _post(private_service, "/settle" if n % 2 else "/verify", payload, requirements, key=guess)
        for n, guess in enumerate(wrong)
    ]
    no_key = await _post(private_service, "/settle", payload, requirements)  # no guess: never 429
    elsewhere = await _post(
        private_service, "/settle", payload, requirements, key=wrong[0], source="127.0.0.9"
    )
    assert await claim_rows(sqlite_url) == []
    assert relayer_nonce(chain) == sent_before
    settled = await _post(private_service, "/settle", payload, requirements, key=key, idempotency_key="k")

    assert [answer.status_code for answer in answers] == [401] * 10 + [429] * 40
    throttled = answers[-1]
    assert 1 <= int(throttled.headers["retry-after"]) <= 300
    assert throttled.json()["success"] is False and throttled.json()["errorReason"] == "invalid_payload"
    assert "too many wrong API keys" in throttled.json()["errorMessage"]
    assert answers[-2].json()["isValid"] is False and "retry-after" in answers[-2].headers
    assert (no_key.status_code, elsewhere.status_code) == (401, 401)
    assert settled.status_code == 200 and settled.json()["success"] is True
    assert await _door_refusals(private_service) == {"unknown_key": 11, "throttled": 40, "no_key": 1}

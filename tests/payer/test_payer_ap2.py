"""Paying with AP2 mandates (§20.3 to §20.6): the payer against the real merchant, on anvil and SQLite.

The merchant's tenant `acme` takes mandates its trusted surface issued (10 cents a task); `strict` requires
them. The user's open payment mandate allows 30 cents: three tasks are paid, the fourth is refused by the
payer itself before anything is signed. A second payer with its own record of the same open mandate is
refused by the merchant's record instead. A checkout that fails its checks is refused before anything is
signed, and no mandate or key reaches a log line.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from eth_account import Account

from a2a_x402.devchain import DevChain
from a2a_x402.extension import AP2_CHECKOUT_ARTIFACT_ID, Ap2ErrorCode
from a2a_x402.payer import (
    CardError,
    CheckoutInvalidError,
    MandateConstraintError,
    MandatesNotSupportedError,
    MandatesRefusedError,
    MandatesRequiredError,
    OpenMandates,
    PaymentPolicy,
    PaymentStage,
    StageKind,
    UnresolvedConstraintError,
)
from tests.fixtures.ap2 import issue_open_mandates, new_key
from tests.fixtures.commands import assert_no_secret
from tests.fixtures.merchant import DEFAULT_PAY_TO, RunningMerchant
from tests.merchant.ap2.shop import rows

from .ap2_shop import BUDGET, JSON, PRICE, TEXT, Edit, Wire, connect

pytest.importorskip(
    "ap2.sdk.mandate",
    reason="the AP2 SDK is not installed (scripts/setup installs it from ../shared/peers/ap2)",
)
pytestmark = pytest.mark.timeout(90)


def balance(chain: DevChain, key: str) -> int:
    return chain.balance_of(Account.from_key(key).address)


async def test_three_tasks_are_paid_within_the_budget_and_the_fourth_is_refused_before_signing(
    shop: RunningMerchant, chain: DevChain, user_key: Any, wire: Wire
) -> None:
    key = chain.new_payer()
    before = balance(chain, key)
    opened = issue_open_mandates(user_key, new_key(), BUDGET, now=int(time.time()))
    async with connect(shop, key, wire, mandates=opened) as payer:
        for paid in range(1, 4):
            result = await payer.pay(TEXT)
            assert result.ap2_mandates is not None and result.ap2_receipts is not None
            assert result.transaction is not None and result.settled == PRICE
            assert AP2_CHECKOUT_ARTIFACT_ID not in [a.artifact_id for a in result.artifacts]
            assert AP2_CHECKOUT_ARTIFACT_ID in [a.artifact_id for a in result.task.artifacts]
            assert [a.name for a in result.artifacts] == ["text-stats"]
            assert (opened.spent, opened.uses) == (10 * paid, paid)
        presented = len(wire.payments())
        stages: list[PaymentStage] = []
        with pytest.raises(MandateConstraintError) as refused:
            await payer.pay(TEXT, on_stage=stages.append)
    assert refused.value.constraint == "payment.budget" and not refused.value.signed
    assert "budget of 30 (30 spent)" in str(refused.value)
    assert StageKind.PAYMENT_SIGNED not in [s.kind for s in stages]
    assert len(wire.payments()) == presented == 3  # nothing of the fourth was sent
    assert (opened.spent, opened.uses) == (30, 3)
    assert balance(chain, key) == before - 3 * PRICE
    uses = await rows(shop.database_url, "ap2_mandate_uses")
    assert sorted(u.amount for u in uses) == [10, 10, 10]


async def test_the_merchants_own_budget_refusal_is_a_typed_error(
    shop: RunningMerchant, chain: DevChain, user_key: Any, wire: Wire
) -> None:
    opened = issue_open_mandates(user_key, new_key(), BUDGET, now=int(time.time()))
    async with connect(shop, chain.new_payer(), wire, mandates=opened) as first:
        for _ in range(3):
            await first.pay(TEXT)
    # Another agent holding the same open mandate, with a record of its own that knows nothing of them.
    shared = OpenMandates(checkout=opened.checkout, payment=opened.payment, agent_key=opened.agent_key)
    key = chain.new_payer()
    before = balance(chain, key)
    async with connect(shop, key, wire, mandates=shared) as second:
        with pytest.raises(MandatesRefusedError) as refused:
            await second.pay(TEXT)
    assert type(refused.value) is MandatesRefusedError
    assert refused.value.code == "mandates_refused" and refused.value.signed
    assert refused.value.ap2_error == Ap2ErrorCode.INVALID_MANDATE
    assert refused.value.task_id is not None
    assert balance(chain, key) == before
    # The merchant's error receipts, signed with the tenant's key, say the mandates were not used: the payer
    # gives the use back (without them it would keep it counted).
    assert refused.value.receipts is not None
    assert shared.spent == 0
    assert len(await rows(shop.database_url, "ap2_mandate_uses")) == 3


def _b64(data: JSON) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def _claims(jwt: str) -> JSON:
    segment = jwt.split(".")[1]
    claims: JSON = json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    return claims


def _task_of(body: JSON) -> JSON | None:
    result = body.get("result", body)
    task = result.get("task") if isinstance(result, dict) else None
    return task if isinstance(task, dict) else None


def _edit_checkout(change: Callable[[str], str]) -> Edit:
    """An edit of every answer carrying the checkout artifact: its JWT replaced by ``change(jwt)``."""

    def edit(_request: httpx.Request, body: JSON) -> JSON | None:
        task = _task_of(body)
        for artifact in task.get("artifacts", []) if task else []:
            if artifact["artifactId"] == AP2_CHECKOUT_ARTIFACT_ID:
                data = artifact["parts"][0]["data"]
                data["ap2.checkout_jwt"] = change(data["ap2.checkout_jwt"])
        return body

    return edit


def _tampered(jwt: str) -> str:
    header, _, signature = jwt.split(".")
    claims = _claims(jwt)
    claims["x402"]["accepts"][0]["amount"] = "1"
    return f"{header}.{_b64(claims)}.{signature}"


def _other_jwks(_request: httpx.Request, body: JSON) -> JSON | None:
    if "keys" not in body:
        return None
    # The same kid, another key: the checkout's signature cannot verify with it.
    return {"keys": [dict(json.loads(new_key(k["kid"]).export_public()), alg="ES256") for k in body["keys"]]}


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (_edit_checkout(_tampered), "signature does not verify"),
        (_edit_checkout(lambda jwt: jwt.rsplit(".", 1)[0] + ".AAAA"), "signature does not verify"),
        (_other_jwks, "signature does not verify"),
    ],
    ids=["tampered-claims", "bad-signature", "another-key"],
)
async def test_a_checkout_that_does_not_verify_is_refused_before_anything_is_signed(
    shop: RunningMerchant, chain: DevChain, user_key: Any, wire: Wire, edit: Edit, says: str
) -> None:
    opened = issue_open_mandates(user_key, new_key(), BUDGET, now=int(time.time()))
    wire.edit = edit
    stages: list[PaymentStage] = []
    async with connect(shop, chain.new_payer(), wire, mandates=opened) as payer:
        with pytest.raises(CheckoutInvalidError) as refused:
            await payer.pay(TEXT, on_stage=stages.append)
    assert says in str(refused.value) and not refused.value.signed
    assert refused.value.code == "ap2_checkout_invalid"
    assert StageKind.PAYMENT_SIGNED not in [s.kind for s in stages]
    assert wire.payments() == [] and (opened.spent, opened.uses) == (0, 0)


def _other_payee(claims: JSON) -> None:
    claims["x402"]["accepts"][0]["payTo"] = DEFAULT_PAY_TO


def _other_merchant(claims: JSON) -> None:
    claims["merchant"] = {"id": "other.example", "name": "Another merchant"}


def _other_total(claims: JSON) -> None:
    claims["totals"] = [{"type": "total", "amount": 1}]


def _other_offer(claims: JSON) -> None:
    claims["id"] = "0" * 32


def _expired(claims: JSON) -> None:
    claims["exp"] = int(time.time()) - 3600


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (_other_payee, "x402 claim is not the terms"),
        (_other_merchant, "merchant is not the one the card declares"),
        (_other_total, "price rule fails"),
        (_other_offer, "id is not the offerId"),
        (_expired, "has expired"),
    ],
)
async def test_a_checkout_the_tenant_signed_that_fails_a_check_is_refused(
    shop: RunningMerchant,
    chain: DevChain,
    user_key: Any,
    wire: Wire,
    tmp_path: Path,
    change: Callable[[JSON], None],
    says: str,
) -> None:
    from a2a_x402.merchant.ap2 import load_checkout_keys

    keys = load_checkout_keys([tmp_path / "acme.pem"])

    def resigned(jwt: str) -> str:
        claims = _claims(jwt)
        change(claims)
        return keys.sign(claims)

    opened = issue_open_mandates(user_key, new_key(), BUDGET, now=int(time.time()))
    wire.edit = _edit_checkout(resigned)
    async with connect(shop, chain.new_payer(), wire, mandates=opened) as payer:
        with pytest.raises(CheckoutInvalidError, match=says):
            await payer.pay(TEXT)
    assert wire.payments() == [] and opened.uses == 0


async def test_a_checkout_replayed_from_another_task_is_refused(
    shop: RunningMerchant, chain: DevChain, user_key: Any, wire: Wire
) -> None:
    earlier: list[str] = []

    def replay(jwt: str) -> str:
        earlier.append(jwt)
        return earlier[0]

    opened = issue_open_mandates(user_key, new_key(), BUDGET, now=int(time.time()))
    async with connect(shop, chain.new_payer(), wire, mandates=opened) as payer:
        await payer.pay(TEXT)
        wire.edit = _edit_checkout(replay)
        await payer.pay(TEXT)  # records its own checkout first: paid as it is
        with pytest.raises(CheckoutInvalidError, match="id is not the offerId"):
            await payer.pay(TEXT)  # carries the second task's checkout
    assert len(wire.payments()) == 2 and opened.uses == 2


async def test_a_jwks_url_off_the_cards_origin_is_refused_when_paying_with_mandates(
    shop: RunningMerchant, chain: DevChain, user_key: Any, wire: Wire
) -> None:
    def elsewhere(_request: httpx.Request, body: JSON) -> JSON | None:
        for extension in body.get("capabilities", {}).get("extensions", []):
            for entry in extension.get("params", {}).get("ap2", []):
                entry["jwksUrl"] = "https://keys.elsewhere.example/jwks.json"
        return body

    wire.edit = elsewhere
    opened = issue_open_mandates(user_key, new_key(), BUDGET, now=int(time.time()))
    with pytest.raises(CardError, match="not on the card's origin"):
        async with connect(shop, chain.new_payer(), wire, mandates=opened):
            pass
    async with connect(shop, chain.new_payer(), wire) as payer:  # without mandates: standalone
        assert (await payer.pay(TEXT)).transaction is not None


async def test_a_tenant_requiring_mandates_is_not_paid_without_them_and_others_are_paid_standalone(
    shop: RunningMerchant, chain: DevChain, wire: Wire
) -> None:
    key = chain.new_payer()
    async with connect(shop, key, wire, tenant="strict") as strict:
        with pytest.raises(MandatesRequiredError) as refused:
            await strict.pay(TEXT)
    assert not refused.value.signed and wire.payments() == []
    async with connect(shop, key, wire) as acme:
        result = await acme.pay(TEXT)
    assert result.transaction is not None and result.ap2_mandates is None
    [payment] = wire.payments()
    assert b"ap2.payment_mandate" not in payment.content


def _refuse_mandates(code: str) -> Callable[[httpx.Request], JSON | None]:
    """A refusal carrying ``code`` of a payment with mandates, in the merchant's place (it never sees it)."""

    def answer(request: httpx.Request) -> JSON | None:
        if b"ap2.payment_mandate" not in request.content:
            return None
        info = {
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": "INVALID_PARAMS",
            "domain": "a2a-protocol.org",
            "metadata": {"ap2Error": code},
        }
        return {
            "jsonrpc": "2.0",
            "id": json.loads(request.content)["id"],
            "error": {"code": -32602, "message": f"refused ({code})", "data": [info]},
        }

    return answer


@pytest.mark.parametrize(
    ("code", "error"),
    [
        (Ap2ErrorCode.UNRESOLVED_CONSTRAINT, UnresolvedConstraintError),
        (Ap2ErrorCode.MANDATES_NOT_SUPPORTED, MandatesNotSupportedError),
    ],
)
async def test_refusal_codes_surface_as_their_typed_errors(
    shop: RunningMerchant, chain: DevChain, user_key: Any, wire: Wire, code: str, error: type[Exception]
) -> None:
    opened = issue_open_mandates(user_key, new_key(), BUDGET, now=int(time.time()))
    wire.answer = _refuse_mandates(code)
    async with connect(shop, chain.new_payer(), wire, mandates=opened) as payer:
        with pytest.raises(error) as refused:
            await payer.pay(TEXT)
    assert getattr(refused.value, "ap2_error", None) == code
    assert len(wire.payments()) == 1


async def test_mandates_not_supported_falls_back_to_the_same_payment_when_the_policy_allows(
    shop: RunningMerchant, chain: DevChain, user_key: Any, wire: Wire
) -> None:
    opened = issue_open_mandates(user_key, new_key(), BUDGET, now=int(time.time()))
    wire.answer = _refuse_mandates(Ap2ErrorCode.MANDATES_NOT_SUPPORTED)
    policy = PaymentPolicy(ap2_standalone_fallback=True)
    async with connect(shop, chain.new_payer(), wire, mandates=opened, policy=policy) as payer:
        result = await payer.pay(TEXT)
    assert result.transaction is not None and result.ap2_mandates is None
    with_mandates, without = wire.payments()
    assert b"ap2.payment_mandate" in with_mandates.content and b"ap2.payment_mandate" not in without.content
    signature = json.loads(with_mandates.content)["params"]["message"]["metadata"]
    assert signature == json.loads(without.content)["params"]["message"]["metadata"]  # the same payment
    assert (opened.spent, opened.uses) == (0, 0)  # it went outside the mandates


@pytest.fixture
def debug_logs(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    with caplog.at_level(logging.DEBUG):
        yield caplog


async def test_no_mandate_or_key_reaches_a_log_line_at_debug(
    shop: RunningMerchant, chain: DevChain, user_key: Any, wire: Wire, debug_logs: pytest.LogCaptureFixture
) -> None:
    opened = issue_open_mandates(user_key, new_key(), BUDGET, now=int(time.time()))
    async with connect(shop, chain.new_payer(), wire, mandates=opened) as payer:
        result = await payer.pay(TEXT)
        for _ in range(2):
            await payer.pay(TEXT)
        with pytest.raises(MandateConstraintError):
            await payer.pay(TEXT)
    assert result.ap2_mandates is not None
    # The merchant is served in this process: its server's lines (the a2a-sdk server logs whole request
    # bodies at DEBUG) are the merchant's business, not the payer's.
    server = ("a2a.server", "a2a_x402.merchant", "uvicorn", "sqlalchemy", "aiosqlite")
    text = "\n".join(r.getMessage() for r in debug_logs.records if not r.name.startswith(server))
    assert "signed payment" in text  # the payer's own lines were captured
    secrets = {
        "agent key": opened.agent_key["d"],
        "open checkout mandate": opened.checkout.split("~")[0].rsplit(".", 1)[1],
        "open payment mandate": opened.payment.split("~")[0].rsplit(".", 1)[1],
        "closed checkout mandate": result.ap2_mandates.checkout_mandate.rstrip("~").rsplit(".", 1)[1],
        "closed payment mandate": result.ap2_mandates.payment_mandate.rstrip("~").rsplit(".", 1)[1],
    }
    assert_no_secret([text, repr(opened)], secrets)


async def test_a_streamed_payment_carries_the_mandates_too(
    shop: RunningMerchant, chain: DevChain, user_key: Any, wire: Wire
) -> None:
    opened = issue_open_mandates(user_key, new_key(), BUDGET, now=int(time.time()))
    async with connect(shop, chain.new_payer(), wire, mandates=opened) as payer:
        stages = [stage async for stage in payer.pay_streaming(TEXT)]
    result = stages[-1].result
    assert result is not None and result.ap2_mandates is not None and result.transaction is not None
    assert [a.name for a in result.artifacts] == ["text-stats"]
    [payment] = wire.payments()
    assert b"ap2.payment_mandate" in payment.content and b"SendStreamingMessage" in payment.content
    assert (opened.spent, opened.uses) == (10, 1)

"""How a round whose AP2 mandates were accepted ends, served for real (§20.5, §20.6): a payment the
facilitator refuses (a payer without funds gets fresh terms, an authorization already used on chain fails
the task) releases its use, so that the open mandate's budget is not consumed and a later payment within
it is paid; the status ending the round carries error receipts with the extension object's error, and the
round's evidence keeps the receipts its status carried (never logged). Refused
mandates carry the same `ap2Error` and error receipts on JSON-RPC, HTTP+JSON and gRPC, and mandates sent to
a tenant without an `ap2` entry (or to a merchant without any) are refused `mandates_not_supported`,
changing nothing. A round's stored checkout that cannot be read is the merchant's error, never a
traceback, and changes nothing either.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from typing import Any

import pytest
import sqlalchemy as sa
from eth_account import Account

from a2a_x402.devchain import DevChain
from a2a_x402.extension import (
    Ap2ErrorCode,
    Ap2Mandates,
    PaymentErrorCode,
    PaymentFailedData,
    PaymentRequiredData,
)
from a2a_x402.merchant.ap2 import Ap2EvidenceStore
from a2a_x402.payer import OpenMandates, present_mandates, sign_payment
from a2a_x402.storage import create_engine, write_transaction
from tests.facilitator.payments import cancel_authorization
from tests.fixtures.a2a_errors import A2ACallError
from tests.fixtures.ap2 import MERCHANT, OpenTerms, issue_open_mandates, new_key
from tests.fixtures.merchant import (
    MerchantStarter,
    MerchantWire,
    RunningMerchant,
    ledger_entries,
    offered_terms,
    payment_data,
    payment_message,
    user_message,
)
from tests.merchant.ap2.shop import JSON, rows, status_receipts, verified_receipts, with_mandates
from tests.merchant.ap2.test_books import pieces
from tests.merchant.ap2.test_offer import checkout_of

pytest.importorskip(
    "ap2.sdk.mandate",
    reason="the AP2 SDK is not installed (scripts/setup installs it from ../shared/peers/ap2)",
)

_JWS_HEADER = "eyJhbGci"  # base64url of '{"alg'
# A budget of 15 cents for acme's price of 10: one payment fits, and only while no other one counts.
ONE_PAYMENT = OpenTerms(budget=0.15)


def _present(opened: OpenMandates, task: JSON, payload: JSON, *, now: int) -> Ap2Mandates:
    """The closed mandates for `payload` in the round `task` offers. A fresh copy of the payer's own
    record each time: the payer is not what is tested here, the merchant's record is."""
    checkout = checkout_of(task)
    [entry] = offered_terms(task).accepts
    assert checkout is not None and entry.extra is not None
    return present_mandates(replace(opened), checkout, payload, MERCHANT.id, entry.extra["offerId"], now=now)


async def _pay(
    wire: MerchantWire, task: JSON, payer_key: str, opened: OpenMandates, now: int
) -> tuple[JSON, Ap2Mandates]:
    """Pay the round `task` offers, with mandates: the task answered, and the mandates sent."""
    [entry] = offered_terms(task).accepts
    payload = sign_payment(payer_key, entry).to_json_dict()
    mandates = _present(opened, task, payload, now=now)
    answer = await wire.send(with_mandates(payment_message(task["id"], payload), mandates))
    return answer["task"], mandates


async def _uses(database_url: str) -> list[tuple[str, int, str]]:
    return sorted((use.task_id, use.round, use.state) for use in await rows(database_url, "ap2_mandate_uses"))


async def kept_receipts(database_url: str, task_id: str, round_: int) -> tuple[str | None, str | None]:
    """The receipts round `round_` of `task_id`'s AP2 evidence holds, the round's evidence required."""
    engine = create_engine(database_url)
    try:
        kept = await Ap2EvidenceStore(engine).evidence(task_id, round_)
    finally:
        await engine.dispose()
    assert kept is not None
    return kept.checkout_receipt, kept.payment_receipt


async def test_a_payer_without_funds_gets_fresh_terms_and_its_use_is_released(
    shop: RunningMerchant, chain: DevChain, user_key: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="a2a_x402")
    now = int(time.time())
    opened = issue_open_mandates(user_key, new_key(), ONE_PAYMENT, now=now)
    broke = "0x" + Account.create().key.hex().removeprefix("0x")  # never funded
    async with shop.http() as http:
        wire = MerchantWire(http, "jsonrpc", "acme")
        task = (await wire.send(user_message()))["task"]
        first_offer = offered_terms(task).accepts[0].extra

        # Accepted mandates, a payment the facilitator refuses: fresh terms (T4), with error receipts.
        fresh, mandates = await _pay(wire, task, broke, opened, now)
        assert fresh["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        data = payment_data(fresh)
        assert isinstance(data, PaymentRequiredData)
        assert data.error is PaymentErrorCode.INSUFFICIENT_FUNDS
        receipts = error_receipts = status_receipts(fresh)
        assert receipts is not None
        checkout_receipt, payment_receipt = await verified_receipts(http, "acme", *receipts, mandates)
        assert checkout_receipt["status"] == payment_receipt["status"] == "Error"
        assert checkout_receipt["error"] == payment_receipt["error"] == "INSUFFICIENT_FUNDS"
        assert first_offer is not None and payment_receipt["payment_id"] == first_offer["offerId"]
        assert await _uses(shop.database_url) == [(task["id"], 1, "released")]

        # The budget was not used: a funded payer pays the fresh terms under the same open mandate, which
        # the first use would have exhausted had it still counted.
        done, paid_with = await _pay(wire, fresh, chain.new_payer(), opened, now)
        assert done["status"]["state"] == "TASK_STATE_COMPLETED"
        receipts = success_receipts = status_receipts(done)
        assert receipts is not None
        _, payment_receipt = await verified_receipts(http, "acme", *receipts, paid_with)
        assert payment_receipt["status"] == "Success"
    assert await _uses(shop.database_url) == [(task["id"], 1, "released"), (task["id"], 2, "confirmed")]
    assert len(await ledger_entries(shop.database_url, tenant="acme")) == 1
    # Each round's evidence keeps the receipts its status carried, as sent; none of them is logged.
    assert await kept_receipts(shop.database_url, task["id"], 1) == error_receipts
    assert await kept_receipts(shop.database_url, task["id"], 2) == success_receipts
    # The merchant's own lines (the SDK's DEBUG request bodies are held back when it is served).
    ours = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("a2a_x402"))
    assert "payment for task" in ours and "not kept as evidence" not in ours
    signatures = {receipt.rsplit(".", 1)[-1] for receipt in (*error_receipts, *success_receipts)}
    secret = {*error_receipts, *success_receipts, *signatures, *pieces([mandates, paid_with])}
    assert not [piece[:12] for piece in secret if piece in ours]


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_an_authorization_already_used_on_chain_fails_the_task_and_releases_its_use(
    shop: RunningMerchant, chain: DevChain, user_key: Any
) -> None:
    now = int(time.time())
    opened = issue_open_mandates(user_key, new_key(), ONE_PAYMENT, now=now)
    payer_key = chain.new_payer()
    async with shop.http() as http:
        wire = MerchantWire(http, "jsonrpc", "acme")
        task = (await wire.send(user_message()))["task"]
        [entry] = offered_terms(task).accepts
        payload = sign_payment(payer_key, entry).to_json_dict()
        cancel_authorization(chain, payer_key, payload["payload"]["authorization"]["nonce"])
        mandates = _present(opened, task, payload, now=now)
        failed = (await wire.send(with_mandates(payment_message(task["id"], payload), mandates)))["task"]
        assert failed["status"]["state"] == "TASK_STATE_FAILED"
        data = payment_data(failed)
        assert isinstance(data, PaymentFailedData) and data.error is PaymentErrorCode.DUPLICATE_NONCE
        receipts = status_receipts(failed)
        assert receipts is not None
        _, payment_receipt = await verified_receipts(http, "acme", *receipts, mandates)
        assert (payment_receipt["status"], payment_receipt["error"]) == ("Error", "DUPLICATE_NONCE")
        assert await kept_receipts(shop.database_url, task["id"], 1) == receipts
        assert await _uses(shop.database_url) == [(task["id"], 1, "released")]

        # Another task, within the budget the failed one did not use.
        other = (await wire.send(user_message()))["task"]
        done, _ = await _pay(wire, other, payer_key, opened, now)
        assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert await _uses(shop.database_url) == sorted(
        [(task["id"], 1, "released"), (other["id"], 1, "confirmed")]
    )


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
@pytest.mark.parametrize("binding", ["jsonrpc", "rest", "grpc"])
async def test_every_binding_refuses_mandates_alike(
    shop: RunningMerchant, chain: DevChain, user_key: Any, binding: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    now = int(time.time())
    payer_key = chain.new_payer()
    opened = issue_open_mandates(user_key, new_key(), OpenTerms(), now=now)
    async with shop.http() as http:
        wire = MerchantWire(http, binding, "acme")
        task = (await wire.send(user_message()))["task"]
        [entry] = offered_terms(task).accepts
        paid = sign_payment(payer_key, entry).to_json_dict()
        other = sign_payment(payer_key, entry).to_json_dict()
        mandates = _present(opened, task, other, now=now)  # for another payment: payload_hash differs
        with pytest.raises(A2ACallError) as refused:
            await wire.send(with_mandates(payment_message(task["id"], paid), mandates))
        error = refused.value
        assert error.reason == "INVALID_PARAMS" and "invalid_mandate" in error.message
        assert error.metadata["ap2Error"] == "invalid_mandate"
        _, payment_receipt = await verified_receipts(
            http, "acme", error.metadata["ap2CheckoutReceipt"], error.metadata["ap2PaymentReceipt"], mandates
        )
        assert payment_receipt["error"] == "invalid_mandate"
        # No mandate's claims, disclosure or signature in what the client reads, nor in any log line (the
        # JWS headers, the same for every mandate of an issuer, say nothing).
        said = error.message + repr(error.metadata)
        for token in (mandates.checkout_mandate, mandates.payment_mandate):
            for piece in token.replace("~", ".").split("."):
                if len(piece) >= 40 and not piece.startswith(_JWS_HEADER):
                    assert piece not in said and piece not in caplog.text

        # A tenant without an `ap2` entry refuses mandates: ignored, their constraints would go unenforced.
        plain = MerchantWire(http, binding)
        task = (await plain.send(user_message()))["task"]
        [entry] = offered_terms(task).accepts
        payload = sign_payment(payer_key, entry).to_json_dict()
        with pytest.raises(A2ACallError) as refused:
            await plain.send(with_mandates(payment_message(task["id"], payload), mandates))
        assert refused.value.metadata == {"ap2Error": "mandates_not_supported"}
        assert (await plain.get_task(task["id"]))["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert await rows(shop.database_url, "payment_presentations") == []
    assert await rows(shop.database_url, "ap2_mandate_uses") == []
    assert await ledger_entries(shop.database_url) == []


async def test_a_merchant_without_any_ap2_tenant_refuses_mandates_and_changes_nothing(
    start_merchant: MerchantStarter, sqlite_url: str, chain: DevChain
) -> None:
    merchant = start_merchant(sqlite_url)
    payer_key = chain.new_payer()
    before = chain.balance_of(Account.from_key(payer_key).address)
    # Any mandates part, read or not: the refusal needs only its keys.
    mandates = Ap2Mandates(checkout_mandate="a.b.c~", payment_mandate="d.e.f~")
    async with merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc")
        task = (await wire.send(user_message()))["task"]
        [entry] = offered_terms(task).accepts
        message = with_mandates(payment_message(task["id"], sign_payment(payer_key, entry)), mandates)
        with pytest.raises(A2ACallError) as refused:
            await wire.send(message)
        assert refused.value.metadata == {"ap2Error": Ap2ErrorCode.MANDATES_NOT_SUPPORTED.value}
        assert "mandates_not_supported" in refused.value.message
        assert (await wire.get_task(task["id"]))["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"

        # The same payment without them is paid.
        done = (await wire.send(payment_message(task["id"], sign_payment(payer_key, entry))))["task"]
        assert done["status"]["state"] == "TASK_STATE_COMPLETED"
        assert status_receipts(done) is None
    assert chain.balance_of(Account.from_key(payer_key).address) == before - entry.amount


@pytest.mark.error_logs("why: the round's stored checkout is corrupted on purpose")
@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_a_corrupt_stored_checkout_is_the_merchants_error_and_changes_nothing(
    shop: RunningMerchant, chain: DevChain, user_key: Any
) -> None:
    now = int(time.time())
    opened = issue_open_mandates(user_key, new_key(), OpenTerms(), now=now)
    async with shop.http() as http:
        wire = MerchantWire(http, "jsonrpc", "acme")
        task = (await wire.send(user_message()))["task"]
        [entry] = offered_terms(task).accepts
        payload = sign_payment(chain.new_payer(), entry).to_json_dict()
        mandates = _present(opened, task, payload, now=now)
        engine = create_engine(shop.database_url)
        try:
            async with write_transaction(engine) as connection:
                await connection.execute(
                    sa.text("UPDATE payment_offers SET checkout_jwt = 'h.bm90IGpzb24.s' WHERE task_id = :t"),
                    {"t": task["id"]},
                )
        finally:
            await engine.dispose()
        with pytest.raises(A2ACallError) as failed:
            await wire.send(with_mandates(payment_message(task["id"], payload), mandates))
        assert failed.value.rpc_code == -32603
        assert "checkout cannot be read" in failed.value.message and "Traceback" not in failed.value.message
        assert (await wire.get_task(task["id"]))["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert await rows(shop.database_url, "payment_presentations") == []
    assert await rows(shop.database_url, "ap2_mandate_uses") == []

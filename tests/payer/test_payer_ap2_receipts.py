"""The merchant's AP2 receipts as the payer reads them (§20.6), against the real merchant on anvil and SQLite.

The merchant's own receipts are where §20.6 puts them: a data part of the status that ends the round, and
the `ErrorInfo` metadata of a refusal. Receipts that verify are returned with the result (success) or the
error (refusal), and resolve the payer's own usage record: success keeps the use, an error receipt gives it
back. Receipts signed by another key (put in the merchant's answer in place of its own, with the tenant's
key or a stranger's through `a2a_x402.merchant.ap2.success_receipts`/`error_receipts`) are not used.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from a2a_x402.extension import EXTENSION_URI, Ap2ErrorCode, Ap2Receipts
from a2a_x402.payer import InsufficientFundsError, MandatesRefusedError
from tests.fixtures.ap2 import MERCHANT, issue_open_mandates, new_key
from tests.fixtures.merchant import RunningMerchant
from tests.merchant.ap2.support import write_key

from .ap2_shop import BUDGET, JSON, TEXT, Edit, Wire, connect

pytest.importorskip(
    "ap2.sdk.mandate",
    reason="the AP2 SDK is not installed (scripts/setup installs it from ../shared/peers/ap2)",
)
pytestmark = pytest.mark.timeout(90)


def _b64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _keys(path: Path) -> Any:
    from a2a_x402.merchant.ap2 import load_checkout_keys

    return load_checkout_keys([path])


def _subject(request: httpx.Request, task_id: str) -> Any:
    from a2a_x402.merchant.ap2 import ReceiptSubject, mandate_reference

    message = json.loads(request.content)["params"]["message"]
    [mandates] = [part["data"] for part in message["parts"] if "data" in part]
    offer_id = message["metadata"][EXTENSION_URI]["payload"]["accepted"]["extra"]["offerId"]
    return ReceiptSubject(
        checkout_reference=mandate_reference(mandates["ap2.checkout_mandate"]),
        payment_reference=mandate_reference(mandates["ap2.payment_mandate"]),
        order_id=task_id,
        payment_id=offer_id,
    )


def _with_success_receipts(keys: Any, sent: list[Ap2Receipts]) -> Edit:
    """Success receipts signed with ``keys`` in place of the merchant's own on the completion of a payment
    with mandates."""
    from a2a_x402.merchant.ap2 import success_receipts

    def edit(request: httpx.Request, body: JSON) -> JSON | None:
        if b"ap2.payment_mandate" not in request.content:
            return None
        task = body["result"]["task"]
        status = task["status"]
        [receipt] = status["message"]["metadata"][EXTENSION_URI]["receipts"]
        receipts = success_receipts(
            keys,
            _subject(request, task["id"]),
            merchant=MERCHANT,
            transaction=receipt["transaction"],
            network=receipt["network"],
            now=int(time.time()),
        )
        sent.append(receipts)
        parts = [
            part for part in status["message"]["parts"] if "ap2.payment_receipt" not in part.get("data", {})
        ]
        assert len(parts) == len(status["message"]["parts"]) - 1  # the merchant's own receipts, replaced
        status["message"]["parts"] = [*parts, {"data": receipts.to_wire(), "mediaType": "application/json"}]
        return body

    return edit


async def test_success_receipts_that_verify_come_with_the_result(
    shop: RunningMerchant, chain: Any, user_key: Any, wire: Wire, tmp_path: Path
) -> None:
    # The merchant's own receipts first, then receipts the tenant's key signed put in their place.
    opened = issue_open_mandates(user_key, new_key(), BUDGET, now=int(time.time()))
    async with connect(shop, chain.new_payer(), wire, mandates=opened) as payer:
        result = await payer.pay(TEXT)
        assert result.ap2_receipts is not None and result.ap2_mandates is not None
        claims = json.loads(_b64url(result.ap2_receipts.payment_receipt.split(".")[1]))
        assert (claims["status"], claims["psp_confirmation_id"]) == ("Success", result.transaction)
        sent: list[Ap2Receipts] = []
        wire.edit = _with_success_receipts(_keys(tmp_path / "acme.pem"), sent)
        again = await payer.pay(TEXT)
    assert again.ap2_receipts == sent[0]
    assert (opened.spent, opened.uses) == (20, 2)


async def test_receipts_signed_by_another_key_are_not_used(
    shop: RunningMerchant,
    chain: Any,
    user_key: Any,
    wire: Wire,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    write_key(tmp_path / "stranger.pem")
    wire.edit = _with_success_receipts(_keys(tmp_path / "stranger.pem"), [])
    opened = issue_open_mandates(user_key, new_key(), BUDGET, now=int(time.time()))
    with caplog.at_level(logging.WARNING, logger="a2a_x402.payer"):
        async with connect(shop, chain.new_payer(), wire, mandates=opened) as payer:
            result = await payer.pay(TEXT)
    assert result.transaction is not None and result.ap2_receipts is None
    assert "AP2 receipts are not used" in caplog.text
    assert (opened.spent, opened.uses) == (10, 1)  # the task completed: the use stays


@pytest.mark.parametrize("signer", ["acme", "stranger"])
async def test_a_refusal_with_error_receipts_gives_the_use_back_only_when_they_verify(
    shop: RunningMerchant, chain: Any, user_key: Any, wire: Wire, tmp_path: Path, signer: str
) -> None:
    from a2a_x402.merchant.ap2 import error_receipts

    if signer == "stranger":
        write_key(tmp_path / "stranger.pem")
    keys = _keys(tmp_path / f"{signer}.pem")

    def refuse(request: httpx.Request) -> JSON | None:
        if b"ap2.payment_mandate" not in request.content:
            return None
        task_id = json.loads(request.content)["params"]["message"]["taskId"]
        receipts = error_receipts(
            keys,
            _subject(request, task_id),
            merchant=MERCHANT,
            error=Ap2ErrorCode.INVALID_MANDATE,
            description="the payment mandate's budget is exhausted",
            now=int(time.time()),
        )
        metadata = {
            "ap2Error": "invalid_mandate",
            "ap2CheckoutReceipt": receipts.checkout_receipt,
            "ap2PaymentReceipt": receipts.payment_receipt,
        }
        info = {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "INVALID_PARAMS"}
        error = {"code": -32602, "message": "refused", "data": [{**info, "metadata": metadata}]}
        return {"jsonrpc": "2.0", "id": json.loads(request.content)["id"], "error": error}

    wire.answer = refuse
    opened = issue_open_mandates(user_key, new_key(), BUDGET, now=int(time.time()))
    async with connect(shop, chain.new_payer(), wire, mandates=opened) as payer:
        with pytest.raises(MandatesRefusedError) as refused:
            await payer.pay(TEXT)
    assert refused.value.ap2_error == "invalid_mandate"
    if signer == "acme":
        assert refused.value.receipts is not None and opened.spent == 0
    else:
        assert refused.value.receipts is None and opened.spent == 10


def _without_receipts(request: httpx.Request, body: JSON) -> JSON | None:
    """The merchant's answer with the AP2 receipts part taken out of its status message."""
    task = body.get("result", {}).get("task")
    if not isinstance(task, dict) or "message" not in task.get("status", {}):
        return None
    message = task["status"]["message"]
    message["parts"] = [p for p in message["parts"] if "ap2.payment_receipt" not in p.get("data", {})]
    return body


@pytest.mark.parametrize("answer", ["with-receipts", "receipts-taken-out"])
async def test_fresh_terms_give_the_use_back_only_with_verified_error_receipts(
    shop: RunningMerchant, chain: Any, user_key: Any, wire: Wire, answer: str
) -> None:
    # A payer without funds: the merchant takes the mandates, its facilitator refuses the payment, and the
    # round ends with fresh terms. The merchant still holds the signed payment, so only its signed word
    # (error receipts that verify) gives the use back; a hostile merchant's bare fresh terms do not.
    if answer == "receipts-taken-out":
        wire.edit = _without_receipts
    opened = issue_open_mandates(user_key, new_key(), BUDGET, now=int(time.time()))
    async with connect(shop, chain.new_payer(0), wire, mandates=opened) as payer:
        with pytest.raises(InsufficientFundsError):
            await payer.pay(TEXT)
    assert wire.payments() != []  # the payment was signed and sent with its mandates
    assert (opened.spent, opened.uses) == ((0, 0) if answer == "with-receipts" else (10, 1))

"""The offers' read-only queries for the dashboard: what each task bought, and the payments refused,
failed or rejected with their reason (a page at a time, and counted), each only ever the tenant's own."""

from __future__ import annotations

from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.merchant.payments import OfferReader, OfferState, OfferStore

USDC = "0x036CbD53842c5426634e7929541eC2318f3dCF7e"
TERMS: dict[str, Any] = {
    "x402Version": 2,
    "resource": {"url": "http://shop/skills/text-stats", "description": "text-stats for 0.10 USDC"},
    "accepts": [{"amount": "100000", "asset": USDC, "network": "eip155:84532"}],
}


async def _offer(store: OfferStore, task_id: str, tenant: str = "acme", required: Any = None) -> None:
    assert await store.offer(
        task_id=task_id,
        tenant=tenant,
        context_id="ctx-1",
        skill="text-stats",
        dialect="v0.3",
        required=TERMS if required is None else required,
        request={"messageId": "m-1"},
    )


async def _take(store: OfferStore, task_id: str, nonce: str) -> None:
    assert await store.submit(
        task_id, round_=1, payer="0xPayer", nonce=nonce, payload={}, payload_hash="h", accepted={}
    )


async def test_what_each_task_bought_only_for_its_own_tenant(engine: AsyncEngine) -> None:
    store = OfferStore(engine)
    await _offer(store, "t-1")
    await _offer(store, "t-2", required={"x402Version": 1, "accepts": [{"description": "v1 words"}]})
    await _offer(store, "t-3", tenant="globex")
    await _offer(store, "t-4", required={"x402Version": 2, "resource": "not an object", "accepts": "x"})
    reader = OfferReader(engine)

    bought = await reader.purchases("acme", ["t-1", "t-2", "t-3", "t-4", "t-none"])

    assert set(bought) == {"t-1", "t-2", "t-4"}
    assert (bought["t-1"].skill, bought["t-1"].description) == ("text-stats", "text-stats for 0.10 USDC")
    assert bought["t-2"].description == "v1 words" and bought["t-4"].description == ""
    assert await reader.purchases("acme", []) == {}


async def test_refused_failed_and_rejected_payments_with_their_reason(engine: AsyncEngine) -> None:
    store = OfferStore(engine)
    for task_id in ("paid", "refused", "failed", "rejected", "open", "weird"):
        await _offer(store, task_id)
    await _offer(store, "globex-failed", tenant="globex")
    await _take(store, "refused", "0x01")
    assert await store.advance("refused", OfferState.OFFERED, error="INSUFFICIENT_FUNDS")
    await _take(store, "failed", "0x02")
    assert await store.advance("failed", OfferState.FAILED, error="INVALID_SIGNATURE")
    assert await store.advance("rejected", OfferState.REJECTED)
    await _take(store, "weird", "0x03")
    assert await store.advance("weird", OfferState.FAILED, error="SOMETHING_NEW")
    await _take(store, "globex-failed", "0x04")
    assert await store.advance("globex-failed", OfferState.FAILED, error="INVALID_SIGNATURE")
    reader = OfferReader(engine)

    unpaid = {attempt.task_id: attempt for attempt in await reader.unpaid("acme")}
    newest = await reader.unpaid("acme", limit=1)

    assert set(unpaid) == {"refused", "failed", "rejected", "weird"}
    assert unpaid["refused"].state is OfferState.OFFERED and unpaid["refused"].error == "INSUFFICIENT_FUNDS"
    assert unpaid["failed"].reason and unpaid["failed"].reason != "INVALID_SIGNATURE"
    assert unpaid["rejected"].error is None and "declined" in unpaid["rejected"].reason
    assert unpaid["weird"].reason == "SOMETHING_NEW"
    assert (unpaid["failed"].amount, unpaid["failed"].asset) == (100_000, USDC)
    assert [attempt.task_id for attempt in newest] == ["weird"]
    assert [attempt.task_id for attempt in await reader.unpaid("globex")] == ["globex-failed"]


async def test_walking_the_unpaid_pages_by_their_cursor_visits_each_once_and_they_are_counted(
    engine: AsyncEngine,
) -> None:
    store = OfferStore(engine)
    task_ids = [f"t-{index}" for index in range(7)]
    for index, task_id in enumerate(task_ids):
        await _offer(store, task_id)
        await _take(store, task_id, f"0x{index + 1:02x}")
        assert await store.advance(task_id, OfferState.FAILED, error="INVALID_SIGNATURE")
    await _offer(store, "open")  # offered, never refused: not listed
    await _offer(store, "globex", tenant="globex")
    assert await store.advance("globex", OfferState.REJECTED)
    reader = OfferReader(engine)

    newest_first = [attempt.task_id for attempt in await reader.unpaid("acme")]
    walked: list[str] = []
    after = None
    while True:
        page = await reader.unpaid("acme", limit=3, after=after)
        walked += [attempt.task_id for attempt in page]
        if len(page) < 3:
            break
        after = (page[-1].at, page[-1].task_id)

    assert sorted(newest_first) == task_ids and walked == newest_first
    assert await reader.unpaid_count("acme") == 7 and await reader.unpaid_count("globex") == 1
    assert await reader.unpaid_count("nobody") == 0

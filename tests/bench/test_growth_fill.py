"""The growth benchmark's bulk history writes the rows the ledger's own API writes: same columns, same
kinds of values (id shapes, EIP-55 addresses, lowercase hashes, UTC times), books that hold every
invariant, and balances the API goes on booking from."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta

import httpx
import pytest
import sqlalchemy as sa
from eth_account import Account
from eth_utils.address import to_checksum_address
from sqlalchemy.ext.asyncio import AsyncConnection

from a2a_x402.merchant.ledger import Ledger, SettlementBooking, check_invariants
from a2a_x402.merchant.webhooks import (
    DeliveryWorker,
    EndpointConfig,
    Outbox,
    WebhookEndpoints,
    generate_secret,
)
from a2a_x402.storage import create_engine
from bench._growth_fill import History, fill_history
from bench._growth_ops import Receiver
from tests.fixtures.deadlines import HANG_S

pytestmark = pytest.mark.postgres

_ID = re.compile(r"^[a-z]+_[0-9a-f]{28}$")
_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
_HASH = re.compile(r"^0x[0-9a-f]{64}$")
_ASSET = "0x036CbD53842c5426634e7929541eC2318f3dCF7e"
_TENANTS = (("acme", Account.create().address), ("zenith", Account.create().address))
_PAYERS = (Account.create().address, Account.create().address, Account.create().address)
_SETTLEMENTS = 60
_BULK_SEQUENCES = 2 * _SETTLEMENTS
_API_EVENTS = f"sequence > {_BULK_SEQUENCES}"
_API_DELIVERY = "event_id IN (SELECT id FROM webhook_events WHERE " + _API_EVENTS + ")"  # noqa: S608 - constants
_TABLES = (
    "ledger_entries",
    "ledger_lines",
    "ledger_accounts",
    "ledger_finalizations",
    "webhook_events",
    "webhook_deliveries",
    "webhook_attempts",
)


def _shape(column: str, value: object) -> str:
    """What kind of value `value` is, as far as a query or a reader can tell."""
    if value is None:
        return "null"
    if isinstance(value, datetime):
        return "utc" if value.utcoffset() == timedelta(0) else "not utc"
    if isinstance(value, str):
        if _UUID.match(value):
            return "uuid"
        if column == "id" or column.endswith("_id"):
            return "id" if _ID.match(value) else f"other id {value!r}"
        if _HASH.match(value):
            return "hash"
        if value.startswith("0x") and len(value) == 42:
            return "address" if to_checksum_address(value) == value else "unchecksummed address"
    return type(value).__name__


def _shapes(row: sa.RowMapping) -> dict[str, str]:
    # The lease token and worker name are the writer's own: the worker's random id, or the bench's name.
    return {column: _shape(column, value) for column, value in row.items() if column not in ("worker",)}


async def _one(connection: AsyncConnection, table: str, where: str) -> sa.RowMapping:
    query = f"SELECT * FROM {table} WHERE {where} LIMIT 1"  # noqa: S608 - this test's own names and conditions
    return (await connection.execute(sa.text(query))).mappings().one()


async def test_bulk_rows_are_shaped_like_booked_rows_and_hold_the_invariants(postgres_url: str) -> None:
    engine = create_engine(postgres_url)
    receiver = Receiver()
    url = await receiver.start()
    try:
        secret = generate_secret()
        await WebhookEndpoints(engine).sync(
            [EndpointConfig(tenant=name, url=url, secret=secret) for name, _ in _TENANTS]
        )
        day_start = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        history = History(
            settlements=_SETTLEMENTS,
            tenants=_TENANTS,
            payers=_PAYERS,
            chain_id=84532,
            network="eip155:84532",
            asset=_ASSET,
            relayer=Account.create().address,
            day_start=day_start,
            span_days=30,
            max_block=1_000,
        )
        await fill_history(engine, history, payloads=(b'{"type":"completed"}', b'{"type":"finalized"}'))
        async with engine.connect() as connection:
            bulk = {table: await _one(connection, table, "true") for table in _TABLES}
            bulk["ledger_accounts"] = await _one(connection, "ledger_accounts", "kind = 'payer'")
            bulk_revenue = await _one(connection, "ledger_accounts", "kind = 'revenue' AND tenant = 'acme'")

        # The same tenant and payer, booked, finalized and delivered through the API.
        ledger = Ledger(engine, Outbox(engine))
        entry = await ledger.book_settlement(
            SettlementBooking(
                tenant="acme",
                task_id=str(uuid.uuid4()),
                context_id=str(uuid.uuid4()),
                payer=_PAYERS[1],
                pay_to=_TENANTS[0][1],
                asset=_ASSET,
                network="eip155:84532",
                chain_id=84532,
                amount=12_345,
                nonce="0x" + "ab" * 32,
                tx_hash="0x" + "cd" * 32,
                block_number=1_001,
                settled_at=datetime.now(UTC),
            )
        )
        await ledger.mark_final(entry.id, confirmations=1)
        async with httpx.AsyncClient(timeout=HANG_S) as http:
            worker = DeliveryWorker(engine, http, allow_private_targets=True)
            while await worker.run_once():
                pass
        async with engine.connect() as connection:
            api = {
                "ledger_entries": await _one(connection, "ledger_entries", f"id = '{entry.id}'"),
                "ledger_lines": await _one(connection, "ledger_lines", f"entry_id = '{entry.id}'"),
                "ledger_accounts": await _one(
                    connection, "ledger_accounts", f"kind = 'payer' AND holder = '{_PAYERS[1]}'"
                ),
                "ledger_finalizations": await _one(
                    connection, "ledger_finalizations", f"entry_id = '{entry.id}'"
                ),
                "webhook_events": await _one(connection, "webhook_events", _API_EVENTS),
                "webhook_deliveries": await _one(connection, "webhook_deliveries", _API_DELIVERY),
                "webhook_attempts": await _one(
                    connection,
                    "webhook_attempts",
                    "delivery_id IN (SELECT id FROM webhook_deliveries WHERE " + _API_DELIVERY + ")",  # noqa: S608 - constants
                ),
            }
            revenue_after = await _one(connection, "ledger_accounts", "kind = 'revenue' AND tenant = 'acme'")

        for table in _TABLES:
            assert _shapes(bulk[table]) == _shapes(api[table]), table
        assert bulk["webhook_deliveries"]["status"] == api["webhook_deliveries"]["status"] == "delivered"
        assert bulk["ledger_entries"]["kind"] == api["ledger_entries"]["kind"] == "settlement"
        # The API booked on from the totals the bulk path wrote, and every line's running balance agrees.
        assert revenue_after["credits_posted"] == bulk_revenue["credits_posted"] + 12_345
        await check_invariants(engine)
    finally:
        await receiver.stop()
        await engine.dispose()

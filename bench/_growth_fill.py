"""Bulk history for the growth benchmark: a million booked settlements in minutes, on PostgreSQL.

Booking through `Ledger.book_settlement` costs a few milliseconds each, so a million would take most of an
hour. These statements write, in a handful of `INSERT ... SELECT`s, the rows the ledger's own API writes for
a booked and finalized settlement: the entry, its two lines with running balances, the accounts' totals,
the finalization, the two webhook events and their delivered deliveries and attempts, and the settled
claim and paid offer behind it. `tests/bench/test_growth_fill.py` holds the ledger's rows made this way
against rows booked through the API, column by column, and the books against `check_invariants`.

History is booked before the day the benchmark measures (`day_start`), in sequence order, at blocks below
`max_block`, so it never falls inside a statement window or the reconciler's lookback.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

__all__ = ["History", "fill_history"]


@dataclass(frozen=True, slots=True)
class History:
    """What to generate: `settlements` over `tenants` (name, payTo) and `payers` addresses, all EIP-55."""

    settlements: int
    tenants: tuple[tuple[str, str], ...]
    payers: tuple[str, ...]
    chain_id: int
    network: str
    asset: str
    relayer: str
    day_start: datetime
    span_days: int
    max_block: int
    amount_base: int = 10_000


# Ids follow `new_id`'s shape: prefix, 12 hex digits of Unix milliseconds, 16 hex digits told apart by `n`.
def _id(prefix: str, time_column: str, n: str) -> str:
    return (
        f"'{prefix}_' || lpad(to_hex((extract(epoch FROM {time_column}) * 1000)::bigint), 12, '0')"
        f" || lpad(to_hex({n}), 16, '0')"
    )


def _hash(salt: str, n: str) -> str:
    return f"'0x' || encode(sha256(convert_to('{salt}' || {n}::text, 'UTF8')), 'hex')"


_ROWS = """
CREATE TEMP TABLE g_rows AS
SELECT i,
       t.name AS tenant,
       t.pay_to,
       p.address AS payer,
       (:amount_base + (i % 97) * 10)::numeric AS amount,
       2 * i - 1 AS seq,
       2 * i AS fin_seq,
       CAST(:day_start AS timestamptz)
         - make_interval(secs => ((:n - i)::bigint * :span_s) / :n + 1) AS booked_at,
       1 + ((i - 1)::bigint * :max_block) / :n AS block_number,
       md5('task' || i)::uuid::text AS task_id,
       md5('context' || i)::uuid::text AS context_id,
       {nonce} AS nonce,
       {tx_hash} AS tx_hash,
       {block_hash} AS block_hash
FROM generate_series(1, :n) AS i
JOIN g_tenants t ON t.idx = i % :tenant_count
JOIN g_payers p ON p.idx = (i / :tenant_count) % :payer_count
""".format(nonce=_hash("nonce", "i"), tx_hash=_hash("tx", "i"), block_hash=_hash("block", "i"))

_ACCOUNTS = """
CREATE TEMP TABLE g_accounts AS
SELECT {revenue_id} AS id, tenant, 'revenue' AS kind, '' AS holder, 'credit' AS normal_side,
       0::numeric AS debits, sum(amount) AS credits, min(booked_at) AS created_at
FROM g_rows GROUP BY tenant
UNION ALL
SELECT {payer_id} AS id, tenant, 'payer', payer, 'debit', sum(amount), 0::numeric, min(booked_at)
FROM g_rows GROUP BY tenant, payer
""".format(
    revenue_id=_id("acct", "min(booked_at)", "min(i)"),
    payer_id=_id("acct", "min(booked_at)", "min(i) + 4294967296"),
)

_STATEMENTS = (
    """
INSERT INTO ledger_accounts (id, tenant, network, asset, kind, holder, normal_side, debits_posted,
                             credits_posted, created_at)
SELECT id, tenant, :network, :asset, kind, holder, normal_side, debits, credits, created_at FROM g_accounts
""",
    """
INSERT INTO ledger_entries (id, sequence, tenant, kind, reverses_entry_id, reason, task_id, context_id, payer,
                            pay_to, asset, network, chain_id, nonce, amount, tx_hash, block_number,
                            effective_at, booked_at)
SELECT {entry_id}, seq, tenant, 'settlement', NULL, NULL, task_id, context_id, payer, pay_to, :asset,
       :network, :chain_id, nonce, amount, tx_hash, block_number, booked_at - interval '2 seconds', booked_at
FROM g_rows
""".format(entry_id=_id("je", "booked_at", "i")),
    """
INSERT INTO ledger_lines (id, entry_id, account_id, direction, amount, balance_after)
SELECT {debit_id}, {entry_id}, a.id, 'debit', r.amount,
       sum(r.amount) OVER (PARTITION BY r.tenant, r.payer ORDER BY r.seq)
FROM g_rows r JOIN g_accounts a ON a.tenant = r.tenant AND a.kind = 'payer' AND a.holder = r.payer
UNION ALL
SELECT {credit_id}, {entry_id}, a.id, 'credit', r.amount,
       sum(r.amount) OVER (PARTITION BY r.tenant ORDER BY r.seq)
FROM g_rows r JOIN g_accounts a ON a.tenant = r.tenant AND a.kind = 'revenue'
""".format(
        entry_id=_id("je", "r.booked_at", "r.i"),
        debit_id=_id("jl", "r.booked_at", "2 * r.i"),
        credit_id=_id("jl", "r.booked_at", "2 * r.i + 1"),
    ),
    """
INSERT INTO ledger_finalizations (id, entry_id, sequence, confirmations, finalized_at, recorded_at)
SELECT {fin_id}, {entry_id}, fin_seq, 1, booked_at + interval '10 seconds', booked_at + interval '10 seconds'
FROM g_rows
""".format(fin_id=_id("jf", "booked_at", "i"), entry_id=_id("je", "booked_at", "i")),
    "UPDATE ledger_sequence SET value = value + 2 * :n",
    """
INSERT INTO webhook_events (id, tenant, type, sequence, payload, created_at)
SELECT {booked_id}, tenant, 'settlement.completed', seq, CAST(:completed_payload AS bytea), booked_at
FROM g_rows
UNION ALL
SELECT {final_id}, tenant, 'settlement.finalized', fin_seq, CAST(:finalized_payload AS bytea),
       booked_at + interval '10 seconds'
FROM g_rows
""".format(
        booked_id=_id("evt", "booked_at", "2 * i"),
        final_id=_id("evt", "booked_at + interval '10 seconds'", "2 * i + 1"),
    ),
    """
INSERT INTO webhook_deliveries (id, event_id, endpoint_id, status, attempts, round_start, next_attempt_at,
                                lease_until, lease_token, last_status_code, last_error, delivered_at,
                                created_at, updated_at)
SELECT 'msg' || substr(e.id, 4), e.id, w.id, 'delivered', 1, 0, NULL, NULL, NULL, 200, NULL,
       e.created_at + interval '1 second', e.created_at, e.created_at + interval '1 second'
FROM webhook_events e JOIN webhook_endpoints w ON w.tenant = e.tenant
WHERE e.sequence <= 2 * :n + :sequence_before AND e.sequence > :sequence_before
""",
    """
INSERT INTO webhook_attempts (id, delivery_id, attempt, worker, started_at, latency_ms, status_code, error,
                              outcome, next_attempt_at)
SELECT 'att' || substr(d.id, 4), d.id, 1, 'bench', d.created_at, 3, 200, NULL, 'delivered', NULL
FROM webhook_deliveries d
""",
    """
INSERT INTO settlement_claims (id, chain_id, asset, payer, nonce, idempotency_key, payload_hash, network,
                               pay_to, amount, valid_before, state, attempt, lease_until, relayer,
                               relayer_nonce, tx_hash, raw_tx, block_number, block_hash, error_reason,
                               response, created_at, updated_at)
SELECT 'clm_' || md5('claim' || i), :chain_id, :asset, payer, nonce, 'a2a-task:' || task_id || ':' || 1,
       encode(sha256(convert_to('payload' || i, 'UTF8')), 'hex'), :network, pay_to, amount,
       (extract(epoch FROM booked_at)::bigint + 600)::numeric, 'succeeded', 1,
       booked_at + interval '60 seconds', :relayer, i - 1, tx_hash, NULL, block_number, block_hash, NULL,
       CAST(:claim_response AS json), booked_at - interval '1 second', booked_at
FROM g_rows
""",
    """
INSERT INTO payment_offers (task_id, tenant, context_id, skill, dialect, state, round, required, request,
                            payer, nonce, payload, payload_hash, accepted, receipts, held_artifacts, error,
                            created_at, updated_at, booked_at, told_at, taken_at)
SELECT task_id, tenant, context_id, 'text-stats', 'v0.3', 'paid', 1, CAST(:offer_required AS json),
       CAST(:offer_request AS json), payer, nonce, CAST(:offer_payload AS json),
       encode(sha256(convert_to('payload' || i, 'UTF8')), 'hex'), CAST(:offer_accepted AS json),
       CAST(:offer_receipts AS json), NULL, NULL, booked_at - interval '3 seconds', booked_at, booked_at,
       booked_at, booked_at - interval '2 seconds'
FROM g_rows
""",
)

# Placeholder documents for the JSON columns of claims and offers: the benchmark's queries never read them.
_DOCUMENTS = {
    "claim_response": '{"success": true}',
    "offer_required": '{"x402Version": 2, "accepts": []}',
    "offer_request": "{}",
    "offer_payload": '{"x402Version": 2}',
    "offer_accepted": "{}",
    "offer_receipts": "[]",
}


async def fill_history(engine: AsyncEngine, history: History, *, payloads: tuple[bytes, bytes]) -> None:
    """Write `history` into the migrated PostgreSQL database of `engine`, then ANALYZE it.

    `payloads` are the bodies stored for every settlement's `settlement.completed` and
    `settlement.finalized` events. Run it before anything else is booked, on a database whose tenants'
    webhook endpoints already exist (their deliveries are written as delivered).
    """
    if engine.dialect.name != "postgresql":
        raise ValueError("the bulk history is written with PostgreSQL's SQL; use a PostgreSQL database")
    parameters = {
        "n": history.settlements,
        "tenant_count": len(history.tenants),
        "payer_count": len(history.payers),
        "amount_base": history.amount_base,
        "day_start": history.day_start,
        "span_s": history.span_days * 86_400,
        "max_block": history.max_block,
        "chain_id": history.chain_id,
        "network": history.network,
        "asset": history.asset,
        "relayer": history.relayer,
        "completed_payload": payloads[0],
        "finalized_payload": payloads[1],
        **_DOCUMENTS,
    }
    async with engine.begin() as connection:
        await connection.execute(
            sa.text("CREATE TEMP TABLE g_tenants (idx int PRIMARY KEY, name text, pay_to text)")
        )
        await connection.execute(sa.text("CREATE TEMP TABLE g_payers (idx int PRIMARY KEY, address text)"))
        await connection.execute(
            sa.text("INSERT INTO g_tenants VALUES (:idx, :name, :pay_to)"),
            [{"idx": i, "name": name, "pay_to": pay_to} for i, (name, pay_to) in enumerate(history.tenants)],
        )
        await connection.execute(
            sa.text("INSERT INTO g_payers VALUES (:idx, :address)"),
            [{"idx": i, "address": address} for i, address in enumerate(history.payers)],
        )
        parameters["sequence_before"] = (
            await connection.execute(sa.text("SELECT value FROM ledger_sequence"))
        ).scalar_one()
        await connection.execute(sa.text(_ROWS), parameters)
        await connection.execute(sa.text(_ACCOUNTS), parameters)
        for statement in _STATEMENTS:
            text = sa.text(statement)
            wanted = {name: value for name, value in parameters.items() if f":{name}" in statement}
            await connection.execute(text, wanted)
    async with engine.connect() as connection:
        autocommit = await connection.execution_options(isolation_level="AUTOCOMMIT")
        await autocommit.execute(sa.text("ANALYZE"))

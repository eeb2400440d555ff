"""The claim table's migrations on SQLite and PostgreSQL: f0002 widens `valid_before` to every time the
wire allows (and beyond, to uint256), in numeric order, while keeping the claims made before it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from a2a_x402 import migrations
from a2a_x402.facilitator._claims import ClaimKey, ClaimStore, claims_table
from a2a_x402.storage import create_engine, normalize_url, upgrade_schema

ASSET = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
PAYER = "0x2BD786253040452c8aF28bb147C7E202361B98F2"
PAY_TO = "0xa0Ee7A142d267C1f36714E4a8F75612F20a79720"


def _alembic(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(Path(migrations.__file__).parent))
    config.set_main_option("sqlalchemy.url", normalize_url(url).replace("%", "%%"))
    return config


async def _claim(store: ClaimStore, nonce: str, valid_before: int) -> None:
    _, created = await store.claim(
        ClaimKey(84532, ASSET, PAYER, nonce),
        idempotency_key=None,
        payload_hash="0" * 64,
        network="eip155:84532",
        pay_to=PAY_TO,
        amount=1,
        valid_before=valid_before,
    )
    assert created


async def test_valid_before_holds_every_wire_time_and_f0002_keeps_older_claims(database_url: str) -> None:
    await asyncio.to_thread(command.downgrade, _alembic(database_url), "f0001")
    engine = create_engine(database_url)
    try:
        async with engine.begin() as connection:
            # f0001's columns: `token` came with f0007.
            columns = [c.name for c in claims_table.c if c.name not in ("valid_before", "token")]
            await connection.execute(
                sa.text(
                    f"INSERT INTO settlement_claims ({', '.join(columns)}, valid_before) "
                    "SELECT :id, 84532, :asset, :payer, :nonce, NULL, :hash, 'eip155:84532', :pay_to, "
                    "'1', 'claimed', 1, CURRENT_TIMESTAMP, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, "
                    "CURRENT_TIMESTAMP, CURRENT_TIMESTAMP, :valid_before"
                ),
                {
                    "id": "clm_old",
                    "asset": ASSET,
                    "payer": PAYER,
                    "nonce": "0x" + "01" * 32,
                    "hash": "0" * 64,
                    "pay_to": PAY_TO,
                    "valid_before": 1_796_000_000,
                },
            )
        await upgrade_schema(database_url)
        store = ClaimStore(engine)
        widest = {"0x" + "02" * 32: 2**63, "0x" + "03" * 32: 2**64 - 1, "0x" + "04" * 32: 2**256 - 1}
        for nonce, valid_before in widest.items():
            await _claim(store, nonce, valid_before)

        stored = {
            nonce: claim.valid_before
            for nonce in ["0x" + "01" * 32, *widest]
            if (claim := await store.by_key(ClaimKey(84532, ASSET, PAYER, nonce))) is not None
        }
        async with engine.connect() as connection:
            ordered = (
                await connection.execute(
                    sa.select(claims_table.c.nonce).order_by(claims_table.c.valid_before.desc())
                )
            ).scalars()
            ordered_nonces = list(ordered)
    finally:
        await engine.dispose()

    assert stored == {"0x" + "01" * 32: 1_796_000_000, **widest}
    assert ordered_nonces == [*reversed(widest), "0x" + "01" * 32]  # numeric order on both backends

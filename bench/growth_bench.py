"""Cost as the books grow: each everyday operation on a database holding a million booked settlements,
beside the same operation on an empty one, in the same run.

Run ``python -m bench.growth_bench`` (about ten minutes on two cores, most of it writing the history) or
with ``--quick`` (20,000 settlements, under a minute). Two PostgreSQL databases are migrated with
``x402-merchant db upgrade`` and given the same tenants (100, each with a webhook endpoint) and the same
bookings of the measured day; one also holds the history (`bench._growth_fill`): a million booked and
finalized settlements before that day, over the same tenants and 2,000 payers, with their webhook events,
deliveries, claims and offers. Rounds of the six operations (`bench._growth_ops`) then alternate between
the two databases; the first round warms up and is not counted. Each operation's target is a median at
most twice the empty database's. The summary goes to stdout and ``bench/results/growth-latest.md``; the
exit status is 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import sqlalchemy as sa
from eth_account import Account
from sqlalchemy.ext.asyncio import AsyncEngine

from a2a_x402.devchain import AnvilNode, DevChain, deploy_devchain
from a2a_x402.merchant.settings import MerchantSettings
from a2a_x402.merchant.tenants import Tenant, TenantRegistry
from a2a_x402.merchant.webhooks import EndpointConfig, WebhookEndpoints, generate_secret
from a2a_x402.storage import create_engine

from ._growth_fill import History, fill_history
from ._growth_ops import OPERATIONS, Books, Receiver, timed
from ._merchant_servers import POSTGRES_SERVER_URL, _migrate, _postgres_admin

TARGET_RATIO = 2.0
_LOOKBACK_BLOCKS = 200
# The history's blocks end this far below the reconciler's lookback, so no pass reads them.
_HISTORY_GAP_BLOCKS = 50
_SEED_BOOKINGS = 20
_RESULTS = Path(__file__).parent / "results" / "growth-latest.md"


@dataclass
class Timings:
    """Seconds per operation for one database."""

    samples: dict[str, list[float]] = field(default_factory=lambda: {name: [] for name in OPERATIONS})

    def median_ms(self, name: str) -> float:
        """The median of `name`'s samples, in milliseconds."""
        return statistics.median(self.samples[name]) * 1000


def _tenants(count: int) -> tuple[TenantRegistry, tuple[tuple[str, str], ...]]:
    pairs = tuple((f"t{i:03d}", Account.create().address) for i in range(count))
    registry = TenantRegistry([Tenant(id=name, pay_to=pay_to, price=10_000) for name, pay_to in pairs])
    return registry, pairs


def _settings(database_url: str, chain: DevChain) -> MerchantSettings:
    return MerchantSettings(
        database_url=database_url,
        rpc_url=chain.rpc_url,
        network=chain.network,
        asset=chain.asset,
        relayer_key=chain.relayer_key,
        pay_to=Account.create().address,
        reconcile_lookback_blocks=_LOOKBACK_BLOCKS,
    )


async def _payloads(engine: AsyncEngine) -> tuple[bytes, bytes]:
    """A stored `settlement.completed` and `settlement.finalized` body, for the history to repeat."""
    async with engine.connect() as connection:
        rows = {
            row.type: bytes(row.payload)
            for row in await connection.execute(
                sa.text("SELECT DISTINCT ON (type) type, payload FROM webhook_events")
            )
        }
    return rows["settlement.completed"], rows["settlement.finalized"]


async def _subscribe(books: Books, names: list[str], endpoint_url: str) -> None:
    """One webhook endpoint per tenant."""
    secret = generate_secret()
    await WebhookEndpoints(books.engine).sync(
        [EndpointConfig(tenant=name, url=endpoint_url, secret=secret) for name in names]
    )


async def _seed(books: Books) -> None:
    """The measured day's bookings (finalized), everything delivered."""
    for _ in range(_SEED_BOOKINGS):
        await books.book_final(books.measured_tenant, at=books.day_start)
    await books.deliver_all()


async def _run(chain: DevChain, args: argparse.Namespace, workdir: Path) -> tuple[Timings, Timings, float]:
    registry, pairs = _tenants(args.tenants)
    names = [name for name, _ in pairs]
    day_start = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    receiver = Receiver()
    endpoint_url = await receiver.start()
    made: list[str] = []
    books: list[Books] = []
    try:
        for label in ("empty", "full"):
            name = f"x402_growth_{label}_{uuid.uuid4().hex[:10]}"
            await _postgres_admin(f'CREATE DATABASE "{name}"')
            made.append(name)
            url = f"{POSTGRES_SERVER_URL}/{name}"
            await asyncio.to_thread(_migrate, url, workdir)
            engine = create_engine(url)
            books.append(
                Books(
                    label=label,
                    engine=engine,
                    settings=_settings(url, chain),
                    tenants=registry,
                    measured_tenant=names[0],
                    booking_tenant=names[-1],
                    day_start=day_start,
                )
            )
        empty, full = books
        await _subscribe(empty, names, endpoint_url)
        await _seed(empty)
        head = int(chain.rpc.call("eth_blockNumber"), 16)
        history = History(
            settlements=args.settlements,
            tenants=pairs,
            payers=tuple(Account.create().address for _ in range(args.payers)),
            chain_id=chain.chain_id,
            network=chain.network,
            asset=chain.asset,
            relayer=Account.from_key(chain.relayer_key).address,
            day_start=day_start,
            span_days=365,
            max_block=head - _LOOKBACK_BLOCKS - _HISTORY_GAP_BLOCKS,
        )
        await _subscribe(full, names, endpoint_url)
        started = time.monotonic()
        await fill_history(full.engine, history, payloads=await _payloads(empty.engine))
        fill_s = time.monotonic() - started
        await _seed(full)
        timings = {"empty": Timings(), "full": Timings()}
        steps = {b.label: b.operations() for b in books}
        for round_ in range(args.rounds + 1):
            order = books if round_ % 2 == 0 else books[::-1]
            for b in order:
                for name, operation, after in steps[b.label]:
                    elapsed = await timed(operation)
                    if round_ > 0:
                        timings[b.label].samples[name].append(elapsed)
                    if after is not None:
                        await after()
        return timings["empty"], timings["full"], fill_s
    finally:
        for b in books:
            await b.aclose()
            await b.engine.dispose()
        await receiver.stop()
        for name in made:
            await _postgres_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _report(args: argparse.Namespace, empty: Timings, full: Timings, fill_s: float) -> tuple[str, bool]:
    lines = [
        f"# Growth: {args.settlements:,} booked settlements over {args.tenants} tenants vs an empty database",
        "",
        f"- Machine: {platform.machine()}, {os.cpu_count()} CPUs, load average {os.getloadavg()}; "
        f"Python {platform.python_version()}; PostgreSQL at {POSTGRES_SERVER_URL}",
        f"- History written in {fill_s:.0f} s; {args.rounds} rounds per database after one warm-up round",
        "",
        "| operation | empty: median ms | full: median ms | full / empty | target ≤ 2x |",
        "|---|---:|---:|---:|---|",
    ]
    met = True
    for name in OPERATIONS:
        ratio = full.median_ms(name) / empty.median_ms(name)
        ok = ratio <= TARGET_RATIO
        met &= ok
        lines.append(
            f"| {name} | {empty.median_ms(name):.2f} | {full.median_ms(name):.2f} | {ratio:.2f} | "
            f"{'met' if ok else 'MISSED'} |"
        )
    return "\n".join(lines) + "\n", met


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; 0 when every operation met its target."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="20,000 settlements and 5 rounds")
    parser.add_argument("--settlements", type=int, default=1_000_000)
    parser.add_argument("--tenants", type=int, default=100)
    parser.add_argument("--payers", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    if args.quick:
        args.settlements, args.rounds = 20_000, 5
    with AnvilNode() as node, tempfile.TemporaryDirectory() as workdir:
        chain = deploy_devchain(node.client, payers=1)
        # A chain longer than the reconciler's lookback, so the history's blocks can lie below it.
        chain.rpc.call("anvil_mine", [hex(_LOOKBACK_BLOCKS + _HISTORY_GAP_BLOCKS + 250)])
        empty, full, fill_s = asyncio.run(_run(chain, args, Path(workdir)))
    report, met = _report(args, empty, full, fill_s)
    print(report)
    _RESULTS.parent.mkdir(exist_ok=True)
    _RESULTS.write_text(report)
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())

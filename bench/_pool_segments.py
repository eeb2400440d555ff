"""The relayer-pool benchmark's segments: settling through leased keys in one or two processes on one
PostgreSQL database, and a base-fee spike in the middle of a batch of settlements."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import sqlalchemy as sa
from eth_account import Account

from a2a_x402.devchain import ANVIL_DEV_KEYS
from a2a_x402.facilitator import Facilitator, FacilitatorSettings
from a2a_x402.facilitator.wire import PaymentPayload, PaymentRequirements
from a2a_x402.storage import create_engine

from ._chain import BenchChain
from ._http import run_requests
from ._payloads import AMOUNT_ATOMIC, to_requests
from ._servers import ServerProcess, free_port, spawn_server

__all__ = ["PoolSegment", "SpikeSegment", "measure_pool", "measure_spike", "pool_keys"]

_BIN = Path(sys.executable).parent
_LEASES_TIMEOUT_S = 30.0


def pool_keys(count: int) -> list[str]:
    """`count` anvil dev keys for the pool (account 0 deploys, payers are fresh keys)."""
    return list(ANVIL_DEV_KEYS[1 : 1 + count])


@dataclass(frozen=True, slots=True)
class PoolSegment:
    """Settlements through `processes` processes holding `keys_each` keys each."""

    label: str
    processes: int
    keys_each: int
    count: int
    ok: int
    elapsed_s: float
    failures: Counter[str]
    problems: tuple[str, ...]

    @property
    def rate(self) -> float:
        """Successful settlements per second."""
        return self.ok / self.elapsed_s if self.elapsed_s > 0 else 0.0


def _start(
    chain: BenchChain, database_url: str, keys: Sequence[str], keys_each: int, workdir: Path, tag: str
) -> ServerProcess:
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("X402_")},
        "X402_RPC_URL": chain.chain.rpc_url,
        "X402_NETWORK": chain.chain.network,
        "X402_RELAYER_KEYS": ",".join(keys),
        "X402_RELAYER_MAX_KEYS": str(keys_each),
        "X402_DATABASE_URL": database_url,
        "X402_PORT": str(port),
        # The load sends no API key: the facilitator runs public (a key adds one indexed read a request).
        "X402_FACILITATOR_PUBLIC": "true",
    }
    command = [str(_BIN / "x402-facilitator"), "serve", "--port", str(port)]
    return spawn_server(f"pool[{tag}]", command, env, workdir, workdir / f"pool-{tag}.log", port)


async def _held(database_url: str) -> int:
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            return int(
                (await connection.execute(sa.text("SELECT count(*) FROM relayer_leases"))).scalar_one()
            )
    finally:
        await engine.dispose()


def _wait_for_leases(database_url: str, expected: int) -> None:
    deadline = time.monotonic() + _LEASES_TIMEOUT_S
    while asyncio.run(_held(database_url)) < expected:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the servers did not take {expected} relayer keys in time")
        time.sleep(0.1)


def _mined(chain: BenchChain, addresses: Sequence[str]) -> int:
    return sum(int(chain.chain.rpc.call("eth_getTransactionCount", [a, "latest"]), 16) for a in addresses)


def measure_pool(
    chain: BenchChain,
    database_url: str,
    *,
    processes: int,
    keys_each: int,
    payloads: Sequence[PaymentPayload],
    requirements: PaymentRequirements,
    concurrency: int,
    workdir: Path,
) -> PoolSegment:
    """Start the servers on a fresh database, settle every payload once over them, and check the chain."""
    keys = pool_keys(processes * keys_each)
    addresses = [Account.from_key(key).address for key in keys]
    servers: list[ServerProcess] = []
    try:
        for i in range(processes):
            tag = f"{processes}x{keys_each}-{i}"
            servers.append(_start(chain, database_url, keys, keys_each, workdir, tag))
            # One after another, so each takes its own share of the keys.
            _wait_for_leases(database_url, (i + 1) * keys_each)
        requests = to_requests(*servers[0].target, "/settle", payloads, requirements)
        balance, mined = chain.chain.balance_of(chain.pay_to), _mined(chain, addresses)
        answers, elapsed = asyncio.run(
            run_requests([s.target for s in servers], requests, concurrency=concurrency)
        )
    finally:
        for server in servers:
            server.stop()
    bodies = [
        orjson.loads(a.body) if a.status == 200 else {"errorReason": f"http_{a.status}"} for a in answers
    ]
    ok = sum(1 for body in bodies if body.get("success"))
    failures = Counter(str(body.get("errorReason")) for body in bodies if not body.get("success"))
    problems = []
    received = chain.chain.balance_of(chain.pay_to) - balance
    if received != ok * AMOUNT_ATOMIC:
        problems.append(f"payee received {received}, expected {ok * AMOUNT_ATOMIC}")
    if (sent := _mined(chain, addresses) - mined) != ok:
        problems.append(f"the keys mined {sent} transactions for {ok} settlements")
    hashes = [body["transaction"] for body in bodies if body.get("success")]
    if len(set(hashes)) != len(hashes):
        problems.append("a transaction hash answered twice")
    label = (
        f"{processes} process{'es' if processes > 1 else ''} x {keys_each} key{'s' if keys_each > 1 else ''}"
    )
    return PoolSegment(label, processes, keys_each, len(payloads), ok, elapsed, failures, tuple(problems))


@dataclass(frozen=True, slots=True)
class SpikeSegment:
    """A batch of settlements caught by a base-fee spike, with fee bumping on or off."""

    label: str
    count: int
    ok: int
    transactions_sent: int
    mined_after_s: tuple[float, ...]
    window_s: float
    base_fee_before: int
    base_fee_spiked: int


async def _spike(
    chain: BenchChain,
    settings: FacilitatorSettings,
    payloads: Sequence[PaymentPayload],
    requirements: PaymentRequirements,
    *,
    window_s: float,
    block_time_s: float,
) -> tuple[int, int, list[float], int, int]:
    rpc = chain.chain.rpc

    async def call(method: str, *params: object) -> Any:
        # The dev chain's client blocks: off the loop, so the facilitator in this loop keeps running.
        return await asyncio.to_thread(rpc.call, method, list(params))

    before = int((await call("eth_getBlockByNumber", "pending", False))["baseFeePerGas"], 16)
    facilitator = await Facilitator.open(settings)
    try:
        await call("evm_setAutomine", False)
        relayer = facilitator.relayer_address
        settles = [asyncio.ensure_future(facilitator.settle(p, requirements)) for p in payloads]
        while True:
            pending_count = int(await call("eth_getTransactionCount", relayer, "pending"), 16)
            if pending_count - int(await call("eth_getTransactionCount", relayer, "latest"), 16) >= len(
                payloads
            ):
                break
            await asyncio.sleep(0.05)
        pending = (await call("txpool_content"))["pending"]
        highest = max(int(tx["maxFeePerGas"], 16) for txs in pending.values() for tx in txs.values())
        spiked = 3 * highest
        started = time.monotonic()
        mined_after: dict[int, float] = {}
        for i, settle in enumerate(settles):
            settle.add_done_callback(_stamp(mined_after, i, started))
        # A sustained spike: every block of the window is priced at three times the batch's fee cap.
        while time.monotonic() - started < window_s and not all(s.done() for s in settles):
            await call("anvil_setNextBlockBaseFeePerGas", hex(spiked))
            await asyncio.sleep(block_time_s)
            await call("evm_mine")
        succeeded = [i for i, s in enumerate(settles) if s.done() and s.result().success]
        for settle in settles:
            settle.cancel()
        await asyncio.gather(*settles, return_exceptions=True)
        times = [mined_after[i] for i in succeeded]
        return len(succeeded), len(payloads) + facilitator.replacements_sent, times, before, spiked
    finally:
        await call("anvil_setNextBlockBaseFeePerGas", hex(before))
        await call("evm_setAutomine", True)
        await facilitator.aclose()


def _stamp(into: dict[int, float], index: int, started: float) -> Callable[[object], None]:
    """A done-callback noting when settle `index` ended, in seconds after `started`."""

    def stamp(_: object) -> None:
        into.setdefault(index, time.monotonic() - started)

    return stamp


def measure_spike(
    chain: BenchChain,
    database_url: str,
    *,
    bump: bool,
    payloads: Sequence[PaymentPayload],
    requirements: PaymentRequirements,
    window_s: float,
    block_time_s: float = 1.0,
) -> SpikeSegment:
    """Settle `payloads` with mining off, spike the base fee, then mine a block every `block_time_s`."""
    settings = FacilitatorSettings(
        rpc_url=chain.chain.rpc_url,
        network=chain.chain.network,
        relayer_key=chain.chain.relayer_key,
        database_url=database_url,
        receipt_timeout_s=window_s + 30,
        fee_bump_after_s=2.0 if bump else 3600.0,
    )
    ok, sent, times, before, spiked = asyncio.run(
        _spike(chain, settings, payloads, requirements, window_s=window_s, block_time_s=block_time_s)
    )
    label = "fee bumping on" if bump else "fee bumping off"
    return SpikeSegment(label, len(payloads), ok, sent, tuple(sorted(times)), window_s, before, spiked)

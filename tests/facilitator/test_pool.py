"""The relayer pool across real processes on one PostgreSQL database: keys leased to one process at a time,
settlements spread over a process's keys, no nonce ever used twice, and a SIGKILLed holder's keys taken
over after the lease, its in-flight transactions accounted for before the taker sends its own."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa
from eth_account import Account

from a2a_x402.devchain import ANVIL_DEV_KEYS, DevChain
from a2a_x402.facilitator import AUTHORIZATION_USED_TOPIC
from a2a_x402.payer import sign_payment
from a2a_x402.storage import create_engine
from tests.fixtures.deadlines import HANG_S, wait_until
from tests.fixtures.facilitator import PAY_TO, make_requirements
from tests.fixtures.facilitator_processes import facilitator_processes

from .payments import claim_rows, tx_count

FOUR_KEYS = ANVIL_DEV_KEYS[1:5]
RELAYERS = [Account.from_key(key).address for key in FOUR_KEYS]
# Short leases keep the takeover test quick; renewals come every third of it.
LEASE_S = 3.0


def _pool_env(**extra: str) -> dict[str, str]:
    return {"X402_RELAYER_KEYS": ",".join(FOUR_KEYS), "X402_RELAYER_LEASE_S": str(LEASE_S), **extra}


def _body(payload: Any, requirements: Any) -> dict[str, Any]:
    return {
        "x402Version": 2,
        "paymentPayload": payload.to_json_dict(),
        "paymentRequirements": requirements.to_json_dict(),
    }


async def _leases(database_url: str) -> dict[str, str]:
    """Relayer address -> holder, as the database has them."""
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            rows = (await connection.execute(sa.text("SELECT relayer, holder FROM relayer_leases"))).all()
    finally:
        await engine.dispose()
    return {row.relayer: row.holder for row in rows}


def _authorizations_used(chain: DevChain, from_block: int) -> Counter[tuple[str, str]]:
    """(payer, nonce) of every `AuthorizationUsed` log of the token since `from_block`, counted."""
    logs = chain.rpc.call(
        "eth_getLogs",
        [
            {
                "address": chain.asset,
                "fromBlock": hex(from_block),
                "toBlock": "latest",
                "topics": [AUTHORIZATION_USED_TOPIC],
            }
        ],
    )
    return Counter(("0x" + log["topics"][1][-40:], log["topics"][2]) for log in logs)


def _nonces_gap_free(chain: DevChain, rows: list[dict[str, Any]], before: dict[str, int]) -> None:
    """Each relayer's settlements carry its nonces from `before` on, each once and none skipped."""
    by_relayer: dict[str, list[int]] = {}
    for row in rows:
        by_relayer.setdefault(row["relayer"], []).append(row["relayer_nonce"])
    for relayer, nonces in by_relayer.items():
        assert sorted(nonces) == list(range(before[relayer], tx_count(chain, relayer))), relayer


async def test_two_processes_with_four_keys_settle_on_distinct_keys_each_authorization_once(
    chain: DevChain, postgres_url: str, new_payer: Callable[..., str], tmp_path: Path
) -> None:
    requirements = make_requirements(chain)
    singles = [sign_payment(new_payer(), requirements) for _ in range(24)]
    doubles = [sign_payment(new_payer(), requirements) for _ in range(8)]
    first_block = int(chain.rpc.call("eth_blockNumber"), 16) + 1
    before = {relayer: tx_count(chain, relayer) for relayer in RELAYERS}
    payee_before = chain.balance_of(PAY_TO)

    async with facilitator_processes(chain, tmp_path) as processes:
        first = await processes.serve(postgres_url, **_pool_env(X402_RELAYER_MAX_KEYS="2"))
        second = await processes.serve(postgres_url, **_pool_env(X402_RELAYER_MAX_KEYS="2"))
        urls = [first.url, second.url]
        async with httpx.AsyncClient(timeout=HANG_S, limits=httpx.Limits(max_connections=100)) as client:
            posts = [
                client.post(urls[i % 2] + "/settle", json=_body(payload, requirements))
                for i, payload in enumerate(singles)
            ]
            # The same authorization at both processes at once.
            posts += [
                client.post(url + "/settle", json=_body(payload, requirements))
                for payload in doubles
                for url in urls
            ]
            responses = await asyncio.gather(*posts)
        leases = await _leases(postgres_url)

    assert {r.status_code for r in responses} == {200}
    answers = [r.json() for r in responses]
    successes = [a for a in answers if a["success"]]
    refusals = [a for a in answers if not a["success"]]
    assert len(successes) == len(singles) + len(doubles), refusals
    assert {a["errorReason"] for a in refusals} == {"duplicate_settlement"}
    assert len(refusals) == len(doubles)
    # Each process held two keys of its own.
    assert sorted(Counter(leases.values()).values()) == [2, 2] and set(leases) == set(RELAYERS)
    used = _authorizations_used(chain, first_block)
    expected = {
        (p.payload.authorization.from_address.lower(), p.payload.authorization.nonce)
        for p in singles + doubles
    }
    assert set(used) == expected and set(used.values()) == {1}
    assert chain.balance_of(PAY_TO) == payee_before + len(expected) * requirements.amount
    rows = await claim_rows(postgres_url)
    assert {row["state"] for row in rows} == {"succeeded"} and len(rows) == len(expected)
    # Settlements spread over every key, and no nonce was used twice or skipped on any of them.
    assert {row["relayer"] for row in rows} == set(RELAYERS)
    _nonces_gap_free(chain, rows, before)


async def test_keys_of_a_killed_process_are_taken_over_after_the_lease_and_its_transactions_finished(
    chain: DevChain, postgres_url: str, new_payer: Callable[..., str], tmp_path: Path
) -> None:
    requirements = make_requirements(chain)
    in_flight = [sign_payment(new_payer(), requirements) for _ in range(6)]
    after = [sign_payment(new_payer(), requirements) for _ in range(6)]
    first_block = int(chain.rpc.call("eth_blockNumber"), 16) + 1
    before = {relayer: tx_count(chain, relayer) for relayer in RELAYERS}

    async with facilitator_processes(chain, tmp_path) as processes:
        doomed = await processes.serve(postgres_url, **_pool_env())
        chain.rpc.call("evm_setAutomine", [False])  # what it sends stays in the pool, unmined
        async with httpx.AsyncClient(timeout=HANG_S) as client:
            posts = [
                asyncio.ensure_future(client.post(doomed.url + "/settle", json=_body(p, requirements)))
                for p in in_flight
            ]

            async def all_broadcast() -> bool:
                rows = await claim_rows(postgres_url)
                return len(rows) == len(in_flight) and {row["state"] for row in rows} == {"broadcast"}

            await wait_until(all_broadcast, what="every settlement to be broadcast")
            await processes.wait_killed(doomed)
            await asyncio.gather(*posts, return_exceptions=True)
            killed_holds = await _leases(postgres_url)
            assert set(killed_holds) == set(RELAYERS)  # a SIGKILL gives nothing back: the leases run out

            taker = await processes.serve(postgres_url, **_pool_env())
            # The chain moves again; the taker finds the left-behind transactions mined and records them.
            chain.rpc.call("evm_setAutomine", [True])
            chain.rpc.call("evm_mine")

            async def left_behind_recorded() -> bool:
                return {row["state"] for row in await claim_rows(postgres_url)} == {"succeeded"}

            await wait_until(left_behind_recorded, what="the taker to record the left-behind settlements")
            responses = await asyncio.gather(
                *(client.post(taker.url + "/settle", json=_body(p, requirements)) for p in after)
            )
        leases = await _leases(postgres_url)

    answers = [r.json() for r in responses]
    assert all(a["success"] for a in answers), answers
    assert set(leases) == set(RELAYERS) and len(set(leases.values())) == 1
    assert set(leases.values()).isdisjoint(killed_holds.values())
    used = _authorizations_used(chain, first_block)
    expected = {
        (p.payload.authorization.from_address.lower(), p.payload.authorization.nonce)
        for p in in_flight + after
    }
    assert set(used) == expected and set(used.values()) == {1}
    rows = await claim_rows(postgres_url)
    assert {row["state"] for row in rows} == {"succeeded"} and len(rows) == len(expected)
    _nonces_gap_free(chain, rows, before)

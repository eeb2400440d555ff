"""`x402-facilitator` as real processes: `db upgrade` makes the claim store, two `serve` processes (a relayer
key each) sharing one PostgreSQL database settle an authorization exactly once (with one idempotency key,
every answer is the same), and `serve` refuses a node of another chain."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
from eth_account import Account

from a2a_x402.devchain import ANVIL_DEV_KEYS, DevChain
from a2a_x402.facilitator.wire import PaymentPayload
from a2a_x402.payer import sign_payment
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.facilitator import PAY_TO, make_requirements
from tests.fixtures.facilitator_processes import CLI, facilitator_process_env, facilitator_processes
from tests.fixtures.servers import free_port, idle_connection_answers

from .payments import claim_rows, tx_count

Serve = Callable[[str], Awaitable[str]]

# Two keys, one for each process (a key is leased to one process at a time).
TWO_KEYS = {"X402_RELAYER_KEYS": f"{ANVIL_DEV_KEYS[1]},{ANVIL_DEV_KEYS[2]}", "X402_RELAYER_MAX_KEYS": "1"}


def _env(chain: DevChain, database_url: str, **extra: str) -> dict[str, str]:
    return facilitator_process_env(chain, database_url, **extra)


@asynccontextmanager
async def _processes(chain: DevChain, tmp_path: Path) -> AsyncIterator[Serve]:
    async with facilitator_processes(chain, tmp_path) as processes:

        async def serve(database_url: str) -> str:
            return (await processes.serve(database_url, **TWO_KEYS)).url

        yield serve


async def test_db_upgrade_creates_the_claim_store(chain: DevChain, tmp_path: Path) -> None:
    database_url = f"sqlite+aiosqlite:///{tmp_path / 'claims.db'}"

    process = await asyncio.create_subprocess_exec(
        CLI, "db", "upgrade", env=_env(chain, database_url), stdout=asyncio.subprocess.PIPE, cwd=tmp_path
    )
    output, _ = await process.communicate()

    assert process.returncode == 0
    applied = output.decode().strip().removeprefix(f"facilitator schema in {database_url}: applied ")
    revisions, head = applied.split("; now at head ")
    assert revisions.split(", ")[0] == "f0001" and revisions.split(", ")[-1] == head
    assert await claim_rows(database_url) == []


async def test_two_processes_sharing_postgresql_settle_one_authorization_once(
    chain: DevChain, postgres_url: str, new_payer: Callable[..., str], tmp_path: Path
) -> None:
    requirements = make_requirements(chain)
    body, keyed_body = (
        {
            "x402Version": 2,
            "paymentPayload": sign_payment(new_payer(), requirements).to_json_dict(),
            "paymentRequirements": requirements.to_json_dict(),
        }
        for _ in range(2)
    )
    relayers = [Account.from_key(key).address for key in (ANVIL_DEV_KEYS[1], ANVIL_DEV_KEYS[2])]
    nonce_before, payee_before = sum(tx_count(chain, r) for r in relayers), chain.balance_of(PAY_TO)

    async with _processes(chain, tmp_path) as serve:
        urls = await asyncio.gather(serve(postgres_url), serve(postgres_url))
        async with httpx.AsyncClient(timeout=HANG_S, limits=httpx.Limits(max_connections=50)) as client:
            responses = await asyncio.gather(
                *(client.post(urls[i % 2] + "/settle", json=body) for i in range(50))
            )
            # Another authorization, every request carrying the same Idempotency-Key.
            keyed = await asyncio.gather(
                *(
                    client.post(
                        urls[i % 2] + "/settle", json=keyed_body, headers={"Idempotency-Key": "shared-1"}
                    )
                    for i in range(50)
                )
            )

    assert {r.status_code for r in keyed} == {200}
    assert len({r.content for r in keyed}) == 1, {r.content for r in keyed}
    keyed_answer = keyed[0].json()
    assert keyed_answer["success"] is True, keyed_answer
    answers = [r.json() for r in responses]
    [winner] = [a for a in answers if a["success"]]
    refusals = [a for a in answers if not a["success"]]
    assert {r.status_code for r in responses} == {200}
    assert {(a["errorReason"], a["transaction"]) for a in refusals} == {("duplicate_settlement", "")}
    assert {a["extensions"]["originalSettlement"]["transaction"] for a in refusals} == {winner["transaction"]}
    assert sum(tx_count(chain, r) for r in relayers) == nonce_before + 2
    assert chain.balance_of(PAY_TO) == payee_before + 2 * requirements.amount
    rows = await claim_rows(postgres_url)
    # A public caller's key is stored in the payer's namespace, hashed.
    keyed_payload = PaymentPayload.from_wire(keyed_body["paymentPayload"])
    keyed_payer = keyed_payload.payload.authorization.from_address.lower()
    stored_key = f"public:{keyed_payer}:{hashlib.sha256(b'shared-1').hexdigest()}"
    assert sorted((row["state"], row["idempotency_key"] or "") for row in rows) == [
        ("succeeded", ""),
        ("succeeded", stored_key),
    ]
    assert {row["tx_hash"] for row in rows} == {winner["transaction"], keyed_answer["transaction"]}


async def test_serve_refuses_a_node_serving_another_chain(
    chain: DevChain, sqlite_url: str, tmp_path: Path
) -> None:
    process = await asyncio.create_subprocess_exec(
        CLI,
        "serve",
        env=_env(chain, sqlite_url, X402_NETWORK="eip155:1", X402_PORT=str(free_port())),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        cwd=tmp_path,
    )
    _, errors = await asyncio.wait_for(process.communicate(), 30.0)

    assert process.returncode == 2
    assert errors.decode() == (
        f"x402-facilitator: not starting: network: the node serves chain {chain.chain_id} ({chain.network}), "
        "but X402_NETWORK is eip155:1\n"
    )


async def test_serve_keeps_an_idle_connection_open_longer_than_clients_reuse_it(
    chain: DevChain, sqlite_url: str, tmp_path: Path
) -> None:
    async with _processes(chain, tmp_path) as serve:
        url = await serve(sqlite_url)
        assert await idle_connection_answers(url)

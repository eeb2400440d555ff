"""Every script of `examples/` run as examples/README.md says, on the dev chain: each merchant example
CONFORMS by `x402-a2a-conformance`, the paying client pays under its cap (booked once) and refuses over it,
the remote facilitator example settles through `x402-facilitator serve`, and a missing setting is one line.

One chain for the module (`kit_chain`, rolled back after it); each merchant example is started once, as a
process of its own, and serves every test that needs it.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from eth_account import Account

from a2a_x402.devchain import DevChain
from tests.fixtures.commands import Answer, assert_mistake, assert_no_secret, run_command
from tests.fixtures.examples import EXAMPLES, ServedExample, example_env, serving_example
from tests.fixtures.facilitator_processes import facilitator_process_env, facilitator_processes
from tests.fixtures.merchant import ledger_entries, own_relayer_key
from tests.fixtures.servers import free_port

pytestmark = pytest.mark.timeout(600)

PAY_TO = "0xa0Ee7A142d267C1f36714E4a8F75612F20a79720"
"""paid_agent.py's payee in examples/README.md (anvil account 9)."""
DEFAULT_PAY_TO = "0x23618e81E3f5cdF7f54C3d65f7FBc0aBf5B21E8f"
"""two_tenants.py's default tenant's payee in examples/tenants.toml (anvil account 8)."""
REMOTE_PAY_TO = "0x14dC79964da2C08b23698B3D3cc7Ca32193d9955"
"""remote_facilitator.py's payee in examples/README.md (anvil account 7)."""
ACME_PAY_TO = "0x976EA74026E726554dB657fA54763abd0C3a0aa9"
"""acme's payee in examples/tenants.toml (anvil account 6)."""
COUNT_PRICE, ACME_COUNT_PRICE = 10_000, 20_000
"""count-words at the default tenant (two_tenants.py's PRICES) and at acme (tenants.toml's price)."""
CAP = 20_000
"""The paying client's cap: count-words is under it at both tenants, reverse (50000, 80000) over it."""
_KIT_TIMEOUT_S = 300.0


def database_in(folder: Path) -> str:
    """An SQLite database file in `folder` (the examples migrate it themselves)."""
    return f"sqlite+aiosqlite:///{folder / 'x402.db'}"


@pytest.fixture(scope="module")
def paid_agent(kit_chain: DevChain, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedExample]:
    """examples/paid_agent.py, settling in process with a relayer key of its own, gRPC on."""
    folder = tmp_path_factory.mktemp("paid_agent")
    env = example_env(
        kit_chain,
        X402_PAY_TO=PAY_TO,
        X402_DATABASE_URL=database_in(folder),
        X402_RELAYER_KEY=own_relayer_key(kit_chain),
        X402_GRPC_PORT=str(free_port()),
    )
    with serving_example("paid_agent.py", env, folder) as served:
        yield served


@pytest.fixture(scope="module")
def two_tenants(kit_chain: DevChain, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServedExample]:
    """examples/two_tenants.py with the tenants.toml beside it (no X402_PAY_TO, no X402_TENANTS_FILE)."""
    folder = tmp_path_factory.mktemp("two_tenants")
    env = example_env(
        kit_chain, X402_DATABASE_URL=database_in(folder), X402_RELAYER_KEY=own_relayer_key(kit_chain)
    )
    with serving_example("two_tenants.py", env, folder) as served:
        yield served


@pytest.fixture(scope="module")
async def remote_facilitator(
    kit_chain: DevChain, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[str, str]]:
    """`x402-facilitator serve` as README's terminal 2 runs it, refusing callers without a key: its URL and
    the merchant's key from `keys create`."""
    folder = tmp_path_factory.mktemp("facilitator")
    database = database_in(folder)
    env = facilitator_process_env(kit_chain, database, X402_FACILITATOR_PUBLIC="false")
    upgraded = await run_command(["x402-facilitator", "db", "upgrade"], cwd=folder, env=env)
    assert upgraded.returncode == 0, upgraded.stderr
    created = await run_command(
        ["x402-facilitator", "keys", "create", "--name", "merchant"], cwd=folder, env=env
    )
    assert created.returncode == 0, created.stderr
    async with facilitator_processes(kit_chain, folder) as processes:
        started = await processes.serve(database, X402_FACILITATOR_PUBLIC="false")
        yield started.url, created.stdout.strip()


@pytest.fixture(scope="module")
def remote_merchant(
    kit_chain: DevChain, tmp_path_factory: pytest.TempPathFactory, remote_facilitator: tuple[str, str]
) -> Iterator[ServedExample]:
    """examples/remote_facilitator.py with no relayer key at all: only the facilitator can settle."""
    folder = tmp_path_factory.mktemp("remote_merchant")
    url, key = remote_facilitator
    env = example_env(
        kit_chain,
        X402_PAY_TO=REMOTE_PAY_TO,
        X402_DATABASE_URL=database_in(folder),
        X402_FACILITATOR_URL=url,
        X402_FACILITATOR_API_KEY=key,
        X402_RELAYER_KEY="",
    )
    with serving_example("remote_facilitator.py", env, folder) as served:
        yield served


async def conformance(
    served: ServedExample, chain: DevChain, payer_key: str, folder: Path
) -> dict[str, object]:
    """`x402-a2a-conformance` against `served`, as examples/README.md runs it: exit 0, CONFORMS; its JSON
    report."""
    report = folder / "report.json"
    answer = await run_command(
        ["x402-a2a-conformance", served.url, "--rpc-url", chain.rpc_url, "--concurrency", "6"]
        + ["--json", str(report)],
        cwd=folder,
        env={"X402_PAYER_KEY": payer_key},
        timeout_s=_KIT_TIMEOUT_S,
    )
    assert answer.returncode == 0, f"{answer.stdout}\n{answer.stderr}\nthe merchant's log:\n{served.log()}"
    assert "CONFORMS: every MUST passed" in answer.stdout
    document: dict[str, object] = json.loads(report.read_text())
    assert document["conforms"] is True
    return document


def targets_of(document: dict[str, object]) -> set[str]:
    """The targets (binding, version, tenant) a kit report checked."""
    results = document["results"]
    assert isinstance(results, list)
    return {str(result["target"]) for result in results}


async def test_the_paid_agent_conforms_on_every_binding(
    paid_agent: ServedExample, kit_chain: DevChain, kit_payer: str, tmp_path: Path
) -> None:
    document = await conformance(paid_agent, kit_chain, kit_payer, tmp_path)

    assert targets_of(document) >= {
        "JSONRPC 1.0 tenant=(default)",
        "HTTP+JSON 1.0 tenant=(default)",
        "GRPC 1.0 tenant=(default)",
        "JSONRPC 0.3 tenant=(default)",
        "HTTP+JSON 0.3 tenant=(default)",
    }
    booked = await ledger_entries(database_in(paid_agent.folder))
    assert booked and {(entry.pay_to, entry.amount) for entry in booked} == {(PAY_TO, 10_000)}


async def test_the_two_tenants_agent_conforms_for_both_tenants(
    two_tenants: ServedExample, kit_chain: DevChain, kit_payer: str, tmp_path: Path
) -> None:
    document = await conformance(two_tenants, kit_chain, kit_payer, tmp_path)

    assert targets_of(document) >= {"JSONRPC 1.0 tenant=(default)", "JSONRPC 1.0 tenant=acme"}
    booked = await ledger_entries(database_in(two_tenants.folder))
    # The kit asks for the default skill (count-words) at each tenant, at that tenant's price and payee.
    assert {(entry.tenant, entry.pay_to, entry.amount) for entry in booked} == {
        ("", DEFAULT_PAY_TO, COUNT_PRICE),
        ("acme", ACME_PAY_TO, ACME_COUNT_PRICE),
    }


async def pay(served: ServedExample, chain: DevChain, key: str, text: str, *options: str) -> Answer:
    """examples/paying_client.py paying `served` with `key`, capped at `CAP`."""
    script = str(EXAMPLES / "paying_client.py")
    return await run_command(
        ["python", script, served.url, text, "--max-amount", str(CAP), *options],
        cwd=served.folder,
        env=example_env(chain, X402_PAYER_KEY=key),
    )


PAID = re.compile(r"paid (\d+) to (0x[0-9a-fA-F]{40}) in transaction (0x[0-9a-f]{64})\ntask (\S+): (.*)\n")


async def test_the_paying_client_pays_under_its_cap_and_refuses_over_it(
    two_tenants: ServedExample, kit_chain: DevChain
) -> None:
    key = kit_chain.new_payer()
    payer = Account.from_key(key).address
    before = kit_chain.balance_of(payer)

    counted = await pay(two_tenants, kit_chain, key, "one two three")
    at_acme = await pay(two_tenants, kit_chain, key, "one two three four", "--tenant", "acme")
    reversed_ = await pay(two_tenants, kit_chain, key, "one two three", "--skill", "reverse")
    at_acme_reversed = await pay(two_tenants, kit_chain, key, "a b", "--skill", "reverse", "--tenant", "acme")

    answers = (counted, at_acme, reversed_, at_acme_reversed)
    assert [answer.returncode for answer in answers] == [0, 0, 1, 1], answers
    paid = [PAID.fullmatch(answer.stdout) for answer in (counted, at_acme)]
    assert paid[0] is not None and paid[1] is not None, (counted.stdout, at_acme.stdout)
    assert [(int(m[1]), m[2], m[5]) for m in paid if m is not None] == [
        (COUNT_PRICE, DEFAULT_PAY_TO, "3 words"),
        (ACME_COUNT_PRICE, ACME_PAY_TO, "4 words"),
    ]
    for refused in (reversed_, at_acme_reversed):
        assert refused.stdout.startswith("refused by the policy (amount_over_limit): "), refused.stdout
        assert f"over the policy's maximum of 0.02 USDC ({CAP} atomic units)" in refused.stdout
    # Paid twice, once each: the refusals signed and moved nothing.
    assert before - kit_chain.balance_of(payer) == COUNT_PRICE + ACME_COUNT_PRICE
    booked = [e for e in await ledger_entries(database_in(two_tenants.folder)) if e.payer == payer]
    assert [(e.task_id, e.tenant, e.amount, e.tx_hash) for e in booked] == [
        (m[4], tenant, int(m[1]), m[3]) for m, tenant in zip(paid, ("", "acme"), strict=True) if m is not None
    ]
    outputs = [text for answer in answers for text in (answer.stdout, answer.stderr)]
    assert_no_secret(outputs, {"payer key": key.removeprefix("0x")})


async def test_the_remote_facilitator_example_conforms_and_the_facilitator_settles(
    remote_merchant: ServedExample, kit_chain: DevChain, kit_payer: str, tmp_path: Path
) -> None:
    await conformance(remote_merchant, kit_chain, kit_payer, tmp_path)

    booked = await ledger_entries(database_in(remote_merchant.folder))
    assert booked and {entry.pay_to for entry in booked} == {REMOTE_PAY_TO}
    # The merchant has no relayer key: every settlement it booked was sent by the facilitator's relayer.
    relayer = Account.from_key(kit_chain.relayer_key).address
    senders = {kit_chain.rpc.call("eth_getTransactionByHash", [entry.tx_hash])["from"] for entry in booked}
    assert {sender.lower() for sender in senders} == {relayer.lower()}


async def test_a_missing_setting_is_one_line(kit_chain: DevChain, tmp_path: Path) -> None:
    """What a newcomer forgets is named in one line (exit 2), without a traceback or the dev chain's keys."""
    keys = {"relayer key": kit_chain.relayer_key.removeprefix("0x")}
    env = example_env(kit_chain, X402_DATABASE_URL=database_in(tmp_path))
    no_pay_to = await run_command(["python", str(EXAMPLES / "paid_agent.py")], cwd=tmp_path, env=env)
    no_facilitator = await run_command(
        ["python", str(EXAMPLES / "remote_facilitator.py")], cwd=tmp_path, env={**env, "X402_PAY_TO": PAY_TO}
    )
    no_key = await run_command(
        ["python", str(EXAMPLES / "paying_client.py"), "http://127.0.0.1:9", "hi", "--max-amount", "1"],
        cwd=tmp_path,
        env={**env, "X402_PAYER_KEYS": ""},
    )

    assert_mistake(no_pay_to, "X402_PAY_TO")
    assert_mistake(no_facilitator, "X402_FACILITATOR_URL")
    assert_mistake(no_key, "X402_PAYER_KEY")
    assert_no_secret([a.stdout + a.stderr for a in (no_pay_to, no_facilitator, no_key)], keys)


def test_the_readme_shows_every_example() -> None:
    """A script added to examples/ is described in the README's table and given the command that runs it."""
    readme = (EXAMPLES / "README.md").read_text()
    for script in sorted(EXAMPLES.glob("*.py")):
        assert f"[`{script.name}`]({script.name})" in readme, script.name
        assert f".venv/bin/python examples/{script.name} " in readme, script.name

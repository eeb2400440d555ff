"""`x402-merchant` refuses every mistake of its operator in one line (exit 2, no traceback), naming the
`X402_*` variable or the file and what to do, creating and changing nothing, printing no secret.

Each test runs the real console script in a directory of its own, with known secrets in its environment
(`tests.fixtures.commands`). The database is a migrated SQLite file beside that directory, unless the case
is about the database.
"""

from __future__ import annotations

import socket
import uuid
from functools import partial
from pathlib import Path

import sqlalchemy as sa

from a2a_x402.devchain import DevChain
from a2a_x402.storage import create_engine
from tests.fixtures.commands import Secrets, assert_refused, operator_env
from tests.fixtures.merchant import DEFAULT_PAY_TO
from tests.fixtures.servers import POSTGRES_ADMIN_URL, free_port

ASSET = "0x" + "11" * 20


_refused = partial(assert_refused, "x402-merchant")


def _env(secrets: Secrets, database_url: str, **settings: str) -> dict[str, str]:
    """A complete merchant configuration with the test's secrets; `settings` change it ("" unsets one)."""
    base = {
        **secrets.env(),
        "X402_DATABASE_URL": database_url,
        "X402_ASSET": ASSET,
        "X402_PAY_TO": DEFAULT_PAY_TO,
    }
    return operator_env(base, **settings)


async def test_serve_without_pay_to(sqlite_url: str, workdir: Path, known_secrets: Secrets) -> None:
    await _refused(
        ["serve"],
        _env(known_secrets, sqlite_url, pay_to=""),
        workdir,
        known_secrets,
        "X402_PAY_TO is not set",
        "X402_TENANTS_FILE",
    )


async def test_serve_without_asset(sqlite_url: str, workdir: Path, known_secrets: Secrets) -> None:
    line = await _refused(
        ["serve"], _env(known_secrets, sqlite_url, asset=""), workdir, known_secrets, "X402_ASSET is not set"
    )
    assert "Field required" not in line and "asset " not in line.split("X402_ASSET", 1)[0]


async def test_serve_with_a_wallet_factory_that_is_not_an_address(
    sqlite_url: str, workdir: Path, known_secrets: Secrets
) -> None:
    await _refused(
        ["serve"],
        _env(known_secrets, sqlite_url, erc6492_factories="wallet-factory"),
        workdir,
        known_secrets,
        "X402_ERC6492_FACTORIES: 'wallet-factory' is not an address",
    )


async def test_serve_with_a_wrong_network(sqlite_url: str, workdir: Path, known_secrets: Secrets) -> None:
    await _refused(
        ["serve"],
        _env(known_secrets, sqlite_url, network="base-sepolia"),
        workdir,
        known_secrets,
        "X402_NETWORK: must be a CAIP-2 EVM chain id",
    )


async def test_serve_with_an_unreachable_node(sqlite_url: str, workdir: Path, known_secrets: Secrets) -> None:
    await _refused(
        ["serve"],
        _env(known_secrets, sqlite_url),
        workdir,
        known_secrets,
        "unreachable",
        "RPC node unreachable",
    )


async def test_serve_on_a_node_of_another_chain(
    chain: DevChain, sqlite_url: str, workdir: Path, known_secrets: Secrets
) -> None:
    await _refused(
        ["serve"],
        _env(known_secrets, sqlite_url, rpc_url=chain.rpc_url, network="eip155:1"),
        workdir,
        known_secrets,
        f"serves chain {chain.chain_id}",
        "but X402_NETWORK is eip155:1",
    )


async def test_serve_with_a_tenants_file_typo(sqlite_url: str, workdir: Path, known_secrets: Secrets) -> None:
    tenants = workdir.parent / "tenants.toml"
    tenants.write_text(
        known_secrets.tenants_toml(pay_to=DEFAULT_PAY_TO).replace("price = 5000", "prise = 5000")
    )
    await _refused(
        ["serve"],
        _env(known_secrets, sqlite_url, tenants_file=str(tenants)),
        workdir,
        known_secrets,
        str(tenants),
        "tenants.acme.prise: unknown key",
        "tenants.acme.price: is required",
    )


async def test_serve_with_a_bad_postgresql_url(
    sqlite_url: str, workdir: Path, known_secrets: Secrets
) -> None:
    name = f"x402_never_{uuid.uuid4().hex[:16]}"
    await _refused(
        ["serve"],
        _env(known_secrets, f"postgresql://postgres@127.0.0.1:5432/{name}"),
        workdir,
        known_secrets,
        f'database "{name}" does not exist',
    )
    engine = create_engine(POSTGRES_ADMIN_URL)
    try:
        async with engine.connect() as connection:
            found = await connection.execute(
                sa.text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": name}
            )
            assert found.first() is None
    finally:
        await engine.dispose()


async def test_serve_with_a_password_in_the_database_url_never_shows_it(
    workdir: Path, known_secrets: Secrets
) -> None:
    url = f"postgresql://postgres:{known_secrets.api_token}@127.0.0.1:{free_port()}/x402"
    line = await _refused(
        ["serve"],
        _env(known_secrets, url),
        workdir,
        known_secrets,
        "Connect call failed",
    )
    assert "postgres:***@" in line


async def test_serve_on_a_never_migrated_database(workdir: Path, known_secrets: Secrets) -> None:
    database = workdir.parent / "never.db"
    await _refused(
        ["serve"],
        _env(known_secrets, f"sqlite+aiosqlite:///{database}"),
        workdir,
        known_secrets,
        f"there is no database at {database}",
        "db upgrade",
    )
    assert not database.exists()


async def test_serve_without_a_relayer_key(sqlite_url: str, workdir: Path, known_secrets: Secrets) -> None:
    await _refused(
        ["serve"],
        _env(known_secrets, sqlite_url, relayer_key=""),
        workdir,
        known_secrets,
        "X402_RELAYER_KEY is not set",
    )


async def test_serve_with_a_keys_directory_without_a_key(
    sqlite_url: str, workdir: Path, known_secrets: Secrets
) -> None:
    keys = workdir.parent / "keys"
    keys.mkdir()
    await _refused(
        ["serve"],
        _env(known_secrets, sqlite_url, card_keys_dir=str(keys)),
        workdir,
        known_secrets,
        "no active signing key",
        "keys generate",
    )


async def test_serve_with_a_short_api_token(sqlite_url: str, workdir: Path, known_secrets: Secrets) -> None:
    await _refused(
        ["serve"],
        _env(known_secrets, sqlite_url, api_token="short"),  # noqa: S106 - too short to be a token
        workdir,
        known_secrets,
        "X402_API_TOKEN: must be a string of at least 16 characters",
    )


async def test_serve_with_two_tokens_for_the_default_tenant(
    sqlite_url: str, workdir: Path, known_secrets: Secrets
) -> None:
    tenants = workdir.parent / "tenants.toml"
    tenants.write_text(known_secrets.tenants_toml(pay_to=DEFAULT_PAY_TO, default_token=True))
    await _refused(
        ["serve"],
        _env(known_secrets, sqlite_url, tenants_file=str(tenants)),
        workdir,
        known_secrets,
        "X402_API_TOKEN is set and",
        "gives the [default] tenant an api_token too",
    )


async def test_serve_with_a_bad_option(sqlite_url: str, workdir: Path, known_secrets: Secrets) -> None:
    await _refused(
        ["serve", "--port", "eighty"],
        _env(known_secrets, sqlite_url),
        workdir,
        known_secrets,
        "x402-merchant serve: Invalid value for '--port'",
        "--help",
    )


async def test_ledger_balance_on_a_file_that_is_no_database(workdir: Path, known_secrets: Secrets) -> None:
    database = workdir.parent / "notes.db"
    database.write_text("not a database\n")
    await _refused(
        ["ledger", "balance"],
        _env(known_secrets, f"sqlite+aiosqlite:///{database}"),
        workdir,
        known_secrets,
        "X402_DATABASE_URL: cannot open the database",
        "file is not a database",
    )


async def test_ledger_balance_on_a_never_migrated_database(workdir: Path, known_secrets: Secrets) -> None:
    database = workdir.parent / "never.db"
    await _refused(
        ["ledger", "balance", "--tenant", "default"],
        _env(known_secrets, f"sqlite+aiosqlite:///{database}"),
        workdir,
        known_secrets,
        "there is no database at",
    )
    assert not database.exists()


async def test_ledger_balance_on_an_unsupported_database_url(workdir: Path, known_secrets: Secrets) -> None:
    await _refused(
        ["ledger", "statement"],
        _env(known_secrets, "mysql://root@127.0.0.1/x402"),
        workdir,
        known_secrets,
        "X402_DATABASE_URL: unsupported database URL scheme 'mysql'",
    )


async def test_ledger_balance_of_an_unknown_tenant(
    sqlite_url: str, workdir: Path, known_secrets: Secrets
) -> None:
    await _refused(
        ["ledger", "balance", "--tenant", "nosuch"],
        _env(known_secrets, sqlite_url),
        workdir,
        known_secrets,
        "unknown tenant 'nosuch' (the tenants are: default)",
    )


async def test_reconcile_without_pay_to(sqlite_url: str, workdir: Path, known_secrets: Secrets) -> None:
    await _refused(
        ["reconcile"],
        _env(known_secrets, sqlite_url, pay_to=""),
        workdir,
        known_secrets,
        "X402_PAY_TO is not set",
    )


async def test_reconcile_with_an_unreachable_node(
    sqlite_url: str, workdir: Path, known_secrets: Secrets
) -> None:
    await _refused(
        ["reconcile"], _env(known_secrets, sqlite_url), workdir, known_secrets, "check X402_RPC_URL"
    )


async def test_webhooks_list_of_an_unknown_tenant(
    sqlite_url: str, workdir: Path, known_secrets: Secrets
) -> None:
    tenants = workdir.parent / "tenants.toml"
    tenants.write_text(known_secrets.tenants_toml(pay_to=DEFAULT_PAY_TO))
    await _refused(
        ["webhooks", "list", "--tenant", "nosuch"],
        _env(known_secrets, sqlite_url, tenants_file=str(tenants), api_token=""),
        workdir,
        known_secrets,
        "unknown tenant 'nosuch' (the tenants are: default, acme)",
    )


async def test_webhooks_redeliver_of_an_unknown_event(
    sqlite_url: str, workdir: Path, known_secrets: Secrets
) -> None:
    await _refused(
        ["webhooks", "redeliver", "evt_nosuch"],
        _env(known_secrets, sqlite_url),
        workdir,
        known_secrets,
        "evt_nosuch",
    )


async def test_keys_without_a_keys_directory(workdir: Path, known_secrets: Secrets) -> None:
    await _refused(
        ["keys", "list"],
        _env(known_secrets, "sqlite+aiosqlite:///x.db"),
        workdir,
        known_secrets,
        "X402_CARD_KEYS_DIR is not set",
    )


async def test_keys_list_with_a_keys_directory_that_does_not_exist(
    workdir: Path, known_secrets: Secrets
) -> None:
    keys = workdir.parent / "no-keys-here"
    await _refused(
        ["keys", "list"],
        _env(known_secrets, "sqlite+aiosqlite:///x.db", card_keys_dir=str(keys)),
        workdir,
        known_secrets,
        f"x402-merchant: X402_CARD_KEYS_DIR names no directory ({keys}), so there are no keys",
        "run `x402-merchant keys generate`",
    )
    assert not keys.exists()


async def test_db_upgrade_on_an_unreachable_postgresql_server(workdir: Path, known_secrets: Secrets) -> None:
    await _refused(
        ["db", "upgrade"],
        _env(known_secrets, f"postgresql://postgres@127.0.0.1:{free_port()}/merchant"),
        workdir,
        known_secrets,
        "X402_DATABASE_URL: cannot upgrade the database postgresql://postgres@127.0.0.1:",
        "; check the URL and that it runs",
    )


async def test_db_upgrade_into_a_missing_directory(workdir: Path, known_secrets: Secrets) -> None:
    database = workdir.parent / "nowhere" / "x402.db"
    await _refused(
        ["db", "upgrade"],
        _env(known_secrets, f"sqlite+aiosqlite:///{database}"),
        workdir,
        known_secrets,
        "X402_DATABASE_URL: cannot create the database",
        "there is no directory",
    )


async def test_an_unknown_command(workdir: Path, known_secrets: Secrets) -> None:
    await _refused(
        ["sevre"],
        _env(known_secrets, "sqlite+aiosqlite:///x.db"),
        workdir,
        known_secrets,
        "No such command 'sevre'",
    )


async def test_serve_and_check_with_a_public_url_that_is_not_one(
    sqlite_url: str, workdir: Path, known_secrets: Secrets
) -> None:
    for command, value in (
        ("serve", "not-a-url"),
        ("check", "ftp://x"),
        ("serve", "https://shop.example/?a=1"),
    ):
        line = await _refused(
            [command],
            _env(known_secrets, sqlite_url, public_url=value),
            workdir,
            known_secrets,
            "x402-merchant: X402_PUBLIC_URL: must be an",
            "http",
        )
        assert "CardSettingsError" not in line and "Value error" not in line


async def test_serve_and_check_with_a_facilitator_or_rpc_url_that_is_not_one(
    sqlite_url: str, workdir: Path, known_secrets: Secrets
) -> None:
    for command, setting in (("serve", "facilitator_url"), ("check", "rpc_url")):
        await _refused(
            [command],
            _env(known_secrets, sqlite_url, **{setting: f"127.0.0.1:8545/{known_secrets.api_token}"}),
            workdir,
            known_secrets,
            f"X402_{setting.upper()}: must be an absolute http:// or https:// URL",
        )


async def test_serve_and_check_with_an_unknown_log_level(
    sqlite_url: str, workdir: Path, known_secrets: Secrets
) -> None:
    for command in ("serve", "check", "reconcile"):
        line = await _refused(
            [command],
            _env(known_secrets, sqlite_url, log_level="verbose"),
            workdir,
            known_secrets,
            "x402-merchant: X402_LOG_LEVEL: must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL",
        )
        assert "Value error" not in line and "invalid settings" not in line


async def test_serve_and_check_with_a_price_that_is_not_a_number(
    sqlite_url: str, workdir: Path, known_secrets: Secrets
) -> None:
    for command in ("serve", "check"):
        line = await _refused(
            [command],
            _env(known_secrets, sqlite_url, price="abc"),
            workdir,
            known_secrets,
            "x402-merchant: X402_PRICE: must be an integer, got 'abc'",
        )
        assert "Input should be" not in line


async def test_serve_on_a_port_in_use(sqlite_url: str, workdir: Path, known_secrets: Secrets) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        for argv, env in (
            (["serve"], _env(known_secrets, sqlite_url, port=str(port))),
            (["serve", "--port", str(port), "--migrate"], _env(known_secrets, sqlite_url)),
        ):
            line = await _refused(
                argv,
                env,
                workdir,
                known_secrets,
                f"x402-merchant: not starting: 127.0.0.1:{port} is already in use (X402_PORT / --port)",
            )
            assert "serving at" not in line


async def test_serve_on_a_grpc_port_in_use(sqlite_url: str, workdir: Path, known_secrets: Secrets) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        for argv, env in (
            (["serve"], _env(known_secrets, sqlite_url, grpc_port=str(port))),
            (["serve", "--grpc-port", str(port), "--migrate"], _env(known_secrets, sqlite_url)),
        ):
            line = await _refused(
                argv,
                env,
                workdir,
                known_secrets,
                f"x402-merchant: not starting: 127.0.0.1:{port} is already in use",
                "(X402_GRPC_PORT / --grpc-port)",
            )
            assert "serving at" not in line

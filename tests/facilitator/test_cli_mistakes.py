"""`x402-facilitator` refuses its operator's mistakes in one line (exit 2, no traceback), naming the `X402_*`
variable and what to do, creating and changing nothing, printing no secret (real processes)."""

from __future__ import annotations

import socket
from functools import partial
from pathlib import Path

from a2a_x402.devchain import DevChain
from tests.fixtures.commands import Secrets, assert_refused, operator_env
from tests.fixtures.servers import free_port

_refused = partial(assert_refused, "x402-facilitator")


def _env(secrets: Secrets, database_url: str, **settings: str) -> dict[str, str]:
    return operator_env(
        {"X402_RELAYER_KEY": secrets.relayer_key, "X402_DATABASE_URL": database_url}, **settings
    )


async def test_serve_without_a_relayer_key(sqlite_url: str, workdir: Path, known_secrets: Secrets) -> None:
    await _refused(
        ["serve"],
        _env(known_secrets, sqlite_url, relayer_key=""),
        workdir,
        known_secrets,
        "X402_RELAYER_KEY is not set",
    )


async def test_serve_with_a_relayer_key_file_holding_no_key(
    sqlite_url: str, workdir: Path, known_secrets: Secrets
) -> None:
    key_file = workdir.parent / "relayer.key"
    key_file.write_text(known_secrets.api_token + "\n")  # a secret, but not a key: never shown
    await _refused(
        ["serve"],
        _env(known_secrets, sqlite_url, relayer_key=str(key_file)),
        workdir,
        known_secrets,
        f"X402_RELAYER_KEY names {key_file}, which does not hold a 32-byte hex private key",
    )


async def test_serve_with_a_wrong_network(sqlite_url: str, workdir: Path, known_secrets: Secrets) -> None:
    await _refused(
        ["serve"],
        _env(known_secrets, sqlite_url, network="base"),
        workdir,
        known_secrets,
        "X402_NETWORK: must be",
    )


async def test_serve_with_a_wallet_factory_that_is_not_an_address(
    sqlite_url: str, workdir: Path, known_secrets: Secrets
) -> None:
    await _refused(
        ["serve"],
        _env(known_secrets, sqlite_url, erc6492_factories=f"0x{'ab' * 20},0x1234"),
        workdir,
        known_secrets,
        "X402_ERC6492_FACTORIES: '0x1234' is not an address",
    )


async def test_check_with_a_wallet_factory_of_a_wrong_checksum(
    sqlite_url: str, workdir: Path, known_secrets: Secrets
) -> None:
    factory = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"  # EIP-55's example address
    await _refused(
        ["check"],
        _env(known_secrets, sqlite_url, erc6492_factories=factory.replace("Aeb", "aeb")),
        workdir,
        known_secrets,
        f"X402_ERC6492_FACTORIES: {factory.replace('Aeb', 'aeb')} has a wrong EIP-55 checksum",
        f"(expected {factory})",
    )


async def test_check_with_a_private_key_among_the_assets(
    sqlite_url: str, workdir: Path, known_secrets: Secrets
) -> None:
    await _refused(
        ["check"],
        _env(known_secrets, sqlite_url, assets=f"0x{'ab' * 20},{known_secrets.relayer_key}:USDC:2"),
        workdir,
        known_secrets,
        "X402_ASSETS: entry 2 is 32 bytes of hex (a private key?), not a 20-byte address",
    )


async def test_serve_on_a_never_migrated_database(workdir: Path, known_secrets: Secrets) -> None:
    database = workdir.parent / "claims.db"
    await _refused(
        ["serve"],
        _env(known_secrets, f"sqlite+aiosqlite:///{database}"),
        workdir,
        known_secrets,
        "there is no database at",
    )
    assert not database.exists()


async def test_serve_with_an_unreachable_node(sqlite_url: str, workdir: Path, known_secrets: Secrets) -> None:
    await _refused(["serve"], _env(known_secrets, sqlite_url), workdir, known_secrets, "RPC node unreachable")


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


async def test_db_upgrade_on_an_unreachable_postgresql_server(workdir: Path, known_secrets: Secrets) -> None:
    await _refused(
        ["db", "upgrade"],
        _env(
            known_secrets, f"postgresql://postgres:{known_secrets.api_token}@127.0.0.1:{free_port()}/claims"
        ),
        workdir,
        known_secrets,
        "X402_DATABASE_URL: cannot upgrade the database postgresql://postgres:***@",
        "; check the URL and that it runs",
    )


async def test_an_unknown_option(workdir: Path, known_secrets: Secrets) -> None:
    await _refused(
        ["serve", "--prot", "4022"],
        _env(known_secrets, "sqlite+aiosqlite:///x.db"),
        workdir,
        known_secrets,
        "x402-facilitator serve: No such option '--prot'",
    )


async def test_serve_on_a_port_in_use(sqlite_url: str, workdir: Path, known_secrets: Secrets) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        await _refused(
            ["serve", "--port", str(port)],
            _env(known_secrets, sqlite_url),
            workdir,
            known_secrets,
            f"x402-facilitator: not starting: 127.0.0.1:{port} is already in use (X402_PORT / --port)",
        )


async def test_serve_and_check_with_an_unknown_log_level_or_a_bad_rpc_url(
    sqlite_url: str, workdir: Path, known_secrets: Secrets
) -> None:
    for command in ("serve", "check"):
        await _refused(
            [command],
            _env(known_secrets, sqlite_url, log_level="verbose"),
            workdir,
            known_secrets,
            "x402-facilitator: X402_LOG_LEVEL: must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL",
        )
        await _refused(
            [command],
            _env(known_secrets, sqlite_url, rpc_url="localhost"),
            workdir,
            known_secrets,
            "x402-facilitator: X402_RPC_URL: must be an absolute http:// or https:// URL",
        )

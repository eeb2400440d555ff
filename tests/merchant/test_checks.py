"""`x402-merchant check` and `serve`'s preflight against the real dev chain and database: each problem is
caused for real (an address without code, a wrong EIP-712 domain, another chain, an unfunded relayer made
now, a skill price for no skill, a webhook to a private address, a key that cannot sign, a database not
migrated), and the all-good case passes every check."""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from eth_account import Account

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator._reverts import RevertedSettlement, RevertGuard
from a2a_x402.merchant.checks import check_remote_facilitator, check_webhooks
from a2a_x402.merchant.cli import main
from a2a_x402.merchant.tenants import Tenant, TenantRegistry
from a2a_x402.storage import create_engine, upgrade_schema
from tests.fixtures.checks import (
    chain_env,
    console_script,
    problems,
    process_env,
    run_check,
    serve_refused,
)
from tests.fixtures.merchant import DEFAULT_PAY_TO
from tests.fixtures.servers import free_port, wait_answering_blocking

_ALL_CHECKS = [
    "network",
    "asset",
    "asset domain",
    "relayer",
    "database",
    "foreign settlements",
    "tenants",
    "skill prices",
    "webhooks",
    "card signing",
    "revert budget",
]


def _env(chain: DevChain, database_url: str, **overrides: str) -> dict[str, str]:
    merchant = {
        "X402_ASSET": chain.asset,
        "X402_ASSET_NAME": chain.asset_name,
        "X402_ASSET_VERSION": chain.asset_version,
        "X402_PAY_TO": DEFAULT_PAY_TO,
    }
    return chain_env(chain, database_url, **{**merchant, **overrides})


def _tenants_file(tmp_path: Path, body: str) -> str:
    path = tmp_path / "tenants.toml"
    path.write_text(body)
    return str(path)


def _whsec() -> str:
    return "whsec_" + base64.b64encode(os.urandom(32)).decode()


@pytest.mark.usefixtures("clean_env")
def test_all_good_passes_every_check(chain: DevChain, sqlite_url: str, tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    assert (
        CliRunner().invoke(main, ["keys", "generate"], env={"X402_CARD_KEYS_DIR": str(keys)}).exit_code == 0
    )
    tenants = _tenants_file(
        tmp_path,
        f'[default]\npay_to = "{DEFAULT_PAY_TO}"\nprice = 10000\n\n'
        f'[tenants.acme]\npay_to = "{DEFAULT_PAY_TO}"\nprice = 5000\n'
        f'webhook_url = "https://93.184.215.14/hooks"\nwebhook_secret = "{_whsec()}"\n'
        "[tenants.acme.skill_prices]\ntext-stats = 7000\n",
    )

    code, rows = run_check(
        main, _env(chain, sqlite_url, X402_TENANTS_FILE=tenants, X402_CARD_KEYS_DIR=str(keys))
    )

    assert (code, problems(rows)) == (0, {})
    assert list(rows) == _ALL_CHECKS
    assert "2 from" in rows["tenants"][1]
    assert "1 key(s) sign and verify" in rows["card signing"][1]


@pytest.mark.usefixtures("clean_env")
def test_an_asset_address_without_code_is_a_problem(chain: DevChain, sqlite_url: str) -> None:
    nobody = Account.create().address

    code, rows = run_check(main, _env(chain, sqlite_url, X402_ASSET=nobody))

    assert code == 1
    assert problems(rows)["asset"] == (
        f"there is no contract at X402_ASSET {nobody} on {chain.network}: check the token address"
    )
    assert problems(rows)["asset domain"] == f"not read: no contract at {nobody}"


@pytest.mark.usefixtures("clean_env")
def test_a_wrong_name_and_version_are_problems(chain: DevChain, sqlite_url: str) -> None:
    code, rows = run_check(main, _env(chain, sqlite_url, X402_ASSET_NAME="USD Coin", X402_ASSET_VERSION="1"))

    assert code == 1
    assert problems(rows) == {
        "asset domain": f"the EIP-712 name is {chain.asset_name!r} but X402_ASSET_NAME is 'USD Coin'; "
        f"the EIP-712 version is {chain.asset_version!r} but X402_ASSET_VERSION is '1'"
    }


@pytest.mark.usefixtures("clean_env")
@pytest.mark.parametrize("method", ["auto", "permit2"])
def test_a_token_paid_through_permit2_has_no_domain_to_compare(
    chain: DevChain, sqlite_url: str, method: str
) -> None:
    # The plain ERC-20 has no version(): with EIP-3009 that is a problem, through Permit2 nothing is signed
    # in its domain.
    env = _env(chain, sqlite_url, X402_ASSET=chain.plain_asset, X402_ASSET_DECIMALS="18")

    code, rows = run_check(main, {**env, "X402_ASSET_TRANSFER_METHOD": method})
    _, as_eip3009 = run_check(main, {**env, "X402_ASSET_TRANSFER_METHOD": "eip3009"})

    assert (code, problems(rows)) == (0, {})
    assert rows["asset domain"][1] == "not needed: the token is paid through Permit2"
    assert "asset domain" in problems(as_eip3009)


@pytest.mark.usefixtures("clean_env")
def test_a_network_the_node_does_not_serve_is_a_problem(chain: DevChain, sqlite_url: str) -> None:
    code, rows = run_check(main, _env(chain, sqlite_url, X402_NETWORK="eip155:1"))

    assert code == 1
    assert problems(rows) == {
        "network": f"the node serves chain {chain.chain_id} ({chain.network}), but X402_NETWORK is eip155:1"
    }


@pytest.mark.usefixtures("clean_env")
def test_an_unfunded_relayer_is_a_problem(chain: DevChain, sqlite_url: str) -> None:
    relayer = Account.create()

    code, rows = run_check(main, _env(chain, sqlite_url, X402_RELAYER_KEY=relayer.key.to_0x_hex()))

    assert code == 1
    found = problems(rows)
    assert list(found) == ["relayer"]
    assert found["relayer"].startswith(f"{relayer.address} holds 0 ETH, below the floor of 0.001 ETH")
    assert relayer.key.hex()[2:10] not in rows["relayer"][1]


@pytest.mark.usefixtures("clean_env")
def test_a_listed_wallet_factory_without_code_is_a_problem_of_the_in_process_facilitator(
    chain: DevChain, sqlite_url: str
) -> None:
    codeless = Account.create().address

    code, rows = run_check(main, _env(chain, sqlite_url, X402_ERC6492_FACTORIES=codeless))

    assert code == 1
    assert problems(rows) == {
        "erc6492 factories": f"{codeless} has no code on this chain: check X402_ERC6492_FACTORIES"
    }
    assert list(rows).index("erc6492 factories") == list(rows).index("relayer") + 1


@pytest.mark.usefixtures("clean_env")
def test_the_relayer_floor_is_configurable(chain: DevChain, sqlite_url: str) -> None:
    code, rows = run_check(main, _env(chain, sqlite_url, X402_RELAYER_MIN_BALANCE_WEI=str(10**40)))

    assert code == 1
    assert "below the floor of 10000000000000000000000 ETH" in problems(rows)["relayer"]


@pytest.mark.usefixtures("clean_env")
def test_a_skill_price_for_no_offered_skill_is_a_problem(
    chain: DevChain, sqlite_url: str, tmp_path: Path
) -> None:
    tenants = _tenants_file(
        tmp_path,
        f'[tenants.acme]\npay_to = "{DEFAULT_PAY_TO}"\nprice = 5000\n'
        "[tenants.acme.skill_prices]\ntext-stats = 7000\ntext-stat = 9000\n"
        "[tenants.acme.metered_skills]\ntext-statz = 9000\n",
    )

    code, rows = run_check(main, _env(chain, sqlite_url, X402_TENANTS_FILE=tenants))

    assert code == 1
    assert problems(rows) == {
        "skill prices": "acme.skill_prices.text-stat, acme.metered_skills.text-statz: no such skill "
        "(offered: text-stats)"
    }


@pytest.mark.usefixtures("clean_env")
def test_a_webhook_to_a_private_address_is_a_problem(
    chain: DevChain, sqlite_url: str, tmp_path: Path
) -> None:
    tenants = _tenants_file(
        tmp_path,
        f'[tenants.acme]\npay_to = "{DEFAULT_PAY_TO}"\nprice = 5000\n'
        f'webhook_url = "http://10.1.2.3:8080/hook"\nwebhook_secret = "{_whsec()}"\n',
    )

    code, rows = run_check(main, _env(chain, sqlite_url, X402_TENANTS_FILE=tenants))
    allowed, allowed_rows = run_check(
        main, _env(chain, sqlite_url, X402_TENANTS_FILE=tenants, X402_WEBHOOKS_ALLOW_PRIVATE="true")
    )

    assert code == 1
    assert problems(rows) == {
        "webhooks": "acme: http://10.1.2.3:8080/hook: 10.1.2.3 resolves to non-public address(es) 10.1.2.3"
    }
    assert (allowed, problems(allowed_rows)) == (0, {})


@pytest.mark.usefixtures("clean_env")
def test_a_tenant_in_the_embedded_flow_is_checked(chain: DevChain, sqlite_url: str, tmp_path: Path) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    (tmp_path / "acme.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    tenants = _tenants_file(
        tmp_path,
        f'[tenants.acme]\npay_to = "{DEFAULT_PAY_TO}"\nprice = 10000\n[tenants.acme.ap2]\n'
        'merchant = { id = "acme.example", name = "Acme" }\ncheckout_keys = ["acme.pem"]\n',
    )

    code, rows = run_check(
        main, _env(chain, sqlite_url, X402_TENANTS_FILE=tenants, X402_PUBLIC_URL="https://shop.example")
    )

    # A problem, not fatal (serve starts): checkouts are offered, no mandates accepted without an issuer.
    assert (code, problems(rows)) == (1, {"ap2": "acme: trusts no mandate issuer (ap2.issuers)"})


@pytest.mark.usefixtures("clean_env")
def test_an_invalid_tenants_file_is_a_problem(chain: DevChain, sqlite_url: str, tmp_path: Path) -> None:
    tenants = _tenants_file(tmp_path, '[tenants.acme]\npay_to = "0x1234"\nprice = 5000\n')

    code, rows = run_check(main, _env(chain, sqlite_url, X402_TENANTS_FILE=tenants))

    assert code == 1
    assert list(problems(rows)) == ["tenants"]
    assert "tenants.acme.pay_to" in problems(rows)["tenants"]


@pytest.mark.usefixtures("clean_env")
def test_a_signing_key_that_cannot_sign_is_a_problem(
    chain: DevChain, sqlite_url: str, tmp_path: Path
) -> None:
    # A P-384 key: a valid private key, but not one Agent Cards are signed with (ES256 or EdDSA).
    key_file = tmp_path / "card-key.pem"
    key_file.write_bytes(
        ec.generate_private_key(ec.SECP384R1()).private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )

    code, rows = run_check(main, _env(chain, sqlite_url, X402_CARD_SIGNING_KEY_FILE=str(key_file)))

    assert code == 1
    assert list(problems(rows)) == ["card signing"]
    assert "only P-256 (ES256) and Ed25519 (EdDSA) private keys can sign" in problems(rows)["card signing"]


@pytest.mark.usefixtures("clean_env")
def test_a_missing_database_is_a_problem_and_is_not_created(chain: DevChain, tmp_path: Path) -> None:
    path = tmp_path / "never.db"

    code, rows = run_check(main, _env(chain, f"sqlite+aiosqlite:///{path}"))

    assert code == 1
    assert problems(rows) == {"database": f"there is no database at {path}: run `x402-merchant db upgrade`"}
    assert not path.exists()


@pytest.mark.usefixtures("clean_env")
def test_a_database_without_the_merchant_tables_is_a_problem(chain: DevChain, tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'claims-only.db'}"
    asyncio.run(upgrade_schema(url, "facilitator"))

    code, rows = run_check(main, _env(chain, url))

    assert code == 1
    detail = problems(rows)["database"]
    assert "is not migrated (merchant at no revision, head m" in detail
    assert detail.endswith("run `x402-merchant db upgrade`")


@pytest.mark.usefixtures("clean_env")
def test_a_postgresql_password_never_shows(chain: DevChain) -> None:
    code, rows = run_check(
        main, _env(chain, "postgresql://x402:s3cr3t-pa55word@127.0.0.1:5432/no_such_db_here")
    )

    assert code == 1
    assert "database" in problems(rows)
    assert "s3cr3t" not in "".join(detail for _, detail in rows.values())


def test_serve_refuses_an_asset_without_code_in_one_line(
    chain: DevChain, sqlite_url: str, tmp_path: Path
) -> None:
    env = _env(chain, sqlite_url, X402_ASSET=Account.create().address, X402_PORT="0")

    served = serve_refused("x402-merchant", env, tmp_path)

    assert served.returncode == 2
    assert served.stdout == ""
    assert served.stderr.splitlines() == [
        f"x402-merchant: not starting: asset: there is no contract at X402_ASSET {env['X402_ASSET']} on "
        f"{chain.network}: check the token address"
    ]


def test_serve_starts_with_an_unfunded_relayer_and_warns(
    chain: DevChain, sqlite_url: str, tmp_path: Path
) -> None:
    port = free_port()
    relayer = Account.create()
    env = process_env(_env(chain, sqlite_url, X402_RELAYER_KEY=relayer.key.to_0x_hex(), X402_PORT=str(port)))
    log = tmp_path / "serve.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(  # noqa: S603 - the project's own console script
            [console_script("x402-merchant"), "serve"],
            env=env,
            cwd=tmp_path,
            stderr=sink,
        )
    try:
        wait_answering_blocking(
            f"http://127.0.0.1:{port}/healthz",
            running=lambda: process.poll() is None,
            what="x402-merchant serve",
            log=log.read_text,
            timeout_s=90,
        )
    finally:
        process.terminate()
        process.wait(30)

    assert (
        f"WARNING a2a_x402.facilitator._checks check relayer: {relayer.address} holds 0 ETH"
        in log.read_text()
    )


async def test_a_webhook_host_that_does_not_resolve_is_a_problem_but_not_fatal() -> None:
    # .invalid never resolves (RFC 2606); a private address is fatal, beside it or not.
    hooks = [("acme", "https://billing.acme.invalid/x402"), ("globex", "http://192.168.1.20/hook")]
    tenants = TenantRegistry(
        Tenant(id=tenant, pay_to=DEFAULT_PAY_TO, price=1, webhook_url=url, webhook_secret=_whsec())
        for tenant, url in hooks
    )
    only_dns = TenantRegistry([next(iter(tenants))])

    unresolved = await check_webhooks(only_dns, allow_private=False)
    both = await check_webhooks(tenants, allow_private=False)

    assert (unresolved.ok, unresolved.fatal) == (False, False)
    assert unresolved.detail.startswith(
        "acme: https://billing.acme.invalid/x402: cannot resolve billing.acme.invalid"
    )
    assert (both.ok, both.fatal) == (False, True)


async def test_a_webhook_urls_credentials_never_show() -> None:
    url = "http://billing:pw-not-shown@10.1.2.3/hook?token=query-not-shown"
    tenants = TenantRegistry(
        [Tenant(id="acme", pay_to=DEFAULT_PAY_TO, price=1, webhook_url=url, webhook_secret=_whsec())]
    )

    refused = await check_webhooks(tenants, allow_private=False)

    assert (refused.ok, refused.fatal) == (False, True)
    assert refused.detail.startswith("acme: http://10.1.2.3/hook: ")
    assert "not-shown" not in refused.detail


async def test_a_remote_facilitator_that_does_not_answer_is_a_problem_but_not_fatal() -> None:
    absent = f"http://127.0.0.1:{free_port()}"

    result = await check_remote_facilitator(absent + "/?key=not-shown", "eip155:84532")

    assert (result.name, result.ok, result.fatal) == ("facilitator", False, False)
    assert result.detail == f"{absent}/ does not answer: connection refused"  # the node check's words


@pytest.mark.usefixtures("clean_env")
def test_an_unreachable_node_is_one_short_reason_a_row_without_credentials(
    chain: DevChain, sqlite_url: str
) -> None:
    port = free_port()  # nothing listens there
    for host, reason in (("127.0.0.1", "connection refused"), ("no-such-host.invalid", "does not resolve")):
        url = f"http://rpc-user:s3cr3t-pa55word@{host}:{port}/v2/s3cr3t-api-key"

        code, rows = run_check(main, _env(chain, sqlite_url, X402_RPC_URL=url))

        assert code == 1
        found = problems(rows)
        assert {"network", "asset", "asset domain", "relayer"} <= found.keys()
        for name in ("network", "asset", "asset domain", "relayer"):
            detail = found[name]
            assert f"RPC node unreachable (http://{host}:{port})" in detail, detail
            assert reason in detail and detail.count(":") <= 4, detail
            assert len(detail) < 200, detail
            assert "s3cr3t" not in detail and "rpc-user" not in detail


@pytest.mark.usefixtures("clean_env")
def test_a_relayer_past_its_revert_budget_is_a_problem_of_the_in_process_facilitator(
    chain: DevChain, sqlite_url: str
) -> None:
    relayer = Account.from_key(chain.relayer_key).address

    async def spend() -> None:
        engine = create_engine(sqlite_url)
        try:
            guard = RevertGuard(
                engine, chain_id=chain.chain_id, cooloff_s=3600, code_payers=3, budget_wei=None
            )
            reverted = RevertedSettlement("0x" + "ab" * 32, relayer, DEFAULT_PAY_TO, None, 2 * 10**15)
            await guard.record(reverted)
        finally:
            await engine.dispose()

    asyncio.run(spend())
    within = run_check(main, _env(chain, sqlite_url, X402_RELAYER_REVERT_BUDGET_WEI=str(10**16)))
    code, rows = run_check(main, _env(chain, sqlite_url, X402_RELAYER_REVERT_BUDGET_WEI=str(10**15)))
    remote = run_check(
        main,
        _env(
            chain,
            sqlite_url,
            X402_RELAYER_REVERT_BUDGET_WEI=str(10**15),
            X402_FACILITATOR_URL=f"http://127.0.0.1:{free_port()}",
        ),
    )

    assert (within[0], problems(within[1]), within[1]["revert budget"][0]) == (0, {}, "ok")
    assert code == 1
    assert problems(rows) == {
        "revert budget": f"{relayer} spent 0.002 ETH on reverted settlements in the last hour, its budget of "
        "0.001 ETH an hour (X402_RELAYER_REVERT_BUDGET_WEI): it sends nothing new until they age out"
    }
    # A remote facilitator's relayers and their budget are its operator's.
    assert "revert budget" not in remote[1]

"""`x402-pay approve-permit2` on the dev chain (real processes): it sends the one approval when asked and
prints its transaction, sends nothing the second time, and refuses its user's mistakes in one line, before
any request, printing no secret; `x402-pay`'s new options are refused the same way, and pay a metered
merchant within their caps."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from eth_account import Account

from a2a_x402.devchain import PERMIT2_ADDRESS, DevChain, encode_call
from tests.devchain.permit2_sdk import permit2_payer
from tests.fixtures.commands import Secrets, assert_mistake, assert_no_secret, run_command
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.merchant import DEFAULT_PAY_TO, MerchantStarter
from tests.fixtures.servers import free_port
from tests.merchant.payments.test_metered_settlement import MAXIMUM, MeteredExecutor, metered_merchant

pytestmark = pytest.mark.timeout(120)

_MAX = 2**256 - 1


def _allowance(chain: DevChain, owner: str, asset: str) -> int:
    data = encode_call("allowance(address,address)", [owner, PERMIT2_ADDRESS])
    return int.from_bytes(chain.rpc.eth_call(asset, data), "big")


async def test_approve_permit2_sends_the_approval_once_and_prints_its_transaction(
    chain: DevChain, workdir: Path
) -> None:
    account = Account.create()
    chain.rpc.call("anvil_setBalance", [account.address, hex(10**17)])
    env = {"X402_PAYER_KEY": account.key.to_0x_hex(), "X402_PAYER_RPC_URL": chain.rpc_url}
    asset = chain.plain_asset.lower()  # all lower case is no typo: taken, and shown checksummed

    first = await run_command(["x402-pay", "approve-permit2", "--asset", asset], cwd=workdir, env=env)
    second = await run_command(["x402-pay", "approve-permit2", "--asset", asset], cwd=workdir, env=env)

    assert (first.returncode, first.stderr) == (0, ""), first.stderr
    where = f"{chain.plain_asset} of {account.address} on {chain.network}"
    lines = first.stdout.splitlines()
    assert lines[0] == f"approved: Permit2 may move all of {where}"
    match = re.fullmatch(r"transaction: (0x[0-9a-f]{64})", lines[1])
    assert match is not None, first.stdout
    assert chain.rpc.wait_for_receipt(match[1], timeout_s=HANG_S)["status"] == "0x1"
    assert _allowance(chain, account.address, chain.plain_asset) == _MAX
    assert (second.returncode, second.stdout) == (
        0,
        f"approved already: Permit2 may move all of {where}; nothing sent\n",
    )
    assert_no_secret([first.stdout, first.stderr, second.stdout], {"payer key": account.key.hex()})


async def test_approve_permit2_without_gas_says_so_in_one_line(chain: DevChain, workdir: Path) -> None:
    account = Account.create()  # holds no ETH
    env = {"X402_PAYER_KEY": account.key.to_0x_hex()}

    answer = await run_command(
        ["x402-pay", "approve-permit2", "--asset", chain.plain_asset, "--rpc-url", chain.rpc_url],
        cwd=workdir,
        env=env,
    )

    assert answer.returncode == 1, answer.stderr
    [line] = answer.stderr.splitlines()
    assert line.startswith("Error: chain_unavailable: the payer's RPC node for ")
    assert "Traceback" not in answer.stderr and chain.rpc_url not in answer.stderr
    assert _allowance(chain, account.address, chain.plain_asset) == 0
    assert_no_secret([answer.stdout, answer.stderr], {"payer key": account.key.hex()})


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        pytest.param(
            ["--asset", "0x1234"], ["Invalid value for '--asset'", "a token address"], id="short-asset"
        ),
        pytest.param(
            ["--asset", "0x5fC8d32690cc91D4c39d9d3abcBD16989F875707"],
            ["Invalid value for '--asset'", "EIP-55"],
            id="bad-checksum",
        ),
        pytest.param(
            ["--asset", "0x5FC8d32690cc91D4c39d9d3abcBD16989F875707", "--rpc-url", "127.0.0.1:8545"],
            ["Invalid value for '--rpc-url'", "absolute http(s) URL"],
            id="rpc-url",
        ),
        pytest.param(
            ["--asset", "0x5FC8d32690cc91D4c39d9d3abcBD16989F875707"],
            ["Missing option '--rpc-url'"],
            id="no-rpc-url",
        ),
    ],
)
async def test_approve_permit2_mistakes(
    workdir: Path, known_secrets: Secrets, args: list[str], fragments: list[str]
) -> None:
    env = {"X402_PAYER_KEY": known_secrets.relayer_key}

    answer = await run_command(["x402-pay", "approve-permit2", *args], cwd=workdir, env=env)

    assert_mistake(answer, "x402-pay approve-permit2: ", *fragments, secrets_=known_secrets)


async def test_approve_permit2_with_a_node_that_does_not_answer(
    workdir: Path, known_secrets: Secrets
) -> None:
    answer = await run_command(
        [
            "x402-pay",
            "approve-permit2",
            "--asset",
            "0x5FC8d32690cc91D4c39d9d3abcBD16989F875707",
            "--rpc-url",
            f"http://127.0.0.1:{free_port()}/secret-api-key",
        ],
        cwd=workdir,
        env={"X402_PAYER_KEY": known_secrets.relayer_key},
    )

    assert answer.returncode == 1
    assert answer.stderr.startswith("Error: chain_unavailable: the RPC node did not answer eth_chainId")
    assert "secret-api-key" not in answer.stderr
    assert_no_secret([answer.stdout, answer.stderr], known_secrets.values())


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        pytest.param(["--upto-max-per-task", "-1"], "Invalid value for '--upto-max-per-task'", id="task"),
        pytest.param(["--upto-max-per-day", "1.5"], "Invalid value for '--upto-max-per-day'", id="day"),
        pytest.param(["--rpc-url", "ftp://node"], "Invalid value for '--rpc-url'", id="rpc-url"),
    ],
)
async def test_pay_option_mistakes(
    workdir: Path, known_secrets: Secrets, args: list[str], fragment: str
) -> None:
    answer = await run_command(
        ["x402-pay", "--card-url", "http://127.0.0.1:1", *args, "hello"],
        cwd=workdir,
        env={"X402_PAYER_KEY": known_secrets.relayer_key},
    )

    assert_mistake(answer, fragment, secrets_=known_secrets)


async def test_the_caps_are_read_from_the_environment_too(workdir: Path, known_secrets: Secrets) -> None:
    answer = await run_command(
        ["x402-pay", "--card-url", "http://127.0.0.1:1", "hello"],
        cwd=workdir,
        env={"X402_PAYER_KEY": known_secrets.relayer_key, "X402_PAYER_UPTO_MAX_PER_DAY": "-5"},
    )

    assert_mistake(answer, "Invalid value for '--upto-max-per-day'", secrets_=known_secrets)


def test_no_help_of_approve_permit2_shows_a_secret(known_secrets: Secrets) -> None:
    from click.testing import CliRunner

    from a2a_x402.payer.cli import main

    env = {"X402_PAYER_KEY": known_secrets.relayer_key, "X402_PAYER_RPC_URL": "http://node/secret-api-key"}
    answered = CliRunner().invoke(main, ["approve-permit2", "--help"], prog_name="x402-pay", env=env)

    assert answered.exit_code == 0, answered.output
    assert "Usage: x402-pay approve-permit2 [OPTIONS]" in answered.output
    assert "secret-api-key" not in answered.output
    assert_no_secret([answered.output], known_secrets.values())


async def test_x402_pay_pays_metered_terms_within_its_caps_and_prints_the_usage(
    start_merchant: MerchantStarter, sqlite_url: str, tmp_path: Path, chain: DevChain, workdir: Path
) -> None:
    delegate = MeteredExecutor((("tokens", 1200, 25),))
    merchant = metered_merchant(start_merchant, sqlite_url, tmp_path, delegate, grpc_port=None)
    key = permit2_payer(chain, chain.asset, 10 * MAXIMUM)
    env = {
        "X402_PAYER_KEY": key,
        "X402_PAYER_RPC_URL": chain.rpc_url,
        "X402_PAYER_UPTO_MAX_PER_TASK": str(MAXIMUM),
    }

    answer = await run_command(
        ["x402-pay", "--card-url", merchant.base_url, "Count me."], cwd=workdir, env=env
    )

    assert answer.returncode == 0, answer.stderr
    payer = Account.from_key(key).address
    assert f"signed: up to {MAXIMUM} atomic units of {chain.asset} on {chain.network}" in answer.stdout
    assert (
        f"paid: 30000 atomic units (of at most {MAXIMUM}) to {DEFAULT_PAY_TO} from {payer}" in answer.stdout
    )
    assert "used: 1200 tokens at 25 = 30000 atomic units" in answer.stdout
    assert_no_secret([answer.stdout, answer.stderr], {"payer key": key[2:]})

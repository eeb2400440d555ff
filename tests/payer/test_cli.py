"""``x402-pay`` as a subprocess against the reference merchant on loopback and the session chain."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from eth_account import Account

from a2a_x402.devchain import DevChain
from tests.fixtures.commands import assert_no_secret
from tests.fixtures.servers import free_port

from .conftest import PAY_TO, PRICE, TEXT

pytestmark = pytest.mark.timeout(60)

X402_PAY = Path(sys.executable).with_name("x402-pay")


async def x402_pay(*args: str, env: dict[str, str]) -> tuple[int, str, str]:
    """Run ``x402-pay`` with ``args``, ``env`` its only X402_* variables; return (status, out, err)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("X402_")}
    process = await asyncio.create_subprocess_exec(
        str(X402_PAY),
        *args,
        env={**clean, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=50)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def transaction_in(output: str) -> str:
    match = re.search(r"^transaction: (0x[0-9a-f]{64})$", output, re.MULTILINE)
    assert match is not None, output
    return match.group(1)


async def test_x402_pay_prints_states_transaction_and_artifact(
    merchant: Callable[..., str], chain: DevChain, new_payer: Callable[..., str], tmp_path: Path
) -> None:
    key_file = tmp_path / "payer.key"
    key_file.write_text(new_payer() + "\n")

    status, out, err = await x402_pay(
        "--card-url", merchant(), "--key-file", str(key_file), "--max-amount", str(PRICE), TEXT, env={}
    )

    assert status == 0, err
    states = re.findall(r"^state: (TASK_STATE_\w+)", out, re.MULTILINE)
    assert states == ["TASK_STATE_INPUT_REQUIRED", "TASK_STATE_COMPLETED"]
    assert f"signed: {PRICE} atomic units of {chain.asset} on {chain.network} to {PAY_TO}" in out
    transaction = transaction_in(out)
    assert chain.rpc.call("eth_getTransactionReceipt", [transaction])["status"] == "0x1"
    assert "artifact: text-stats\n" in out
    assert '\n  "characters": 36,\n' in out  # the data part, as JSON with its integers intact
    assert '\n  "words": 7\n}\n' in out
    assert "7 words, 2 sentences, 36 characters.\n" in out
    assert chain.balance_of(PAY_TO) == PRICE


async def test_x402_pay_streams_with_the_first_devchain_key(
    merchant: Callable[..., str], chain: DevChain, new_payer: Callable[..., str]
) -> None:
    keys = [new_payer(), new_payer()]

    status, out, err = await x402_pay(
        "--card-url",
        merchant(),
        "--binding",
        "http+json",
        "--stream",
        TEXT,
        env={"X402_PAYER_KEYS": ",".join(keys)},
    )

    assert status == 0, err
    states = re.findall(r"^state: (TASK_STATE_\w+)", out, re.MULTILINE)
    assert states == [
        "TASK_STATE_SUBMITTED",
        "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_WORKING",
        "TASK_STATE_COMPLETED",
    ]
    assert f"from {Account.from_key(keys[0]).address}" in out
    assert chain.rpc.call("eth_getTransactionReceipt", [transaction_in(out)])["status"] == "0x1"
    assert chain.balance_of(PAY_TO) == PRICE


async def test_x402_pay_exits_non_zero_on_a_refusal(
    merchant: Callable[..., str], chain: DevChain, new_payer: Callable[..., str]
) -> None:
    status, out, err = await x402_pay(
        "--card-url", merchant(), "--max-amount", str(PRICE - 1), TEXT, env={"X402_PAYER_KEY": new_payer()}
    )

    assert status == 1
    assert "Error: amount_over_limit:" in err
    assert "nothing was signed" in err
    assert "signed:" not in out
    assert chain.balance_of(PAY_TO) == 0


async def test_x402_pay_stops_at_the_first_insufficient_funds_refusal(
    merchant: Callable[..., str], chain: DevChain, new_payer: Callable[..., str]
) -> None:
    key = new_payer(PRICE - 1)
    address = Account.from_key(key).address

    status, out, err = await x402_pay("--card-url", merchant(), TEXT, env={"X402_PAYER_KEY": key})

    assert status == 1, err
    # The card's warning (unsigned, under the default warn policy) may come first; the refusal is one line.
    [line] = [line for line in err.splitlines() if line.startswith("Error:")]
    assert err.endswith(line + "\n"), err
    assert line.startswith("Error: insufficient_funds: the payer's balance is too low for the price: "), err
    assert f"{address} holds less than {PRICE} atomic units of {chain.asset} on {chain.network}" in line
    assert "a payment was signed" in line and "Traceback" not in err
    assert key.removeprefix("0x")[:16] not in out + err
    assert out.count("\nsigned: ") == 1  # one signature, refused; not another for the same balance
    assert chain.balance_of(PAY_TO) == 0
    assert chain.balance_of(address) == PRICE - 1


async def test_x402_pay_to_a_closed_port_says_the_merchant_could_not_be_reached(
    new_payer: Callable[..., str],
) -> None:
    url = f"http://127.0.0.1:{free_port()}"

    status, out, err = await x402_pay("--card-url", url, TEXT, env={"X402_PAYER_KEY": new_payer()})

    assert status == os.EX_UNAVAILABLE  # nothing signed: trying again later is safe
    assert out == ""
    assert err == (
        "Error: merchant_unreachable: the merchant could not be reached at "
        f"{url}/.well-known/agent-card.json (connection refused): check the URL and that it runs; "
        "nothing was signed\n"
    )


async def test_x402_pay_at_debug_writes_no_piece_of_its_key_and_no_signature(
    merchant: Callable[..., str], chain: DevChain, new_payer: Callable[..., str], tmp_path: Path
) -> None:
    key = new_payer()
    key_file = tmp_path / "payer.key"
    key_file.write_text(key + "\n")

    status, out, err = await x402_pay(
        "--card-url",
        merchant(),
        "--key-file",
        str(key_file),
        "--max-amount",
        str(PRICE),
        TEXT,
        env={"X402_LOG_LEVEL": "DEBUG"},
    )

    assert status == 0, err
    assert "INFO HTTP Request: POST" in err  # the level was taken: dependencies' lines are written too
    assert_no_secret([out, err], {"payer key": key})
    assert re.search(r"0x[0-9a-fA-F]{130,}", out + err) is None  # no signature, whole or wrapped


async def test_x402_pay_refuses_an_invalid_log_level_in_one_line(merchant: Callable[..., str]) -> None:
    status, out, err = await x402_pay("--card-url", merchant(), TEXT, env={"X402_LOG_LEVEL": "LOUD"})

    assert status == 2
    assert "X402_LOG_LEVEL: must be one of DEBUG, INFO, WARNING, ERROR, CRITICAL" in err
    assert out == ""

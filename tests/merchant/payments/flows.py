"""Helpers of the payment-layer tests: the priced request, reading extension data, chain snapshots."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eth_account import Account

from a2a_x402.devchain import DevChain
from a2a_x402.extension import EXTENSION_URI
from tests.facilitator.payments import relayer_nonce
from tests.fixtures.merchant import DEFAULT_PAY_TO, MerchantWire, ledger_entries, offered_terms, user_message

JSON = dict[str, Any]


def address_of(key: str) -> str:
    """The checksummed address of a private key."""
    return str(Account.from_key(key).address)


def extension(holder: JSON) -> JSON:
    """The extension's metadata on a task's (or status update's) status message."""
    data: JSON = holder["status"]["message"]["metadata"][EXTENSION_URI]
    return data


def texts(holder: JSON) -> list[str]:
    """The text parts of a task's (or status update's) status message."""
    return [part["text"] for part in holder["status"]["message"]["parts"] if "text" in part]


async def offer(wire: MerchantWire, text: str = "The quick brown fox. The dog sleeps.") -> JSON:
    """Ask for the priced skill; the task, which waits for payment."""
    response = await wire.send(user_message(text))
    task: JSON = response["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", task
    offered_terms(task)  # the task offers x402 v2 terms
    return task


@dataclass(frozen=True)
class ChainSnapshot:
    """Balances of the parties and the relayer's transaction count at one moment."""

    payer: int
    pay_to: int
    relayer_nonce: int


def snapshot(chain: DevChain, payer: str, pay_to: str = DEFAULT_PAY_TO) -> ChainSnapshot:
    """What the chain says now about `payer`, `pay_to` and the relayer."""
    return ChainSnapshot(chain.balance_of(payer), chain.balance_of(pay_to), relayer_nonce(chain))


async def assert_nothing_happened(
    chain: DevChain, before: ChainSnapshot, payer: str, database_url: str, pay_to: str = DEFAULT_PAY_TO
) -> None:
    """No transaction was sent, no token moved, nothing was booked."""
    assert snapshot(chain, payer, pay_to) == before
    assert await ledger_entries(database_url) == []

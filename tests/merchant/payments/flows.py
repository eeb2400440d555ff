"""Helpers of the payment-layer tests: the priced request, reading extension data, chain snapshots, and a raw
A2A 0.3 client."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import httpx
from eth_account import Account

from a2a_x402.devchain import DevChain
from a2a_x402.extension import EXTENSION_URI
from a2a_x402.merchant.edge import JSONRPC_PATH, REST_PATH
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


class V03Client:
    """A raw A2A 0.3 client (no `A2A-Version`, `X-A2A-Extensions` with v0.2) on one binding."""

    def __init__(self, http: httpx.AsyncClient, binding: str) -> None:
        self.http = http
        self.binding = binding

    async def send(self, text: str, *, task_id: str = "", metadata: JSON | None = None) -> JSON:
        """Send a user message; return the task answered."""
        message: JSON = {"messageId": str(uuid.uuid4()), "role": "user"}
        if self.binding == "jsonrpc":
            message |= {"kind": "message", "parts": [{"kind": "text", "text": text}]}
        else:
            message |= {"role": "ROLE_USER", "content": [{"text": text}]}
        if task_id:
            message["taskId"] = task_id
        if metadata is not None:
            message["metadata"] = metadata
        if self.binding == "jsonrpc":
            params = {"message": message}
            envelope = {"jsonrpc": "2.0", "id": "r-1", "method": "message/send", "params": params}
            response = await self.http.post(JSONRPC_PATH, json=envelope)
        else:
            # Without configuration a 0.3 HTTP+JSON send is non-blocking (the proto's `blocking` is false).
            request = {"message": message, "configuration": {"blocking": True}}
            response = await self.http.post(f"{REST_PATH}/v1/message:send", json=request)
        assert response.status_code == 200, response.text
        assert response.headers["a2a-version"] == "0.3"
        body: JSON = response.json()
        task: JSON = body["result"] if self.binding == "jsonrpc" else body["task"]
        return task


def state_of(task: JSON) -> str:
    """The task's state in either binding's spelling, as the 0.3 JSON-RPC one (`input-required`)."""
    state: str = task["status"]["state"]
    return state.removeprefix("TASK_STATE_").lower().replace("_", "-")

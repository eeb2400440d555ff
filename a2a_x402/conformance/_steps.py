"""Steps the 1.0 checks share: get terms for a new task, follow a pending settlement, verify the chain.

Each step raises ``CheckFailed`` (with the exchange) when the merchant's answer does not let the check go
on, so a check reads as the requirement it tests.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from a2a_x402.extension import EXTENSION_URI, Dialect, ExtensionMetadataError, decode

from ._chain import ChainReader
from ._context import NotApplicable, Probe, Unspent, fail
from ._messages import user_message
from ._permit2 import KIND_WORDS, payment_kind
from ._reading import artifacts_of, metadata_of, state_of
from ._reply import Reply
from ._signer import Signed
from ._wire import Wire

__all__ = [
    "Offer",
    "carries_signature",
    "expect_nothing_moved",
    "expect_settled",
    "extension_object",
    "new_offer",
    "offer_from",
    "outcome_of",
]

JSON = Any
_POLL_S = 0.25
_TERMINAL = frozenset(
    {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}
)


def carries_signature(value: JSON, signed: Signed) -> bool:
    """Whether `value` (an answer's JSON) holds the signature, in any case, with or without its 0x."""
    signature = signed.signature.lower().removeprefix("0x")
    return bool(signature) and signature in json.dumps(value).lower()


@dataclass
class Offer:
    """A task waiting for payment: its id, the entry the kit pays, and the answer that offered it."""

    task_id: str
    entry: JSON
    reply: Reply

    @property
    def network(self) -> str:
        """The entry's network."""
        return str(self.entry.get("network"))

    @property
    def amount(self) -> int:
        """The entry's amount (0 when it is not a decimal string)."""
        amount = self.entry.get("amount")
        return int(amount) if isinstance(amount, str) and amount.isdigit() else 0


def extension_object(task: JSON) -> JSON:
    """The v0.3 extension object of the task's status message, if there is one."""
    metadata = metadata_of(task)
    value = metadata.get(EXTENSION_URI) if metadata is not None else None
    return value if isinstance(value, dict) else None


def _allowed(probe: Probe, required: JSON, tenant: str) -> list[JSON]:
    """The offered entries the card allows the kit to pay, in the offered order."""
    accepts = required.get("accepts") if isinstance(required, dict) else None
    allowed = []
    for entry in accepts if isinstance(accepts, list) else []:
        if not isinstance(entry, dict):
            continue
        network, asset, pay_to = entry.get("network"), entry.get("asset"), entry.get("payTo")
        if isinstance(network, str) and isinstance(asset, str) and isinstance(pay_to, str):
            if not probe.run.discovery.allows(network, asset, pay_to, tenant):
                allowed.append(entry)
    return allowed


def offer_from(
    probe: Probe, reply: Reply, tenant: str, kind: str = "eip3009", *, with_mandates: bool = False
) -> Offer:
    """The offer of an entry of ``kind`` (``"any"``: the kit will not pay it) in a payment-required answer,
    to pay ``with_mandates`` (§20) or not.

    Raises:
        CheckFailed: the answer is not a task waiting for payment with terms the kit may pay.
        NotApplicable: the terms the kit may pay offer no entry of ``kind`` (they do offer another kind,
            or ``kind`` is one a merchant need not offer), or the tenant takes payments only with mandates.
    """
    if kind != "any" and not with_mandates and tenant in probe.run.discovery.ap2_required:
        raise NotApplicable(
            f"params.ap2 declares tenant {tenant or '(default)'} required: true: it takes payments only with "
            "AP2 mandates (the ap2.* checks pay it)"
        )
    task = reply.task
    if reply.error is not None or task is None:
        raise fail("the priced request did not return a task", reply.exchange)
    if state_of(task) != "TASK_STATE_INPUT_REQUIRED":
        raise fail(
            f"the task is {state_of(task) or 'without a state'}, not TASK_STATE_INPUT_REQUIRED",
            reply.exchange,
        )
    value = extension_object(task)
    if value is None or value.get("status") != "payment-required":
        raise fail(
            "the status message has no payment-required object under the extension URI", reply.exchange
        )
    allowed = _allowed(probe, value.get("required"), tenant)
    entry = next((e for e in allowed if kind in ("any", payment_kind(e))), None)
    if entry is None and (allowed or kind not in ("eip3009", "any")):
        raise NotApplicable(f"the terms of the request offer no {KIND_WORDS[kind]} the card lists")
    if entry is None:
        raise fail(
            "the kit does not sign: no offered entry has a network, asset and payTo the card lists",
            reply.exchange,
        )
    task_id = task.get("id")
    if not isinstance(task_id, str) or not task_id:
        raise fail("the task has no id", reply.exchange)
    return Offer(task_id, entry, reply)


async def new_offer(
    probe: Probe, wire: Wire, kind: str = "eip3009", text: str = "", *, with_mandates: bool = False
) -> Offer:
    """Ask for the priced skill (activated; ``text``, else the card's example) and return the offer of an
    entry of ``kind`` to pay ``with_mandates`` or not; fails the check when there is none."""
    reply = await wire.send(user_message(wire.interface, text or probe.run.discovery.request_text))
    return offer_from(probe, reply, wire.interface.tenant, kind, with_mandates=with_mandates)


async def outcome_of(probe: Probe, wire: Wire, reply: Reply) -> Reply:
    """The answer once the task left TASK_STATE_WORKING (a pending settlement is followed with GetTask)."""
    task = reply.task
    deadline = asyncio.get_running_loop().time() + probe.run.timeout_s * 2
    task_id = task.get("id") if isinstance(task, dict) else None
    while (
        isinstance(task_id, str)
        and state_of(task, version=wire.interface.version) in ("TASK_STATE_WORKING", "TASK_STATE_SUBMITTED")
        and asyncio.get_running_loop().time() < deadline
    ):
        await asyncio.sleep(_POLL_S)
        reply = await wire.get_task(task_id)
        task = reply.task
    return reply


def successful_receipt(receipts: JSON) -> JSON:
    """The newest receipt if it is a successful one naming its transaction, else ``None``."""
    if not isinstance(receipts, list) or not receipts or not isinstance(receipts[-1], dict):
        return None
    last = receipts[-1]
    ok = last.get("success") is True and isinstance(last.get("transaction"), str) and last["transaction"]
    return last if ok else None


async def expect_settled(
    chain: ChainReader, probe: Probe, signed: Signed, receipt: JSON, reply: Reply
) -> None:
    """The receipt's transaction is mined and moved exactly ``signed.value`` to its payTo, once.

    Raises:
        CheckFailed: it is not mined, moved another amount, moved to another address, or the authorization
            was used more than once.
    """
    transaction = str(receipt.get("transaction"))
    transfers = await chain.transfers_in(transaction)
    if transfers is None:
        raise fail(
            f"the receipt's transaction {transaction} is not a successful mined transaction", reply.exchange
        )
    paid = [t for t in transfers if t.asset == signed.asset and t.sender == signed.payer]
    if [(t.recipient, t.value) for t in paid] != [(signed.pay_to, signed.value)]:
        moved = [(t.recipient, t.value) for t in paid]
        raise fail(
            f"{transaction} moved {moved} from the payer, not exactly {signed.value} to {signed.pay_to}",
            reply.exchange,
        )
    uses = await chain.uses_of(signed.asset, signed.payer, signed.nonce, probe.run.start_block)
    if uses != [transaction]:
        raise fail(f"the authorization was used by {uses}, not once by {transaction}", reply.exchange)


async def expect_nothing_moved(probe: Probe, signed: Signed, reply: Reply, check_id: str) -> None:
    """The authorization is unused now; the run checks it again at its end (a late settlement fails it).

    Raises:
        CheckFailed: the authorization was used.
    """
    if await probe.run.chain.nonce_used(signed.nonce_at, signed.payer, signed.nonce):
        raise fail(
            "the authorization was used on chain: money moved for a payment the merchant refused",
            reply.exchange,
        )
    probe.run.unspent.append(Unspent(check_id, probe.target, signed.nonce_at, signed.payer, signed.nonce))


def no_artifact(task: JSON, reply: Reply) -> None:
    """Raises ``CheckFailed`` when the task carries an artifact."""
    if artifacts_of(task):
        raise fail("the task carries an artifact although the payment was not settled", reply.exchange)


def decoded(task: JSON, reply: Reply) -> Any:
    """The task's extension object decoded strictly (``a2a_x402.decode``); fails the check otherwise."""
    try:
        return decode(metadata_of(task), Dialect.V03)
    except ExtensionMetadataError as error:
        raise fail(f"the extension object is malformed: {error}", reply.exchange) from None

"""The A2A 1.0 checks of what a merchant must refuse: payments that do not pay the terms, requests without
activation, extension data in the wrong place, and the client's rejection.

Each bad payment is signed for a task of its own and checked three ways: the answer is the one the
specification gives, the task shows no artifact (and, for refused payments, did not change), and the
authorization is unused on chain (again at the end of the run, so a late settlement fails the check).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

from eth_account import Account

from a2a_x402.extension import EXTENSION_URI, EXTENSION_URI_V02

from ._context import NotApplicable, Probe, fail
from ._messages import extension_message, user_message
from ._reading import expect_error, state_of, status_message_of
from ._reply import Reply
from ._signer import Signed, Signer, payload_v2
from ._steps import Offer, decoded, expect_nothing_moved, extension_object, new_offer, no_artifact
from ._wire import Wire

__all__ = [
    "BAD_PAYMENT_CHECKS",
    "REFUSAL_CHECKS",
    "anonymous_list",
    "bad_payment",
    "refusals",
    "stranger_cancel",
    "stranger_cancel_0_3",
    "tenant_isolation",
]

JSON = Any
_NO_CODE_ADDRESS = "0x000000000000000000000000000000000000dEaD"
REFUSAL_CHECKS = (
    "activation.refused",
    "activation.other-version-uri",
    "metadata.request-level",
)
BAD_PAYMENT_CHECKS = (
    "payment.wrong-amount",
    "payment.wrong-pay-to",
    "payment.wrong-asset",
    "payment.wrong-network",
    "payment.expired",
    "payment.not-yet-valid",
    "payment.bad-signature",
    "payment.unfunded",
    "payment.presented-elsewhere",
    "activation.continue-refused",
    "metadata.other-version-form",
    "rejection.cancels",
)
_UNPAID = ("rejection.cancels", "activation.continue-refused", "metadata.other-version-form")
"""The checks of ``BAD_PAYMENT_CHECKS`` that send no payment: any entry's terms will do."""
_FRESH_TERMS = {
    "payment.expired": "EXPIRED_PAYMENT",
    "payment.not-yet-valid": "EXPIRED_PAYMENT",
    "payment.unfunded": "INSUFFICIENT_FUNDS",
}


def _make(probe: Probe, check_id: str, offer: Offer, tenant: str) -> tuple[Signed, JSON]:
    """The signed authorization and the payload of ``check_id``'s bad payment for ``offer``."""
    signer, entry, now = probe.run.signer, offer.entry, int(time.time())
    window = (
        int(entry.get("maxTimeoutSeconds", 300)) if isinstance(entry.get("maxTimeoutSeconds"), int) else 300
    )
    changes: JSON = None

    def sign(signer: Signer = signer, **variant: Any) -> Signed:
        return signer.sign(entry, tenant=tenant, network=offer.network, amount=offer.amount, **variant)

    if check_id == "payment.wrong-amount":
        signed = sign(value=offer.amount - 1)
    elif check_id == "payment.wrong-pay-to":
        others = sorted(probe.run.discovery.listed_pay_tos(offer.network) - {entry.get("payTo")})
        if others:
            signed = sign(to=others[0])
            changes = {"payTo": others[0]}
        else:
            # No other listed address: the signature stays on the offered payTo, `accepted` names the payer.
            signed = sign()
            changes = {"payTo": signer.address}
    elif check_id == "payment.wrong-asset":
        signed, changes = sign(), {"asset": _NO_CODE_ADDRESS}
    elif check_id == "payment.wrong-network":
        chain_id = offer.network.removeprefix("eip155:")
        other = f"eip155:{int(chain_id) + 1}" if chain_id.isdigit() else "eip155:1"
        signed, changes = sign(), {"network": other}
    elif check_id == "payment.expired":
        signed = sign(valid_after=now - 600, valid_before=now - 120)
    elif check_id == "payment.not-yet-valid":
        signed = sign(valid_after=now + min(120, window // 2), valid_before=now + window)
    elif check_id == "payment.bad-signature":
        signed = sign(damage=True)
    else:
        signed = sign(signer.with_key(str(Account.create().key.to_0x_hex())))
    return signed, payload_v2(entry, signed, accepted_changes=changes)


async def _unchanged(wire: Wire, offer: Offer, reply: Reply) -> None:
    after = await wire.get_task(offer.task_id)
    before_value, after_value = extension_object(offer.reply.task), extension_object(after.task)
    if state_of(after.task) != "TASK_STATE_INPUT_REQUIRED" or before_value != after_value:
        raise fail("the task changed although the request was refused", reply.exchange, after.exchange)


async def bad_payment(probe: Probe, wire: Wire, check_id: str) -> None:
    """One check of ``BAD_PAYMENT_CHECKS``, on a task of its own."""
    interface = wire.interface
    async with probe.check(check_id) as shown:
        offer = await new_offer(probe, wire, "any" if check_id in _UNPAID else "eip3009")
        shown.append(offer.reply.exchange)
        if check_id == "rejection.cancels":
            await _rejection(wire, offer)
            return
        if check_id == "activation.continue-refused":
            message = user_message(interface, "Please go on.", task_id=offer.task_id)
            reply = await wire.send(message, activate=None)
            problem = expect_error(reply, "EXTENSION_SUPPORT_REQUIRED", interface)
            if problem:
                raise fail(problem, reply.exchange)
            await _unchanged(wire, offer, reply)
            return
        if check_id == "metadata.other-version-form":
            flat = {"x402.payment.status": "payment-rejected"}
            reply = await wire.send(
                user_message(interface, "No, thank you.", task_id=offer.task_id, metadata=flat)
            )
            problem = expect_error(reply, "INVALID_PARAMS", interface)
            if problem:
                raise fail(problem, reply.exchange)
            await _unchanged(wire, offer, reply)
            return
        if check_id == "payment.presented-elsewhere":
            await _presented_elsewhere(probe, wire, offer)
            return
        signed, payload = _make(probe, check_id, offer, interface.tenant)
        reply = await wire.send(
            extension_message(interface, offer.task_id, "payment-submitted", payload=payload)
        )
        if check_id in _FRESH_TERMS:
            _fresh_terms(reply, _FRESH_TERMS[check_id])
        elif check_id == "payment.bad-signature":
            _failed(reply, "INVALID_SIGNATURE")
        else:
            problem = expect_error(reply, "INVALID_PARAMS", interface)
            if problem:
                raise fail(problem, reply.exchange)
            await _unchanged(wire, offer, reply)
        await expect_nothing_moved(probe, signed, reply, check_id)


async def _presented_elsewhere(probe: Probe, wire: Wire, first: Offer) -> None:
    """§11.1: an authorization presented for one task (refused there: not yet valid, so it stays valid on
    chain) and then presented for a second task, with that task's own terms, is refused there."""
    interface = wire.interface
    signed, payload = _make(probe, "payment.not-yet-valid", first, interface.tenant)
    presented = await wire.send(
        extension_message(interface, first.task_id, "payment-submitted", payload=payload)
    )
    if state_of(presented.task) == "TASK_STATE_COMPLETED":
        raise fail("a payment not yet valid completed the task it was presented for", presented.exchange)
    second = await new_offer(probe, wire)
    same_terms = all(second.entry.get(k) == first.entry.get(k) for k in ("payTo", "asset", "network"))
    if not same_terms or second.amount != first.amount:
        raise NotApplicable("a second task of the same request is offered other terms")
    reply = await wire.send(
        extension_message(
            interface, second.task_id, "payment-submitted", payload=payload_v2(second.entry, signed)
        )
    )
    problem = expect_error(reply, "INVALID_PARAMS", interface)
    if problem:
        raise fail(
            f"the authorization presented for another task: {problem}", presented.exchange, reply.exchange
        )
    await _unchanged(wire, second, reply)
    await expect_nothing_moved(probe, signed, reply, "payment.presented-elsewhere")


def _fresh_terms(reply: Reply, code: str) -> None:
    task = reply.task
    if reply.error is not None or task is None:
        raise fail(f"expected fresh terms with {code}, got an error", reply.exchange)
    value = extension_object(task)
    if (
        state_of(task) != "TASK_STATE_INPUT_REQUIRED"
        or value is None
        or value.get("status") != "payment-required"
    ):
        raise fail(
            f"expected TASK_STATE_INPUT_REQUIRED with payment-required, got {state_of(task)}", reply.exchange
        )
    if value.get("error") != code:
        raise fail(f"the fresh terms carry error {value.get('error')!r}, not {code}", reply.exchange)
    decoded(task, reply)
    no_artifact(task, reply)


def _failed(reply: Reply, code: str) -> None:
    task = reply.task
    if reply.error is not None or task is None:
        raise fail(f"expected TASK_STATE_FAILED with {code}, got an error", reply.exchange)
    value = extension_object(task)
    if state_of(task) != "TASK_STATE_FAILED" or value is None or value.get("status") != "payment-failed":
        raise fail(f"expected TASK_STATE_FAILED with payment-failed, got {state_of(task)}", reply.exchange)
    if value.get("error") != code:
        raise fail(f"payment-failed carries error {value.get('error')!r}, not {code}", reply.exchange)
    decoded(task, reply)
    no_artifact(task, reply)


async def _rejection(wire: Wire, offer: Offer) -> None:
    reply = await wire.send(extension_message(wire.interface, offer.task_id, "payment-rejected"))
    task = reply.task
    if reply.error is not None or task is None:
        raise fail("payment-rejected was refused", reply.exchange)
    value = extension_object(task)
    if state_of(task) != "TASK_STATE_CANCELED" or value is None or value.get("status") != "payment-rejected":
        raise fail(
            f"expected TASK_STATE_CANCELED echoing payment-rejected, got {state_of(task)}", reply.exchange
        )
    extensions = (status_message_of(task) or {}).get("extensions")
    if not isinstance(extensions, list) or EXTENSION_URI not in extensions:
        raise fail("the echo's status message does not list the extension URI", reply.exchange)


async def refusals(probe: Probe, wire: Wire) -> None:
    """The priced request without activation, with the v0.2 URI, and with request-level extension data."""
    interface, text = wire.interface, probe.run.discovery.request_text
    cases: list[tuple[str, Callable[[], Awaitable[Reply]], str]] = [
        (
            "activation.refused",
            lambda: wire.send(user_message(interface, text), activate=None),
            "EXTENSION_SUPPORT_REQUIRED",
        ),
        (
            "activation.other-version-uri",
            lambda: wire.send(user_message(interface, text), activate=EXTENSION_URI_V02),
            "EXTENSION_SUPPORT_REQUIRED",
        ),
        (
            "metadata.request-level",
            lambda: wire.send(
                user_message(interface, text),
                request_metadata={EXTENSION_URI: {"status": "payment-rejected"}},
            ),
            "INVALID_PARAMS",
        ),
    ]
    for check_id, send, reason in cases:
        async with probe.check(check_id):
            reply = await send()
            problem = expect_error(reply, reason, interface)
            if problem:
                raise fail(problem, reply.exchange)


async def tenant_isolation(probe: Probe, wire: Wire, other: Wire | None) -> None:
    """A task of this interface's tenant, read through ``other`` (same binding, another tenant)."""
    async with probe.check("tenant.isolation") as shown:
        if other is None:
            raise NotApplicable("the card lists no other tenant on this binding")
        offer = await new_offer(probe, wire, "any")
        shown.append(offer.reply.exchange)
        reply = await other.get_task(offer.task_id)
        problem = expect_error(reply, "TASK_NOT_FOUND", other.interface)
        if problem:
            raise fail(
                f"tenant {other.interface.tenant or '(default)'} reads the task: {problem}", reply.exchange
            )


async def anonymous_list(probe: Probe, wire: Wire) -> None:
    """A task started without credentials, then ListTasks without credentials and without a contextId."""
    async with probe.check("callers.anonymous-list-empty") as shown:
        offer = await new_offer(probe, wire, "any")
        shown.append(offer.reply.exchange)
        reply = await wire.list_tasks()
        if reply.error is not None:
            error = reply.error
            if (
                error.http_status == 401
                or error.grpc_status == "UNAUTHENTICATED"
                or error.reason == "INVALID_REQUEST"
            ):
                raise NotApplicable("the interface serves no caller without credentials")
            said = error.reason or error.code or error.http_status or error.grpc_status
            raise fail(f"ListTasks answered an error ({said}): {error.message}", reply.exchange)
        tasks = reply.result.get("tasks") if isinstance(reply.result, dict) else None
        if tasks:
            raise fail(f"an anonymous ListTasks without contextId lists {len(tasks)} task(s)", reply.exchange)


async def stranger_cancel(probe: Probe, owner: Wire | None, stranger: Wire | None) -> None:
    """A task of one authenticated caller, canceled and read by another (the kit's two credentials)."""
    async with probe.check("callers.stranger-cancel") as shown:
        if owner is None or stranger is None:
            raise NotApplicable(
                "no caller credentials of this interface's tenant were given (--caller-tokens-file)"
            )
        offer = await new_offer(probe, owner, "any")
        shown.append(offer.reply.exchange)
        for reply in (await stranger.cancel(offer.task_id), await stranger.get_task(offer.task_id)):
            problem = expect_error(reply, "TASK_NOT_FOUND", stranger.interface)
            if problem:
                raise fail(f"another caller reaches the task: {problem}", reply.exchange)
        after = await owner.get_task(offer.task_id)
        if state_of(after.result) != "TASK_STATE_INPUT_REQUIRED":
            raise fail("the task changed after another caller's CancelTask", after.exchange)


async def stranger_cancel_0_3(probe: Probe, owner: Wire | None, stranger: Wire | None) -> None:
    """On a 0.3 interface: a task one authenticated caller started, canceled and read by another."""
    async with probe.check("v02.stranger-cancel") as shown:
        if owner is None or stranger is None:
            raise NotApplicable(
                "no caller credentials of this interface's tenant were given (--caller-tokens-file)"
            )
        interface = owner.interface
        started = await owner.send(user_message(interface, probe.run.discovery.request_text))
        shown.append(started.exchange)
        task = started.task
        if started.error is not None or not isinstance(task, dict) or not isinstance(task.get("id"), str):
            raise fail("the priced request of an authenticated caller got no task", started.exchange)
        before = state_of(task, version="0.3")
        for reply in (await stranger.cancel(task["id"]), await stranger.get_task(task["id"])):
            problem = expect_error(reply, "TASK_NOT_FOUND", interface)
            if problem:
                raise fail(f"another caller reaches the task: {problem}", reply.exchange)
        after = await owner.get_task(task["id"])
        if state_of(after.task, version="0.3") != before:
            raise fail("the task changed after another caller's tasks/cancel", after.exchange)

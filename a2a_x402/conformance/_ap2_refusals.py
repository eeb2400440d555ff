"""The embedded flow's refusals (§20.5, §20.6): mandates bound to something else, an untrusted issuer, a
budget the price exceeds, a constraint nobody can evaluate, a required tenant paid without mandates.

Each runs on a task of its own and is checked three ways, as the kit's other refusals are: the answer is
``InvalidParamsError`` whose ``ErrorInfo`` metadata names the ``ap2Error`` §20.6 gives, the task did not
change (still waiting, the same terms, no work), and the refused authorization is unused on chain (again
at the end of the run). ``ap2.refused-then-paid`` then pays the same authorization with good mandates.
"""

from __future__ import annotations

import os
from typing import Any

from a2a_x402.extension import Ap2ErrorCode, Ap2Mandates

from ._ap2_flow import (
    Round,
    mandates,
    mandates_gate,
    new_round,
    paid_with_mandates,
    pay,
    sign,
    verify_receipt,
)
from ._ap2_mandates import Twist
from ._ap2_offer import tenant_entry
from ._context import NotApplicable, Probe, fail
from ._reading import artifacts_of, expect_error, state_of
from ._reply import Reply
from ._signer import Signed
from ._steps import Offer, expect_nothing_moved, extension_object, new_offer
from ._wire import Wire

__all__ = ["AP2_REFUSAL_CHECKS", "ap2_refusal"]

JSON = Any
_CREDENTIAL, _MANDATE = Ap2ErrorCode.INVALID_CREDENTIAL.value, Ap2ErrorCode.INVALID_MANDATE.value
AP2_REFUSAL_CHECKS = (
    "ap2.binding-payload",
    "ap2.binding-checkout",
    "ap2.binding-round",
    "ap2.issuer-untrusted",
    "ap2.budget",
    "ap2.unknown-constraint",
    "ap2.required",
    "ap2.refused-then-paid",
)


async def expect_refused(
    probe: Probe,
    wire: Wire,
    offer: Offer,
    reply: Reply,
    signed: Signed,
    code: str,
    check_id: str,
    *,
    paid_later: bool = False,
) -> None:
    """``reply`` refuses the mandates with ``code``; the task is unchanged and nothing moved (nor moves
    until the end of the run, unless the check pays the authorization itself later: ``paid_later``).

    Raises:
        CheckFailed: any of these is not so.
    """
    problem = expect_error(reply, "INVALID_PARAMS", wire.interface)
    if problem:
        raise fail(f"the mandates were not refused: {problem}", reply.exchange)
    said = reply.error.info.get("ap2Error") if reply.error is not None else None
    if said != code:
        raise fail(
            f"the refusal's ErrorInfo metadata carries ap2Error {said!r:.40}, not {code}", reply.exchange
        )
    after = await wire.get_task(offer.task_id)
    before_value, after_value = extension_object(offer.reply.task), extension_object(after.task)
    if state_of(after.task) != "TASK_STATE_INPUT_REQUIRED" or before_value != after_value:
        raise fail("the task changed although the mandates were refused", reply.exchange, after.exchange)
    if artifacts_of(after.task):
        raise fail("the task whose mandates were refused carries work", reply.exchange, after.exchange)
    if paid_later:
        if await probe.run.chain.nonce_used(signed.nonce_at, signed.payer, signed.nonce):
            raise fail(
                "the authorization was used on chain although its mandates were refused", reply.exchange
            )
        return
    await expect_nothing_moved(probe, signed, reply, check_id)


def _error_receipts(found: Round, reply: Reply, sent: Ap2Mandates, code: str) -> None:
    """The refusal's error receipts (§20.6): both in its ErrorInfo metadata, answering the mandates sent."""
    info = reply.error.info if reply.error is not None else {}
    tokens = info.get("ap2CheckoutReceipt"), info.get("ap2PaymentReceipt")
    if not all(isinstance(token, str) for token in tokens):
        raise fail(
            "the refusal's ErrorInfo metadata carries no ap2CheckoutReceipt and ap2PaymentReceipt",
            reply.exchange,
        )
    claims = [
        verify_receipt(found, str(token), reply, status="Error", mandate=mandate, what=what)
        for token, mandate, what in (
            (tokens[0], sent.checkout_mandate, "checkout error receipt"),
            (tokens[1], sent.payment_mandate, "payment error receipt"),
        )
    ]
    for what, said in zip(("checkout error receipt", "payment error receipt"), claims, strict=True):
        if said.get("error") != code or not isinstance(said.get("error_description"), str):
            raise fail(f"the {what} does not carry error {code} and an error_description", reply.exchange)
    if claims[1].get("payment_id") != found.claims.get("id"):
        raise fail("the payment error receipt's payment_id is not the offerId", reply.exchange)


_TWISTED = {
    "ap2.issuer-untrusted": (Twist(untrusted_issuer=True), _CREDENTIAL),
    "ap2.unknown-constraint": (Twist(unknown_constraint=True), Ap2ErrorCode.UNRESOLVED_CONSTRAINT.value),
    "ap2.budget": (Twist(budget_below_price=True), _MANDATE),
}


async def ap2_refusal(probe: Probe, wire: Wire, check_id: str) -> None:
    """One check of ``AP2_REFUSAL_CHECKS``, on a task of its own."""
    tenant = wire.interface.tenant
    async with probe.check(check_id) as shown:
        if check_id == "ap2.required":
            await _required(probe, wire, shown)
            return
        entry, url = mandates_gate(probe, tenant)
        found = await new_round(probe, wire, entry, url)
        shown.append(found.offer.reply.exchange)
        offer = found.offer
        signed, payload = sign(probe, wire, offer)
        if check_id == "ap2.binding-checkout":
            other = await new_round(probe, wire, entry, url)
            sent = mandates(probe, found, payload, Twist(checkout_jwt=other.jwt))
            reply = await pay(wire, offer, payload, sent)
            await expect_refused(probe, wire, offer, reply, signed, _MANDATE, check_id)
        elif check_id == "ap2.binding-round":
            for twist in (Twist(aud="not." + entry.merchant.id), Twist(nonce=os.urandom(16).hex())):
                reply = await pay(wire, offer, payload, mandates(probe, found, payload, twist))
                await expect_refused(probe, wire, offer, reply, signed, _CREDENTIAL, check_id)
        elif check_id in ("ap2.binding-payload", "ap2.refused-then-paid"):
            _, another = sign(probe, wire, offer)
            reply = await pay(wire, offer, payload, mandates(probe, found, payload, Twist(payment=another)))
            then_paid = check_id == "ap2.refused-then-paid"
            await expect_refused(probe, wire, offer, reply, signed, _MANDATE, check_id, paid_later=then_paid)
            if then_paid:
                await paid_with_mandates(probe, wire, found, signed, payload, receipts=False)
        else:
            twist, code = _TWISTED[check_id]
            sent = mandates(probe, found, payload, twist)
            reply = await pay(wire, offer, payload, sent)
            await expect_refused(probe, wire, offer, reply, signed, code, check_id)
            if check_id == "ap2.budget":
                _error_receipts(found, reply, sent, code)


async def _required(probe: Probe, wire: Wire, shown: list[Any]) -> None:
    """A tenant declared ``required: true``, paid without mandates."""
    tenant = wire.interface.tenant
    entry, _ = tenant_entry(probe, tenant)
    if not entry.required:
        raise NotApplicable(f"params.ap2 does not declare tenant {tenant or '(default)'} required: true")
    offer = await new_offer(probe, wire, with_mandates=True)  # the kit leaves them out on purpose
    shown.append(offer.reply.exchange)
    signed, payload = sign(probe, wire, offer)
    reply = await pay(wire, offer, payload, None)
    await expect_refused(probe, wire, offer, reply, signed, _MANDATE, "ap2.required")

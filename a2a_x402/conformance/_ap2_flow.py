"""The embedded flow's checks of one A2A 1.0 interface (§20.3 to §20.6): the checkout beside the terms, and a
task paid with mandates, its settlement and its AP2 receipts.

They apply to the tenants ``params.ap2`` declares, and are skipped, saying so, elsewhere. The checks of the
offer need nothing but the card; a payment with mandates needs the AP2 SDK and an issuer key the merchant
trusts for the tenant (``--ap2-issuer-key``), else it is skipped saying which is missing. The shared steps
(a verified round, the mandates part, the refusal's form) serve ``_ap2_refusals`` too.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from joserfc.jwk import KeySet

from a2a_x402.extension import (
    Ap2Declaration,
    Ap2Mandates,
    ExtensionMetadataError,
    parse_ap2_receipts,
)

from ._ap2_mandates import STRAIGHT, Twist, closed_reference, make_mandates
from ._ap2_offer import checkout_jwt_of, checkout_keys, tenant_entry, verify_checkout, verify_jws
from ._ap2_sdk import Ap2SdkError, import_key, sdk_problem
from ._context import NotApplicable, Probe, fail
from ._flows import completed
from ._messages import extension_message, user_message
from ._reading import artifacts_of, checkout_artifacts_of, state_of, status_message_of
from ._reply import Reply
from ._signer import Signed, payload_v2
from ._steps import (
    Offer,
    expect_nothing_moved,
    expect_settled,
    extension_object,
    new_offer,
    offer_from,
    outcome_of,
)
from ._wire import Wire

__all__ = [
    "AP2_OFFER_CHECKS",
    "Round",
    "ap2_offer",
    "ap2_paid",
    "mandates",
    "mandates_gate",
    "new_round",
    "paid_with_mandates",
    "pay",
    "sign",
    "verify_receipt",
]

JSON = Any
AP2_OFFER_CHECKS = (
    "ap2.checkout-offered",
    "ap2.checkout-signed",
    "ap2.checkout-not-work",
    "ap2.checkout-replaced",
)


@dataclass(frozen=True)
class Round:
    """A task offered terms with a checkout that verifies: what the mandates close over."""

    offer: Offer
    entry: Ap2Declaration
    keys: KeySet
    jwt: str
    claims: JSON


def mandates_gate(probe: Probe, tenant: str) -> tuple[Ap2Declaration, str]:
    """The tenant's declaration and ``jwksUrl``, when the kit can present mandates to it.

    Raises:
        NotApplicable: the tenant is not declared, the SDK is missing, or no issuer key was given.
    """
    entry, url = tenant_entry(probe, tenant)
    missing = sdk_problem()
    if missing:
        raise NotApplicable(missing)
    if probe.run.ap2_issuer_key is None:
        raise NotApplicable(
            f"presenting mandates needs an issuer key the merchant trusts for tenant {tenant or '(default)'} "
            "(--ap2-issuer-key FILE)"
        )
    try:
        import_key(probe.run.ap2_issuer_key)
    except Ap2SdkError as unusable:  # the operator's setup, not the merchant's fault
        raise NotApplicable(str(unusable)) from None
    return entry, url


async def new_round(probe: Probe, wire: Wire, entry: Ap2Declaration, url: str) -> Round:
    """A new task's terms and its checkout, verified as a client must before paying with mandates."""
    offer = await new_offer(probe, wire, with_mandates=True)
    jwt = checkout_jwt_of(offer.reply.task, offer.reply)
    keys = await checkout_keys(probe, url)
    return Round(offer, entry, keys, jwt, verify_checkout(probe, keys, jwt, entry, offer.reply))


def sign(probe: Probe, wire: Wire, offer: Offer, **variant: Any) -> tuple[Signed, JSON]:
    """An EIP-3009 payment of ``offer`` (``variant`` as ``Signer.sign`` takes it) and its x402 payload."""
    signed = probe.run.signer.sign(
        offer.entry, tenant=wire.interface.tenant, network=offer.network, amount=offer.amount, **variant
    )
    return signed, payload_v2(offer.entry, signed)


def mandates(probe: Probe, found: Round, payload: JSON, twist: Twist = STRAIGHT) -> Ap2Mandates:
    """The mandates of ``found`` for ``payload``, twisted by ``twist``."""
    issuer = probe.run.ap2_issuer_key
    if issuer is None:
        raise NotApplicable("no issuer key was given (--ap2-issuer-key FILE)")
    return make_mandates(issuer, found.entry, found.jwt, found.claims, payload, twist)


async def pay(wire: Wire, offer: Offer, payload: JSON, with_mandates: Ap2Mandates | None) -> Reply:
    """Send ``payload`` for ``offer``'s task with the mandates part of §20.4 (``None``: without)."""
    message = extension_message(wire.interface, offer.task_id, "payment-submitted", payload=payload)
    if with_mandates is not None:
        message["parts"].append({"data": with_mandates.to_wire(), "mediaType": "application/json"})
    return await wire.send(message)


def verify_receipt(found: Round, token: str, reply: Reply, *, status: str, mandate: str, what: str) -> JSON:
    """The claims of an AP2 receipt once it verifies and names ``status``, its issuer, time and the
    ``mandate`` it answers (§20.6).

    Raises:
        CheckFailed: it does not.
    """
    _, claims = verify_jws(found.keys, token, what, reply)
    if claims.get("status") != status:
        raise fail(f"the {what} says status {claims.get('status')!r:.20}, not {status}", reply.exchange)
    if not isinstance(claims.get("iss"), str) or not isinstance(claims.get("iat"), int):
        raise fail(f"the {what} has no iss or iat", reply.exchange)
    if claims.get("reference") != closed_reference(mandate):
        raise fail(f"the {what}'s reference is not the hash of the closed mandate sent", reply.exchange)
    return claims


def _success_receipts(found: Round, sent: Ap2Mandates, paid: Reply, receipt: JSON) -> None:
    """The receipts part of the completed status (§20.6): success receipts answering ``sent``."""
    message = status_message_of(paid.task) or {}
    parts = [p for p in message.get("parts") or [] if isinstance(p, dict) and "data" in p]
    readable = []
    for part in parts:
        try:
            readable.append((part, parse_ap2_receipts(part.get("data"))))
        except ExtensionMetadataError:
            continue
    if len(readable) != 1:
        raise fail(
            f"the completed status message carries {len(readable)} AP2 receipts parts, not one (§20.6)",
            paid.exchange,
        )
    part, receipts = readable[0]
    if part.get("mediaType") != "application/json":
        raise fail("the receipts part is not of mediaType application/json", paid.exchange)
    checkout = verify_receipt(
        found,
        receipts.checkout_receipt,
        paid,
        status="Success",
        mandate=sent.checkout_mandate,
        what="checkout receipt",
    )
    if checkout.get("order_id") != found.offer.task_id:
        raise fail("the checkout receipt's order_id is not the task id", paid.exchange)
    payment = verify_receipt(
        found,
        receipts.payment_receipt,
        paid,
        status="Success",
        mandate=sent.payment_mandate,
        what="payment receipt",
    )
    if payment.get("payment_id") != found.claims.get("id"):
        raise fail("the payment receipt's payment_id is not the offerId", paid.exchange)
    transaction = receipt.get("transaction")
    network = receipt.get("network") or found.offer.network
    if payment.get("psp_confirmation_id") != transaction:
        raise fail(
            "the payment receipt's psp_confirmation_id is not the x402 receipt's transaction", paid.exchange
        )
    if payment.get("network_confirmation_id") != f"{network}:{transaction}":
        raise fail(
            "the payment receipt's network_confirmation_id is not the network and transaction", paid.exchange
        )


async def paid_with_mandates(
    probe: Probe, wire: Wire, found: Round, signed: Signed, payload: JSON, *, receipts: bool = True
) -> None:
    """Pay ``found`` with ``payload`` and good mandates: completed, settled once, and (``receipts``) the
    success receipts."""
    sent = mandates(probe, found, payload)
    paid = await outcome_of(probe, wire, await pay(wire, found.offer, payload, sent))
    if paid.error is not None or paid.task is None:
        said = paid.error.info.get("ap2Error", "no ap2Error") if paid.error else "no task"
        raise fail(f"the payment with good mandates was refused ({said})", paid.exchange)
    receipt = completed(paid.task, paid)
    await expect_settled(probe.run.chain, probe, signed, receipt, paid)
    if receipts:
        _success_receipts(found, sent, paid, receipt)


async def ap2_paid(probe: Probe, wire: Wire) -> None:
    """``ap2.paid-with-mandates`` on a task of its own."""
    async with probe.check("ap2.paid-with-mandates") as shown:
        entry, url = mandates_gate(probe, wire.interface.tenant)
        found = await new_round(probe, wire, entry, url)
        shown.append(found.offer.reply.exchange)
        signed, payload = sign(probe, wire, found.offer)
        await paid_with_mandates(probe, wire, found, signed, payload)


def _only_checkout(task: JSON, reply: Reply) -> None:
    if artifacts_of(task):
        raise fail(
            "the unpaid task carries an artifact beside the checkout: unpaid work (§7.3 rule 4)",
            reply.exchange,
        )
    if len(checkout_artifacts_of(task)) != 1:
        raise fail("the unpaid task does not carry exactly one checkout artifact", reply.exchange)


async def ap2_offer(probe: Probe, wire: Wire) -> None:
    """The checkout of a new task: offered, signed, not work, replaced by fresh terms."""
    tenant = wire.interface.tenant
    async with probe.check("ap2.checkout-offered") as shown:
        entry, url = tenant_entry(probe, tenant)
        offer = await new_offer(probe, wire, "any")
        shown.append(offer.reply.exchange)
        jwt = checkout_jwt_of(offer.reply.task, offer.reply)
    if probe.failed or probe.skip_rest("ap2.checkout-offered", AP2_OFFER_CHECKS[1:]):
        return
    async with probe.check("ap2.checkout-signed"):
        keys = await checkout_keys(probe, url)
        claims = verify_checkout(probe, keys, jwt, entry, offer.reply)
    if probe.failed:
        return
    async with probe.check("ap2.checkout-not-work") as shown:
        _only_checkout(offer.reply.task, offer.reply)
        window = offer.entry.get("maxTimeoutSeconds")
        window = window if isinstance(window, int) and window > 0 else 300
        now = int(time.time())
        # Without mandates: a tenant that requires them refuses it, one that does not gives fresh terms.
        payable = offer_from(probe, offer.reply, tenant, "eip3009", with_mandates=True)
        signed, payload = sign(
            probe, wire, payable, valid_after=now + min(120, window // 2), valid_before=now + window
        )
        refused = await pay(wire, offer, payload, None)
        shown.append(refused.exchange)
        after = await wire.get_task(offer.task_id)
        if state_of(after.task) != "TASK_STATE_INPUT_REQUIRED":
            raise fail("a payment not yet valid left the task other than waiting for payment", after.exchange)
        _only_checkout(after.task, after)
        await expect_nothing_moved(probe, signed, refused, "ap2.checkout-not-work")
    async with probe.check("ap2.checkout-replaced"):
        again = await wire.send(
            user_message(wire.interface, probe.run.discovery.request_text, task_id=offer.task_id)
        )
        after = await wire.get_task(offer.task_id)
        value = extension_object(after.task)
        if (
            state_of(after.task) != "TASK_STATE_INPUT_REQUIRED"
            or (value or {}).get("status") != "payment-required"
        ):
            raise fail("a new request on the task (T15) got no fresh terms", again.exchange, after.exchange)
        fresh = checkout_jwt_of(after.task, after)
        if fresh == jwt:
            raise fail("fresh terms (T15) kept the previous round's checkout", after.exchange)
        renewed = verify_checkout(probe, keys, fresh, entry, after)
        if renewed.get("id") == claims.get("id"):
            raise fail("the fresh terms' checkout names the previous offerId", after.exchange)

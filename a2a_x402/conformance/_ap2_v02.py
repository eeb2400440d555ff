"""The embedded flow's v0.2 form on A2A 0.3 (§20.7): an AP2 v0.1 ``CartMandate`` offered instead of
``x402.payment.required``, paid with an ``ap2.mandates.PaymentMandate`` carrying the x402 payment.

They run on the 0.3 interfaces of the tenants a 0.3 card's v0.2 declaration lists in ``params.ap2``
(``Discovery.ap2_v02``), and are skipped, saying so, elsewhere. The offer's checks read the cart with the AP2
SDK's v0.1 model and verify it from outside: its x402 method data are v1 terms the card allows, its id is
their ``offerId``, its total keeps the price rule, and ``merchant_authorization`` verifies with a key of the
entry's ``jwksUrl`` and hashes the ``contents`` sent. The checks that pay need the SDK and an issuer key the
merchant trusts for the tenant (``--ap2-issuer-key``): the kit then signs ``user_authorization`` as a v0.2
client does (``_ap2_sdk.payment_mandate``). Each runs on a task of its own; a refusal is checked as the
other refusals are (``InvalidParamsError`` with ``ap2Error``, the task unchanged, nothing moved on chain).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from a2a_x402.extension import (
    AP2_V01_PAYMENT_MANDATE_KEY,
    AP2_X402_METHOD,
    Ap2Declaration,
    Ap2ErrorCode,
    Ap2PriceError,
    ExtensionMetadataError,
    minor_unit_exponent,
    parse_ap2_declaration,
    payload_hash,
)

from ._ap2_offer import checkout_keys, insecure_ok, price_rule, relaxed, verify_jws
from ._ap2_sdk import (
    Ap2SdkError,
    generate_key,
    import_key,
    payment_mandate,
    read_cart,
    sdk_problem,
)
from ._context import NotApplicable, Probe, fail
from ._flows_0_3 import caip2, check_terms_v1, expect_paid_0_3, flat_value, sign_v1
from ._messages import extension_message, user_message
from ._reading import artifacts_of, cart_data, checkout_artifacts_of, expect_error, metadata_of, state_of
from ._reply import Reply
from ._signer import Signed
from ._steps import expect_nothing_moved
from ._wire import Wire

__all__ = ["AP2_V02_CHECKS", "AP2_V02_PAYMENT_CHECKS", "ap2_v02_offer", "ap2_v02_payment"]

JSON = Any
AP2_V02_CHECKS = ("ap2.v02-no-required", "ap2.v02-cart-offered")
AP2_V02_PAYMENT_CHECKS = (
    "ap2.v02-paid-with-mandate",
    "ap2.v02-binding-payment",
    "ap2.v02-standalone-refused",
)
_CLOCK_SKEW_S = 300
_WAITING = "TASK_STATE_INPUT_REQUIRED"


@dataclass(frozen=True)
class CartRound:
    """A 0.3 task offered a cart that verifies: what a ``PaymentMandate`` pays."""

    task_id: str
    reply: Reply
    cart: JSON
    """The ``CartMandate`` as the SDK's v0.1 model writes it."""
    terms: JSON
    """The x402 terms of its ``https://www.x402.org/`` method data."""


def v02_entry(probe: Probe, tenant: str) -> tuple[Ap2Declaration, str]:
    """The tenant's entry in a 0.3 card's v0.2 ``params.ap2`` and its ``jwksUrl``.

    Raises:
        NotApplicable: no such entry (the tenant is offered the standalone flow on A2A 0.3).
        CheckFailed: the entry cannot be read, or its ``jwksUrl`` is plain http the run does not allow.
    """
    raw = probe.run.discovery.ap2_v02.get(tenant)
    if raw is None:
        raise NotApplicable(
            f"no 0.3 card's v0.2 declaration lists tenant {tenant or '(default)'} in params.ap2: it is not "
            "offered the embedded flow's v0.2 form (§20.7)"
        )
    url = raw.get("jwksUrl")
    allow = probe.run.allow_insecure_jwks
    if isinstance(url, str) and url.startswith("http://") and not insecure_ok(url, allow):
        raise fail(f"jwksUrl {url} is not https (--allow-insecure-jwks takes loopback http, in development)")
    try:
        [entry] = parse_ap2_declaration(relaxed([raw], allow))
    except ExtensionMetadataError as error:
        raise fail(f"the v0.2 declaration's params.ap2 entry cannot be read: {error}") from None
    return entry, str(url)


async def _waiting_task(probe: Probe, wire: Wire) -> Reply:
    """A new priced task, once it waits for payment with ``x402.payment.status`` ``payment-required``."""
    reply = await wire.send(user_message(wire.interface, probe.run.discovery.request_text))
    if reply.error is not None or reply.task is None:
        raise fail("the priced request got no task", reply.exchange)
    if (
        state_of(reply.task, version="0.3") != _WAITING
        or flat_value(reply.task, "status") != "payment-required"
    ):
        raise fail("the task is not input-required with x402.payment.status payment-required", reply.exchange)
    return reply


def _cart_of(reply: Reply) -> JSON:
    """The cart of the task's one ``ap2-checkout`` artifact, read by the SDK's v0.1 model."""
    found = checkout_artifacts_of(reply.task)
    if len(found) != 1:
        raise fail(f"the task carries {len(found)} ap2-checkout artifacts, not one (§20.7)", reply.exchange)
    parts = found[0].get("parts")
    value = cart_data(parts[0]) if isinstance(parts, list) and len(parts) == 1 else None
    if value is None:
        raise fail(
            "the ap2-checkout artifact is not one data part holding ap2.mandates.CartMandate", reply.exchange
        )
    try:
        return read_cart(value)
    except Ap2SdkError as error:
        raise fail(str(error), reply.exchange) from None


async def read_round(probe: Probe, reply: Reply, entry: Ap2Declaration, url: str) -> CartRound:
    """The cart of ``reply``'s task, verified as a v0.2 client must before paying it (§20.7).

    Raises:
        CheckFailed: the cart is missing, malformed, unsigned, or does not keep §20.7.
    """
    cart = _cart_of(reply)
    contents = cart["contents"]
    request = contents["payment_request"]
    methods = [m for m in request["method_data"] if m.get("supported_methods") == AP2_X402_METHOD]
    if len(methods) != 1:
        raise fail(
            f"the cart has {len(methods)} {AP2_X402_METHOD} method data entries, not one", reply.exchange
        )
    terms = check_terms_v1(methods[0].get("data"), reply, "the cart's x402 method data")
    offer_id = contents["id"]
    accepts = [e for e in terms["accepts"] if isinstance(e, dict)]
    if {(e.get("extra") or {}).get("offerId") for e in accepts} != {offer_id}:
        raise fail("the cart's contents.id is not the offerId of every offered entry", reply.exchange)
    if request["details"]["id"] != offer_id:
        raise fail("the cart's payment_request.details.id is not the offerId", reply.exchange)
    if not isinstance(cart["merchant_authorization"], str):
        raise fail("the cart has no merchant_authorization (§20.7)", reply.exchange)
    _, claims = verify_jws(
        await checkout_keys(probe, url),
        cart["merchant_authorization"],
        "the cart's merchant_authorization",
        reply,
    )
    if claims.get("cart_hash") != payload_hash(contents):
        raise fail(
            "merchant_authorization's cart_hash is not the hash of the cart's contents", reply.exchange
        )
    if claims.get("jti") != offer_id or claims.get("sub") != entry.merchant.id:
        raise fail(
            "merchant_authorization's jti is not the offerId, or its sub not the merchant id", reply.exchange
        )
    expires, issued = claims.get("exp"), claims.get("iat")
    if not isinstance(expires, int) or not isinstance(issued, int) or expires <= issued:
        raise fail("merchant_authorization's exp is not after its iat", reply.exchange)
    if expires < time.time() - _CLOCK_SKEW_S:
        raise fail("the cart of the current terms has already expired", reply.exchange)
    _price(probe, request["details"]["total"]["amount"], accepts, reply)
    task_id = reply.task.get("id")
    if not isinstance(task_id, str) or not task_id:
        raise fail("the task has no id", reply.exchange)
    return CartRound(task_id, reply, cart, terms)


def _price(probe: Probe, amount: JSON, accepts: list[JSON], reply: Reply) -> None:
    """The cart's total (a W3C amount in major units) is each entry's amount under the price rule."""
    currency, value = str(amount.get("currency")), amount.get("value")
    try:
        scale = 10 ** minor_unit_exponent(currency)
    except Ap2PriceError as error:
        raise fail(f"the cart's total cannot be priced: {error}", reply.exchange) from None
    total = round(value * scale) if isinstance(value, int | float) else -1
    if total < 0 or abs(total - value * scale) > 1e-6:
        raise fail(f"the cart's total is not a whole number of minor units of {currency}", reply.exchange)
    for offered in accepts:
        amount_of = offered.get("maxAmountRequired", offered.get("amount"))
        entry = {
            "network": caip2(str(offered.get("network"))),
            "asset": offered.get("asset"),
            "amount": amount_of,
        }
        price_rule(probe, entry, total, currency, reply)


async def ap2_v02_offer(probe: Probe, wire: Wire) -> None:
    """``ap2.v02-no-required`` and ``ap2.v02-cart-offered`` on a new task."""
    async with probe.check("ap2.v02-no-required") as shown:
        entry, url = v02_entry(probe, wire.interface.tenant)
        reply = await _waiting_task(probe, wire)
        shown.append(reply.exchange)
        if "x402.payment.required" in (metadata_of(reply.task) or {}):
            raise fail(
                "the status message carries x402.payment.required beside the cart (§20.7)", reply.exchange
            )
    if probe.failed or probe.skip_rest("ap2.v02-no-required", ("ap2.v02-cart-offered",)):
        return
    async with probe.check("ap2.v02-cart-offered"):
        missing = sdk_problem()
        if missing:
            raise NotApplicable(missing)
        await read_round(probe, reply, entry, url)


def _gate(probe: Probe, tenant: str) -> tuple[Ap2Declaration, str, Any]:
    """The tenant's entry, its ``jwksUrl`` and the issuer key, when the kit can pay it with a mandate."""
    entry, url = v02_entry(probe, tenant)
    missing = sdk_problem()
    if missing:
        raise NotApplicable(missing)
    if probe.run.ap2_issuer_key is None:
        raise NotApplicable(
            f"presenting a PaymentMandate needs an issuer key the merchant trusts for tenant "
            f"{tenant or '(default)'} (--ap2-issuer-key FILE)"
        )
    try:
        return entry, url, import_key(probe.run.ap2_issuer_key)
    except Ap2SdkError as unusable:  # the operator's setup, not the merchant's fault
        raise NotApplicable(str(unusable)) from None


def _mandate_message(wire: Wire, task_id: str, mandate: JSON) -> JSON:
    """A 0.3 message paying ``task_id`` with ``mandate`` in a data part, ``payment-submitted`` alone."""
    message = extension_message(wire.interface, task_id, "payment-submitted")
    value = {AP2_V01_PAYMENT_MANDATE_KEY: mandate}
    part = (
        {"kind": "data", "data": value} if wire.interface.binding == "JSONRPC" else {"data": {"data": value}}
    )
    message["parts" if "parts" in message else "content"].append(part)
    return message


async def _expect_refused(
    probe: Probe, wire: Wire, found: CartRound, reply: Reply, signed: tuple[Signed, ...], check_id: str
) -> None:
    """``reply`` is ``InvalidParamsError`` with ``ap2Error`` ``invalid_mandate``, the task unchanged, and no
    authorization of ``signed`` moved (nor moves until the end of the run)."""
    problem = expect_error(reply, "INVALID_PARAMS", wire.interface)
    if problem:
        raise fail(f"the payment was not refused: {problem}", reply.exchange)
    said = reply.error.info.get("ap2Error") if reply.error is not None else None
    if said != Ap2ErrorCode.INVALID_MANDATE.value:
        raise fail(f"the refusal carries ap2Error {said!r:.40}, not invalid_mandate", reply.exchange)
    after = await wire.get_task(found.task_id)
    if (
        state_of(after.task, version="0.3") != _WAITING
        or flat_value(after.task, "status") != "payment-required"
    ):
        raise fail("the task changed although the payment was refused", reply.exchange, after.exchange)
    if artifacts_of(after.task):
        raise fail("the task whose payment was refused carries work", reply.exchange, after.exchange)
    for each in signed:
        await expect_nothing_moved(probe, each, reply, check_id)


async def ap2_v02_payment(probe: Probe, wire: Wire, check_id: str) -> None:
    """One check of ``AP2_V02_PAYMENT_CHECKS``, on a task of its own."""
    tenant = wire.interface.tenant
    async with probe.check(check_id) as shown:
        entry, url, user = _gate(probe, tenant)
        reply = await _waiting_task(probe, wire)
        shown.append(reply.exchange)
        found = await read_round(probe, reply, entry, url)
        signed, payload = sign_v1(probe, tenant, found.terms)
        agent, now = generate_key("agent"), int(time.time())
        merchant = entry.merchant.id
        if check_id == "ap2.v02-paid-with-mandate":
            mandate = payment_mandate(
                found.cart, payload, user_key=user, agent_key=agent, merchant_id=merchant, now=now
            )
            answer = await wire.send(_mandate_message(wire, found.task_id, mandate))
            await expect_paid_0_3(probe, wire, answer, signed)
        elif check_id == "ap2.v02-binding-payment":
            # The user signed for one payment; the mandate's details carry another of the same terms.
            swapped_signed, swapped = sign_v1(probe, tenant, found.terms)
            mandate = payment_mandate(
                found.cart,
                swapped,
                user_key=user,
                agent_key=agent,
                merchant_id=merchant,
                now=now,
                signed_payment=payload,
            )
            answer = await wire.send(_mandate_message(wire, found.task_id, mandate))
            await _expect_refused(probe, wire, found, answer, (signed, swapped_signed), check_id)
        else:
            plain = extension_message(wire.interface, found.task_id, "payment-submitted", payload=payload)
            answer = await wire.send(plain)
            await _expect_refused(probe, wire, found, answer, (signed,), check_id)

"""The embedded flow's v0.2 form on A2A 0.3 (specification §20.7): AP2 v0.1 carts and payment mandates.

A round offered in extension v0.2 to a tenant whose `ap2` entry has `required: true` carries its terms in
an AP2 v0.1 `CartMandate` (`merchant.ap2.build_cart`), sent as the task's `ap2-checkout` artifact before
the `payment-required` status, which then has no `x402.payment.required`: v0.2 clients tell the embedded
flow by its absence. The cart is stored with the offer (in its checkout column, as RFC 8785 JSON where a
1.0 round keeps its checkout JWT). Other tenants on A2A 0.3 get the standalone flow, as a v0.2 client
that does not implement the embedded flow could not pay them otherwise.

The client pays with `payment-submitted` and no `x402.payment.payload`: the payment is the `details` of
the `payment_response` of an `ap2.mandates.PaymentMandate` data part (`payment_of`). It is then checked
like any payment (`_handler`), and before its presentation is recorded `check` verifies the mandate
against the stored cart (`merchant.ap2.verify_payment_mandate`); a refusal is `InvalidParamsError` with
the `ap2Error` and changes nothing. From there the payment is taken exactly as a standalone one, its
receipts in `x402.payment.receipts` only.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import rfc8785
from a2a.types import Artifact, Message, Part, TaskArtifactUpdateEvent, TaskStatusUpdateEvent
from a2a.utils.errors import InvalidParamsError
from google.protobuf.json_format import MessageToDict
from google.protobuf.struct_pb2 import Struct, Value

from a2a_x402.extension import (
    AP2_CHECKOUT_ARTIFACT_ID,
    AP2_V01_CART_MANDATE_KEY,
    AP2_V01_PAYMENT_MANDATE_KEY,
    EXTENSION_URI_V02,
    FLAT_KEY_PREFIX,
    Ap2ErrorCode,
    Dialect,
    ExtensionMetadataError,
    PaymentStatus,
    PaymentSubmittedData,
    decode,
)
from a2a_x402.facilitator.wire import PaymentRequired, PaymentRequiredV1

from ..ap2 import (
    CheckoutItem,
    CheckoutNotOffered,
    MandateRefused,
    ParAsset,
    TrustedIssuers,
    build_cart,
    checkout_claims,
    token_kids,
    verify_payment_mandate,
)
from ..tenants import TenantAp2, tenant_name
from ._offer_table import Offer
from ._pricing import Pricing
from ._refusals import mandate_refusal

__all__ = ["CART_ARTIFACT_NAME", "CartMandates", "CartOffer", "strip_mandate_secrets"]

logger = logging.getLogger(__name__)

CART_ARTIFACT_NAME = "AP2 cart"
_JSON = "application/json"
_STATUS_KEY = FLAT_KEY_PREFIX + "status"
_REQUIRED_KEY = FLAT_KEY_PREFIX + "required"
_SUBMITTED = {_STATUS_KEY: PaymentStatus.PAYMENT_SUBMITTED.value}


@dataclass(frozen=True, slots=True)
class CartOffer:
    """A round's `CartMandate`: `stored` is what the offer row keeps of it (its RFC 8785 JSON)."""

    cart: Mapping[str, Any]

    @property
    def stored(self) -> str:
        """The cart as stored with the offer and read back by `CartMandates.check`."""
        return rfc8785.dumps(self.cart).decode("utf-8")

    def artifact(self, task_id: str, context_id: str) -> TaskArtifactUpdateEvent:
        """The cart's artifact (§20.7): it replaces an earlier round's (`append` false, the same id)."""
        data = Value()
        data.struct_value.update({AP2_V01_CART_MANDATE_KEY: dict(self.cart)})
        artifact = Artifact(
            artifact_id=AP2_CHECKOUT_ARTIFACT_ID,
            name=CART_ARTIFACT_NAME,
            parts=[Part(data=data, media_type=_JSON)],
            extensions=[EXTENSION_URI_V02],
        )
        return TaskArtifactUpdateEvent(
            task_id=task_id, context_id=context_id, artifact=artifact, append=False, last_chunk=True
        )

    @staticmethod
    def without_terms(status: TaskStatusUpdateEvent) -> TaskStatusUpdateEvent:
        """`status` without `x402.payment.required`, which the embedded flow of v0.2 MUST NOT send."""
        del status.status.message.metadata[_REQUIRED_KEY]
        return status


class CartMandates:
    """The v0.2 form of the embedded flow for the tenants of `pricing` whose `ap2` entry is required.

    `titles` are the skills' names by id, the cart's item labels (a skill not named is labelled by its id);
    `issuers` the issuer keys each tenant trusts, by tenant id (its files and `https` sources, as on A2A 1.0;
    a tenant not there trusts its files' keys only).
    """

    def __init__(
        self,
        pricing: Pricing,
        titles: Mapping[str, str] | None = None,
        issuers: Mapping[str, TrustedIssuers] | None = None,
    ) -> None:
        self._pricing = pricing
        self._titles = dict(titles or {})
        self._issuers = dict(issuers or {})
        self._said: set[tuple[str, str]] = set()

    def offer(
        self,
        tenant_id: str,
        skill: str,
        required: PaymentRequired,
        terms: PaymentRequired | PaymentRequiredV1,
        dialect: Dialect,
    ) -> CartOffer | None:
        """The cart of a round whose stored terms are `required` and whose v0.2 document is `terms`, or
        None: not v0.2, a tenant not in that form, or terms the price rule refuses (said once in the log:
        the round is then offered in the standalone flow)."""
        ap2 = self._ap2(tenant_id)
        if ap2 is None or dialect is not Dialect.V02:
            return None
        asset = self._pricing.asset
        title = self._titles.get(skill) or skill
        now = int(time.time())
        try:
            claims = checkout_claims(
                required,
                merchant=ap2.merchant,
                item=CheckoutItem(id=skill, title=title),
                assets=(ParAsset(network=asset.network, address=asset.address, decimals=asset.decimals),),
                currency=ap2.currency,
                now=now,
            )
        except CheckoutNotOffered as exc:
            if (tenant_id, skill) not in self._said:
                self._said.add((tenant_id, skill))
                logger.info(
                    "tenant %s, skill %s: terms offered on A2A 0.3 without an AP2 cart (%s)",
                    tenant_name(tenant_id),
                    skill,
                    exc,
                )
            return None
        total = next(entry["amount"] for entry in claims["totals"] if entry["type"] == "total")
        cart = build_cart(
            terms.to_json_dict(),
            offer_id=claims["id"],
            merchant=ap2.merchant,
            keys=ap2.checkout_keys,
            title=title,
            total=total,
            currency=ap2.currency,
            now=now,
            lifetime_s=claims["exp"] - now,
        )
        return CartOffer(cart)

    def payment_of(
        self, tenant_id: str, message: Message, dialect: Dialect | None
    ) -> PaymentSubmittedData | None:
        """The payment a v0.2 message carries in an `ap2.mandates.PaymentMandate` part, or None without one.

        Raises:
            InvalidParamsError: with `ap2Error`: a mandate for a tenant not in the v0.2 form
                (`mandates_not_supported`), two of them or one not of the form (`invalid_credential`);
                without: metadata beside it other than `payment-submitted` alone, or a payment in
                `details` that is not an x402 payment of the interface.
        """
        if dialect is not Dialect.V02:
            return None
        found = _mandate_parts(message)
        if not found:
            return None
        try:
            if self._ap2(tenant_id) is None:
                raise MandateRefused(
                    Ap2ErrorCode.MANDATES_NOT_SUPPORTED, "this tenant takes no AP2 mandates on A2A 0.3"
                )
            if len(found) > 1:
                raise MandateRefused(Ap2ErrorCode.INVALID_CREDENTIAL, "two PaymentMandates in one message")
            details = _details(found[0])
        except MandateRefused as refused:
            raise mandate_refusal(refused) from None
        flat = MessageToDict(message.metadata) if message.HasField("metadata") else {}
        if {key: value for key, value in flat.items() if key.startswith(FLAT_KEY_PREFIX)} != _SUBMITTED:
            raise InvalidParamsError(
                message="a payment in an AP2 PaymentMandate goes with x402.payment.status payment-submitted "
                "alone (no x402.payment.payload, §20.7)"
            )
        try:
            data = decode({**_SUBMITTED, FLAT_KEY_PREFIX + "payload": details}, Dialect.V02)
        except ExtensionMetadataError as exc:
            raise InvalidParamsError(message=f"the PaymentMandate's details: {exc}") from None
        return data if isinstance(data, PaymentSubmittedData) else None

    @staticmethod
    def applies(offer: Offer, embedded: PaymentSubmittedData | None) -> bool:
        """Whether this form's check, not the 1.0 one, answers a payment for `offer`: the payment came in
        a `PaymentMandate` (`embedded`, from `payment_of`), or the round was offered with a cart."""
        return embedded is not None or _stored_cart(offer) is not None

    async def check(
        self, tenant_id: str, offer: Offer, message: Message, embedded: PaymentSubmittedData | None
    ) -> None:
        """Verify the `PaymentMandate` of `message`, whose payment `payment_of` read (`embedded`), against
        the cart `offer`'s round offered (§20.7).

        Raises:
            InvalidParamsError: the mandate is refused, or the round's cart is paid without one (in
                `x402.payment.payload`, or on A2A 1.0); its `data` holds the `ap2Error`.
        """
        ap2 = self._ap2(tenant_id)
        try:
            cart = _stored_cart(offer)
            if ap2 is None or cart is None:
                raise MandateRefused(
                    Ap2ErrorCode.INVALID_MANDATE, "this round was not offered with an AP2 CartMandate"
                )
            if embedded is None:
                raise MandateRefused(
                    Ap2ErrorCode.INVALID_MANDATE,
                    "this round's AP2 CartMandate is paid only with a PaymentMandate on A2A 0.3",
                )
            mandate = _mandate_parts(message)[0]
            # The keys of the issuer user_authorization names, an https source fetched if it must be.
            trusted = self._issuers.get(tenant_id) or TrustedIssuers(ap2.issuers)
            issuers = await trusted.keys_for(token_kids(mandate.get("user_authorization")))
            verify_payment_mandate(
                cart,
                mandate,
                keys=ap2.checkout_keys,
                issuers=issuers,
                merchant_id=ap2.merchant_id,
                now=int(time.time()),
            )
        except MandateRefused as refused:
            raise mandate_refusal(refused) from None

    def _ap2(self, tenant_id: str) -> TenantAp2 | None:
        tenant = self._pricing.tenants.get(tenant_id)
        ap2 = tenant.ap2 if tenant is not None else None
        return ap2 if ap2 is not None and ap2.required else None


def strip_mandate_secrets(message: Message) -> None:
    """Remove, in place, what a stored `PaymentMandate` part must not keep: the payment's signatures and
    the `user_authorization` presentation (§11: the message is kept in the task's history)."""
    for part in message.parts:
        if not _is_mandate_part(part):
            continue
        mandate = part.data.struct_value.fields[AP2_V01_PAYMENT_MANDATE_KEY].struct_value
        if "user_authorization" in mandate.fields:
            del mandate["user_authorization"]
        for path in (("payload",), ("extensions", "eip2612GasSponsoring", "info")):
            signed: object = mandate
            for name in ("payment_mandate_contents", "payment_response", "details", *path):
                signed = signed[name] if isinstance(signed, Struct) and name in signed else None
            if isinstance(signed, Struct) and "signature" in signed:
                del signed["signature"]


def _is_mandate_part(part: Part) -> bool:
    return (
        part.HasField("data")
        and part.data.HasField("struct_value")
        and AP2_V01_PAYMENT_MANDATE_KEY in part.data.struct_value.fields
    )


def _mandate_parts(message: Message) -> list[Mapping[str, Any]]:
    """The `ap2.mandates.PaymentMandate` values of `message`'s data parts, as JSON."""
    found: list[Mapping[str, Any]] = []
    for part in message.parts:
        if _is_mandate_part(part):
            value = MessageToDict(part.data.struct_value.fields[AP2_V01_PAYMENT_MANDATE_KEY])
            found.append(value if isinstance(value, dict) else {})
    return found


def _details(mandate: Mapping[str, Any]) -> object:
    contents = mandate.get("payment_mandate_contents")
    response = contents.get("payment_response") if isinstance(contents, Mapping) else None
    if not isinstance(response, Mapping) or "details" not in response:
        raise MandateRefused(
            Ap2ErrorCode.INVALID_CREDENTIAL, "malformed PaymentMandate: no payment_response.details"
        )
    return response["details"]


def _stored_cart(offer: Offer) -> Mapping[str, Any] | None:
    """The `CartMandate` stored with `offer`, or None for a round offered without one (or with a 1.0
    checkout JWT)."""
    stored = offer.checkout_jwt
    if stored is None or not stored.startswith("{"):
        return None
    cart = json.loads(stored)
    return cart if isinstance(cart, dict) else None

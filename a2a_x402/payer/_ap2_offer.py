"""What the payer reads of the merchant's side of the embedded flow (§20.2, §20.3, §20.6): the tenant's
``params.ap2`` entry, the task's ``ap2-checkout`` checked before anything is signed for it, and the AP2
receipts of a round.

The checkout JWT and the receipts are verified with the tenant's checkout keys, fetched from the entry's
``jwksUrl`` through a ``JwksCache`` (a timeout and a size limit on every fetch, no redirects, ``https`` only
unless the cache allows plain http on localhost for development) and only from the card's own origin, as
the card's own ``jku`` is: a card, signed or not, cannot send the payer to keys elsewhere.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import rfc8785
from a2a.types import Message, Task
from google.protobuf.json_format import MessageToDict
from joserfc import jws
from joserfc.errors import JoseError

from a2a_x402.agentcard import AgentCardError, JwksCache, origin_of
from a2a_x402.extension import (
    AP2_CHECKOUT_ARTIFACT_ID,
    AP2_CHECKOUT_RECEIPT_KEY,
    EXTENSION_URI,
    Ap2Declaration,
    Ap2PriceError,
    Ap2Receipts,
    ExtensionMetadataError,
    ap2_digest,
    parse_ap2_checkout_data,
    parse_ap2_declaration,
    parse_ap2_receipts,
    token_amount_for_total,
)

from ._ap2_tokens import jwt_claims
from ._card import ResolvedCard
from ._errors import CardError, CheckoutInvalidError, MandateConstraintError

__all__ = ["Ap2Offer", "ReceiptError", "checkout_artifact", "receipts_of", "tenant_declaration"]

_ALG = "ES256"
# Clock skew allowed on the checkout's `exp`, as the merchant allows on the mandates' times.
_SKEW_S = 60
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})


class ReceiptError(ValueError):
    """AP2 receipts that do not verify or do not answer the mandates presented."""


def tenant_declaration(
    card: ResolvedCard, tenant: str, *, allow_insecure_localhost: bool
) -> Ap2Declaration | None:
    """The card's ``params.ap2`` entry for ``tenant``, or ``None`` when the tenant has none.

    Raises:
        CardError: ``params.ap2`` is malformed, or the entry's ``jwksUrl`` is not on the card's origin.
    """
    capabilities = card.card_json.get("capabilities")
    extensions = capabilities.get("extensions") if isinstance(capabilities, Mapping) else None
    listed = extensions if isinstance(extensions, list) else []
    ours = [e for e in listed if isinstance(e, Mapping) and e.get("uri") == EXTENSION_URI]
    params = ours[0].get("params") if ours else None
    if not isinstance(params, Mapping) or "ap2" not in params:
        return None
    entries = params["ap2"]
    loopback: dict[str, str] = {}
    if allow_insecure_localhost and isinstance(entries, list):
        # The wire contract asks for https; a development merchant on loopback serves plain http, which
        # is read as its https twin here and fetched as it is (the cache allows it on loopback only).
        entries = [_as_https(e, loopback) for e in entries]
    try:
        parsed = parse_ap2_declaration(entries)
    except ExtensionMetadataError as exc:
        raise CardError(f"the card's x402 params.ap2 are unreadable: {exc}") from exc
    found = next((e for e in parsed if e.tenant == tenant), None)
    if found is None:
        return None
    url = loopback.get(found.jwks_url, found.jwks_url)
    if origin_of(url) != origin_of(card.url):
        raise CardError(f"the card's AP2 jwksUrl for tenant {tenant!r} is not on the card's origin: {url}")
    return Ap2Declaration(merchant=found.merchant, jwks_url=url, tenant=found.tenant, required=found.required)


def _as_https(entry: object, loopback: dict[str, str]) -> object:
    url = entry.get("jwksUrl") if isinstance(entry, Mapping) else None
    origin = origin_of(url) if isinstance(url, str) else None
    if not isinstance(entry, Mapping) or url is None or origin is None or origin[0] != "http":
        return entry
    if origin[1] not in _LOOPBACK:
        return entry
    secure = "https" + url[len("http") :]
    loopback[secure] = url
    return {**entry, "jwksUrl": secure}


def checkout_artifact(task: Task) -> str | None:
    """The checkout JWT of the task's ``ap2-checkout`` artifact, or ``None`` when the task has none.

    Raises:
        CheckoutInvalidError: the artifact is not one data part holding a compact JWS.
    """
    found = [a for a in task.artifacts if a.artifact_id == AP2_CHECKOUT_ARTIFACT_ID]
    if not found:
        return None
    parts = found[-1].parts
    if len(parts) != 1 or parts[0].WhichOneof("content") != "data":
        raise CheckoutInvalidError("the ap2-checkout artifact is not one data part")
    try:
        return parse_ap2_checkout_data(MessageToDict(parts[0].data))
    except ExtensionMetadataError as exc:
        raise CheckoutInvalidError(f"the ap2-checkout artifact is malformed: {exc}") from None


def receipts_of(message: Message) -> Ap2Receipts | None:
    """The AP2 receipts in a data part of ``message``, or ``None``.

    Raises:
        ReceiptError: a receipts part that is not of the form of §20.6.
    """
    for part in message.parts:
        if part.WhichOneof("content") != "data":
            continue
        data = MessageToDict(part.data)
        if isinstance(data, dict) and AP2_CHECKOUT_RECEIPT_KEY in data:
            try:
                return parse_ap2_receipts(data)
            except ExtensionMetadataError as exc:
                raise ReceiptError(f"the AP2 receipts part is malformed: {exc}") from None
    return None


@dataclass(frozen=True, slots=True)
class Ap2Offer:
    """The tenant's declaration and the keys its checkouts and receipts are verified with."""

    declaration: Ap2Declaration
    jwks: JwksCache

    async def verified_checkout(self, jwt: str, required: Mapping[str, Any], card: ResolvedCard) -> None:
        """Check the checkout JWT of a ``payment-required`` status whose ``required`` (wire form, as
        received) it must carry: §20.3's signature, ``id``, ``x402``, ``merchant``, price rule, and ``exp``.

        Raises:
            CheckoutInvalidError: any check fails.
        """
        try:
            claims = await self._verified(jwt, "the checkout")
        except ReceiptError as exc:
            raise CheckoutInvalidError(str(exc)) from None
        accepts = required.get("accepts")
        if not isinstance(accepts, list) or not accepts:
            raise CheckoutInvalidError("the terms have no entries to check the checkout against")
        offers = {(a.get("extra") or {}).get("offerId") for a in accepts if isinstance(a, Mapping)}
        if offers != {claims.get("id")} or not isinstance(claims.get("id"), str):
            raise CheckoutInvalidError("the checkout's id is not the offerId of every entry of the terms")
        if not _same_json(claims.get("x402"), required):
            raise CheckoutInvalidError("the checkout's x402 claim is not the terms of the status")
        if claims.get("merchant") != self.declaration.merchant.to_wire():
            raise CheckoutInvalidError("the checkout's merchant is not the one the card declares")
        expires = claims.get("exp")
        if not isinstance(expires, int) or expires + _SKEW_S < time.time():
            raise CheckoutInvalidError("the checkout has expired (or names no expiry)")
        total, currency = _total(claims)
        for entry in accepts:
            asset = card.terms.asset(str(entry.get("network")), str(entry.get("asset")))
            decimals = asset.decimals if asset is not None else None
            try:
                if decimals is None:
                    raise Ap2PriceError("the card gives no decimals for the entry's asset")
                wanted = token_amount_for_total(total, decimals=decimals, currency=currency)
            except Ap2PriceError as exc:
                raise CheckoutInvalidError(f"the price rule cannot be checked: {exc}") from None
            if str(entry.get("amount")) != str(wanted):
                raise CheckoutInvalidError(
                    f"the price rule fails: {entry.get('amount')} atomic units for a total of "
                    f"{total} {currency} minor units"
                )

    async def verified_receipts(
        self, receipts: Ap2Receipts, checkout_mandate: str, payment_mandate: str, offer_id: str
    ) -> str:
        """Check both receipts answer the mandates presented: signed with a tenant key, ``reference`` the
        closed mandate's, the payment's ``payment_id`` the ``offerId``; return their ``status``.

        Raises:
            ReceiptError: a receipt does not verify or answer them, or the two disagree on the status.
        """
        checkout = await self._verified(receipts.checkout_receipt, "the checkout receipt")
        payment = await self._verified(receipts.payment_receipt, "the payment receipt")
        if checkout.get("reference") != _reference(checkout_mandate):
            raise ReceiptError("the checkout receipt answers another checkout mandate")
        if payment.get("reference") != _reference(payment_mandate):
            raise ReceiptError("the payment receipt answers another payment mandate")
        if payment.get("payment_id") != offer_id:
            raise ReceiptError("the payment receipt names another payment")
        status = checkout.get("status")
        if status not in ("Success", "Error") or payment.get("status") != status:
            raise ReceiptError("the receipts' status is not one Success or Error")
        return str(status)

    async def _verified(self, token: str, what: str) -> dict[str, Any]:
        header = _header(token, what)
        kid = header.get("kid")
        if header.get("alg") != _ALG or not isinstance(kid, str) or not kid:
            raise ReceiptError(f"{what} is not an ES256 JWS naming its key")
        try:
            key = await self.jwks.get_key(self.declaration.jwks_url, kid)
        except AgentCardError as exc:
            raise ReceiptError(f"{what}'s key {kid[:64]!r} is not the tenant's: {exc}") from None
        if key.alg not in (None, _ALG) or key.use not in (None, "sig"):
            raise ReceiptError(f"{what}'s key {kid[:64]!r} is not an ES256 signing key")
        try:
            jws.deserialize_compact(token, key.key, algorithms=[_ALG])
        except (JoseError, ValueError):
            raise ReceiptError(
                f"{what}'s signature does not verify with the tenant's key {kid[:64]!r}"
            ) from None
        try:
            return jwt_claims(token, what)
        except MandateConstraintError as exc:
            raise ReceiptError(str(exc)) from None


def _header(token: str, what: str) -> dict[str, Any]:
    segment = token.split(".", 1)[0]
    try:
        header = json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    except (binascii.Error, ValueError, RecursionError):
        raise ReceiptError(f"{what} is not a compact JWS") from None
    if not isinstance(header, dict):
        raise ReceiptError(f"{what} has no JOSE header")
    return header


def _reference(mandate: str) -> str:
    """A receipt's ``reference`` for a mandate: the hash of the issuer-signed JWT of its last SD-JWT."""
    return ap2_digest(mandate.rsplit("~~", 1)[-1].split("~", 1)[0])


def _total(claims: Mapping[str, Any]) -> tuple[int, str]:
    listed = claims.get("totals")
    totals = (
        [t for t in listed if isinstance(t, dict) and t.get("type") == "total"]
        if isinstance(listed, list)
        else []
    )
    currency = claims.get("currency")
    amount = totals[0].get("amount") if len(totals) == 1 else None
    if not isinstance(amount, int) or isinstance(amount, bool) or not isinstance(currency, str):
        raise CheckoutInvalidError("the checkout has no single total in a currency")
    return amount, currency


def _same_json(one: Any, other: Any) -> bool:
    """Equal as JSON values: RFC 8785 forms, so a ``2.0`` read from a protobuf Struct equals ``2``."""
    try:
        return bool(rfc8785.dumps(one) == rfc8785.dumps(other))
    except (rfc8785.CanonicalizationError, UnicodeError, TypeError):
        return False

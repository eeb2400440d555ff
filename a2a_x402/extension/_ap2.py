"""The wire shapes of the embedded flow (specification §20): x402 inside AP2 mandates.

The embedded flow leaves the extension object alone and adds documents beside it, each in a ``data``
part: the merchant's checkout JWT (artifact ``ap2-checkout``), the client's closed mandates, and the
merchant's AP2 receipts. This module holds every AP2 literal of that contract, reads those parts
strictly (the ``$defs`` of ``spec/schema/ap2.json``: exactly the members named, each token of its
form), reads the card's ``params.ap2`` declaration, and computes the two things both sides must agree
on without the AP2 SDK: the hashes (``ap2_digest``, ``payload_hash``) and the price rule between token
atomic units and the checkout's total in minor units of its currency.

The tokens are only checked for their form here; their signatures and claims are the AP2 SDK's and the
merchant's business (``a2a_x402.merchant.ap2``).
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from urllib.parse import urlsplit

import rfc8785

from ._errors import ExtensionMetadataError, MetadataErrorCode, child_path
from ._numbers import JsonValue, json_type_name

__all__ = [
    "AP2_CHECKOUT_ARTIFACT_ID",
    "AP2_CHECKOUT_ARTIFACT_NAME",
    "AP2_CHECKOUT_JWT_KEY",
    "AP2_CHECKOUT_MANDATE_KEY",
    "AP2_CHECKOUT_RECEIPT_KEY",
    "AP2_PAYMENT_MANDATE_KEY",
    "AP2_PAYMENT_RECEIPT_KEY",
    "AP2_V01_CART_MANDATE_KEY",
    "AP2_V01_PAYMENT_MANDATE_KEY",
    "AP2_X402_METHOD",
    "MAX_AP2_TOKEN_CHARS",
    "Ap2Declaration",
    "Ap2ErrorCode",
    "Ap2Mandates",
    "Ap2Merchant",
    "Ap2PriceError",
    "Ap2Receipts",
    "ap2_digest",
    "checkout_total_for_amount",
    "minor_unit_exponent",
    "parse_ap2_checkout_data",
    "parse_ap2_declaration",
    "parse_ap2_mandates",
    "parse_ap2_receipts",
    "payload_hash",
    "token_amount_for_total",
]

AP2_CHECKOUT_ARTIFACT_ID = "ap2-checkout"
"""The ``artifactId`` of the merchant's checkout artifact; one per task, replaced by fresh terms."""
AP2_CHECKOUT_ARTIFACT_NAME = "AP2 checkout"
"""The ``name`` of the checkout artifact."""
AP2_CHECKOUT_JWT_KEY = "ap2.checkout_jwt"
"""The member of the checkout artifact's data part that holds the checkout JWT."""
AP2_CHECKOUT_MANDATE_KEY = "ap2.checkout_mandate"
"""The member of the payment message's mandates part holding the closed checkout mandate."""
AP2_PAYMENT_MANDATE_KEY = "ap2.payment_mandate"
"""The member of the payment message's mandates part holding the closed payment mandate."""
AP2_CHECKOUT_RECEIPT_KEY = "ap2.checkout_receipt"
"""The member of the round's last status message's receipts part holding the checkout receipt."""
AP2_PAYMENT_RECEIPT_KEY = "ap2.payment_receipt"
"""The member of the receipts part holding the payment receipt."""
AP2_V01_CART_MANDATE_KEY = "ap2.mandates.CartMandate"
"""The data-part key of the merchant's AP2 v0.1 cart in the v0.2 form (§20.7)."""
AP2_V01_PAYMENT_MANDATE_KEY = "ap2.mandates.PaymentMandate"
"""The data-part key of the client's AP2 v0.1 payment mandate in the v0.2 form (§20.7)."""
AP2_X402_METHOD = "https://www.x402.org/"
"""The payment method of x402 in the v0.2 form's AP2 v0.1 objects (§20.7): the `supported_methods` of the
cart's method data holding the terms, the `method_name` of the payment mandate's response."""

MAX_AP2_TOKEN_CHARS = 32_768
"""Longest token (JWT or mandate chain) read from a data part: §20.4's 9 KB example fits three times over,
and a merchant is asked to take payment messages of at least 32 KiB in all."""

# Linear-time forms of the schema's CompactJws and SdJwt patterns: the schema's `(~{1,2}[...]*)*` accepts
# any run of `~` between disclosures, which is what the tail here says without nested repetition.
_COMPACT_JWS = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+")
_SD_JWT = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+(?:~[A-Za-z0-9_.~-]*)?")

# ISO 4217 minor-unit exponents of the currencies a token can be at par with. A currency missing here
# cannot be embedded: the price rule needs its exponent.
_MINOR_UNIT_EXPONENTS: Mapping[str, int] = {
    "AUD": 2,
    "CAD": 2,
    "CHF": 2,
    "EUR": 2,
    "GBP": 2,
    "JPY": 0,
    "SGD": 2,
    "USD": 2,
}


class Ap2ErrorCode(StrEnum):
    """The ``ap2Error`` of a refusal of mandates (§20.6)."""

    INVALID_CREDENTIAL = "invalid_credential"
    """A mandate does not verify: a signature, a binding, ``aud``, ``nonce``, a time, an untrusted issuer."""
    INVALID_MANDATE = "invalid_mandate"
    """The mandates verify but do not authorize this payment (another checkout or amount, a constraint)."""
    UNRESOLVED_CONSTRAINT = "unresolved_constraint"
    """A constraint of an unknown type, or one the merchant cannot evaluate."""
    MANDATES_NOT_SUPPORTED = "mandates_not_supported"
    """Mandates for a tenant without an ``ap2`` entry, or of a type the merchant does not take."""


class Ap2PriceError(ValueError):
    """A price the price rule of §20.3 cannot express: the terms go out without a checkout artifact."""


@dataclass(frozen=True, slots=True)
class Ap2Merchant:
    """An AP2 ``Merchant``: the audience of the mandates, the checkout's merchant and the payee."""

    id: str
    name: str
    website: str | None = None

    def to_wire(self) -> dict[str, JsonValue]:
        """The wire form, ``website`` only when there is one."""
        wire: dict[str, JsonValue] = {"id": self.id, "name": self.name}
        if self.website is not None:
            wire["website"] = self.website
        return wire


@dataclass(frozen=True, slots=True)
class Ap2Declaration:
    """One entry of the card's ``params.ap2``: a tenant that offers the embedded flow (§20.2).

    ``tenant`` is ``""`` for interfaces without a tenant (the member is then absent on the wire).
    """

    merchant: Ap2Merchant
    jwks_url: str
    tenant: str = ""
    required: bool = False

    def to_wire(self) -> dict[str, JsonValue]:
        """The wire form; ``tenant`` and ``required`` only when they say something."""
        wire: dict[str, JsonValue] = {}
        if self.tenant:
            wire["tenant"] = self.tenant
        wire["merchant"] = self.merchant.to_wire()
        wire["jwksUrl"] = self.jwks_url
        if self.required:
            wire["required"] = True
        return wire


@dataclass(frozen=True, slots=True)
class Ap2Mandates:
    """The mandates part of a payment message (§20.4): the closed mandates, each in SD-JWT compact form."""

    checkout_mandate: str
    payment_mandate: str

    def to_wire(self) -> dict[str, JsonValue]:
        """The data part's value."""
        return {
            AP2_CHECKOUT_MANDATE_KEY: self.checkout_mandate,
            AP2_PAYMENT_MANDATE_KEY: self.payment_mandate,
        }


@dataclass(frozen=True, slots=True)
class Ap2Receipts:
    """The receipts part of the status that ends a round (§20.6): the merchant-signed AP2 receipts."""

    checkout_receipt: str
    payment_receipt: str

    def to_wire(self) -> dict[str, JsonValue]:
        """The data part's value."""
        return {
            AP2_CHECKOUT_RECEIPT_KEY: self.checkout_receipt,
            AP2_PAYMENT_RECEIPT_KEY: self.payment_receipt,
        }


def parse_ap2_checkout_data(value: object, path: str = "data") -> str:
    """The checkout JWT of the checkout artifact's data part (``$defs/CheckoutArtifactData``).

    Raises:
        ExtensionMetadataError: anything but an object with exactly ``ap2.checkout_jwt``, a compact JWS.
    """
    members = _members(value, (AP2_CHECKOUT_JWT_KEY,), path)
    return _token(members[AP2_CHECKOUT_JWT_KEY], _COMPACT_JWS, "a compact JWS", path, AP2_CHECKOUT_JWT_KEY)


def parse_ap2_mandates(value: object, path: str = "data") -> Ap2Mandates:
    """The closed mandates of a payment message's data part (``$defs/MandatesData``).

    Raises:
        ExtensionMetadataError: anything but an object with exactly the two mandates, each an SD-JWT (or
            a ``~~``-joined chain of them) of at most ``MAX_AP2_TOKEN_CHARS`` characters.
    """
    keys = (AP2_CHECKOUT_MANDATE_KEY, AP2_PAYMENT_MANDATE_KEY)
    members = _members(value, keys, path)
    checkout, payment = (_token(members[key], _SD_JWT, "an SD-JWT", path, key) for key in keys)
    return Ap2Mandates(checkout, payment)


def parse_ap2_receipts(value: object, path: str = "data") -> Ap2Receipts:
    """The AP2 receipts of a status message's data part (``$defs/ReceiptsData``).

    Raises:
        ExtensionMetadataError: anything but an object with exactly the two receipts, each a compact JWS.
    """
    keys = (AP2_CHECKOUT_RECEIPT_KEY, AP2_PAYMENT_RECEIPT_KEY)
    members = _members(value, keys, path)
    checkout, payment = (_token(members[key], _COMPACT_JWS, "a compact JWS", path, key) for key in keys)
    return Ap2Receipts(checkout, payment)


def parse_ap2_declaration(value: object, path: str = "params.ap2") -> tuple[Ap2Declaration, ...]:
    """The entries of the card's ``params.ap2`` (``$defs/Declaration``), one per tenant.

    Raises:
        ExtensionMetadataError: not a non-empty array of entries of the schema's form (an ``https`` URL
            for ``jwksUrl``, a merchant with ``id`` and ``name``), or two entries for one tenant.
    """
    if not isinstance(value, list):
        raise _error(MetadataErrorCode.INVALID_TYPE, f"expected an array, got {json_type_name(value)}", path)
    if not value:
        raise _error(MetadataErrorCode.MISSING_FIELD, "expected at least one entry", path)
    entries = tuple(_declaration(item, child_path(path, index)) for index, item in enumerate(value))
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        if entry.tenant in seen:
            where = child_path(child_path(path, index), "tenant")
            raise _error(MetadataErrorCode.INCONSISTENT_CONTENT, "a second entry for the same tenant", where)
        seen.add(entry.tenant)
    return entries


def ap2_digest(text: str) -> str:
    """The base64url (no padding) SHA-256 of ``text``: a ``checkout_hash``, a receipt's ``reference``.

    Raises:
        ValueError: ``text`` is not ASCII (every token hashed here is base64url and punctuation).
    """
    return _b64url_sha256(text.encode("ascii"))


def payload_hash(payload: Mapping[str, JsonValue]) -> str:
    """The ``payload_hash`` of the x402 payment instrument: base64url SHA-256 of the RFC 8785 form.

    ``payload`` is the ``payload`` member of the extension object as received (after Struct
    normalisation, which RFC 8785 makes irrelevant for integral numbers).

    Raises:
        ExtensionMetadataError: a value RFC 8785 cannot canonicalise (an integer beyond 2**53, a lone
            surrogate), code ``invalid_number``.
    """
    try:
        canonical = rfc8785.dumps(payload)
    except (rfc8785.CanonicalizationError, UnicodeError):
        raise _error(MetadataErrorCode.INVALID_NUMBER, "has no RFC 8785 canonical form", "payload") from None
    return _b64url_sha256(canonical)


def token_amount_for_total(total: int, *, decimals: int, currency: str) -> int:
    """The token amount (atomic units) of a checkout total (minor units of ``currency``), at par (§20.3).

    Raises:
        Ap2PriceError: a negative total, a currency without a known minor unit, or a total the token's
            ``decimals`` cannot express (a token coarser than the currency's minor unit).
    """
    _whole(total, "total")
    token_unit, currency_unit = _units(decimals, currency)
    if total * token_unit % currency_unit:
        raise Ap2PriceError(
            f"a total of {total} {currency} minor units is not whole in a {decimals}-decimal token"
        )
    return total * token_unit // currency_unit


def checkout_total_for_amount(amount: int, *, decimals: int, currency: str) -> int:
    """The checkout total (minor units of ``currency``) of a token amount (atomic units), at par (§20.3).

    Raises:
        Ap2PriceError: a negative amount, a currency without a known minor unit, or an amount that is not
            a whole number of minor units (a sub-cent price for USD): such terms carry no checkout.
    """
    _whole(amount, "amount")
    token_unit, currency_unit = _units(decimals, currency)
    if amount * currency_unit % token_unit:
        raise Ap2PriceError(
            f"{amount} atomic units of a {decimals}-decimal token are not whole {currency} minor units"
        )
    return amount * currency_unit // token_unit


def _units(decimals: int, currency: str) -> tuple[int, int]:
    """How many atomic units make one unit of the token, and how many minor units one of the currency."""
    if isinstance(decimals, bool) or not isinstance(decimals, int) or not 0 <= decimals <= 77:
        raise Ap2PriceError("the token's decimals must be an integer from 0 to 77")
    token_unit: int = 10**decimals
    currency_unit: int = 10 ** minor_unit_exponent(currency)
    return token_unit, currency_unit


def minor_unit_exponent(currency: str) -> int:
    """The ISO 4217 minor-unit exponent of ``currency`` (2 for USD).

    Raises:
        Ap2PriceError: a currency this module does not know.
    """
    try:
        return _MINOR_UNIT_EXPONENTS[currency]
    except (KeyError, TypeError):
        known = ", ".join(_MINOR_UNIT_EXPONENTS)
        raise Ap2PriceError(f"no minor unit known for currency {currency!r:.12} (known: {known})") from None


def _whole(value: int, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise Ap2PriceError(f"the {name} must be a non-negative integer")


def _b64url_sha256(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")


def _error(code: MetadataErrorCode, detail: str, path: str) -> ExtensionMetadataError:
    return ExtensionMetadataError(code, detail, path)


def _members(value: object, keys: tuple[str, ...], path: str) -> Mapping[str, object]:
    """``value`` as an object with exactly ``keys``; the first unknown or missing member is the error."""
    if not isinstance(value, Mapping):
        raise _error(MetadataErrorCode.INVALID_TYPE, f"expected an object, got {json_type_name(value)}", path)
    for key in value:
        if key not in keys:
            shown = key if isinstance(key, str) else repr(key)
            raise _error(
                MetadataErrorCode.UNKNOWN_FIELD, "not a member of this part", child_path(path, shown)
            )
    for key in keys:
        if key not in value:
            raise _error(MetadataErrorCode.MISSING_FIELD, "required member is missing", child_path(path, key))
    return value


def _token(value: object, form: re.Pattern[str], what: str, path: str, key: str) -> str:
    where = child_path(path, key)
    if not isinstance(value, str):
        raise _error(MetadataErrorCode.INVALID_TYPE, f"expected a string, got {json_type_name(value)}", where)
    if len(value) > MAX_AP2_TOKEN_CHARS:
        raise _error(MetadataErrorCode.TOO_LARGE, f"longer than {MAX_AP2_TOKEN_CHARS} characters", where)
    if not form.fullmatch(value):
        # The token is not quoted: it is untrusted and may carry a credential.
        raise _error(MetadataErrorCode.INVALID_TYPE, f"expected {what} in compact form", where)
    return value


def _declaration(value: object, path: str) -> Ap2Declaration:
    if not isinstance(value, Mapping):
        raise _error(MetadataErrorCode.INVALID_TYPE, f"expected an object, got {json_type_name(value)}", path)
    allowed = ("tenant", "merchant", "jwksUrl", "required")
    for key in value:
        if key not in allowed:
            raise _error(
                MetadataErrorCode.UNKNOWN_FIELD, "not a member of an ap2 entry", child_path(path, str(key))
            )
    for key in ("merchant", "jwksUrl"):
        if key not in value:
            raise _error(MetadataErrorCode.MISSING_FIELD, "required member is missing", child_path(path, key))
    tenant = value.get("tenant", "")
    if not isinstance(tenant, str):
        raise _error(
            MetadataErrorCode.INVALID_TYPE,
            f"expected a string, got {json_type_name(tenant)}",
            child_path(path, "tenant"),
        )
    required = value.get("required", False)
    if not isinstance(required, bool):
        raise _error(
            MetadataErrorCode.INVALID_TYPE,
            f"expected a boolean, got {json_type_name(required)}",
            child_path(path, "required"),
        )
    jwks_url = _string(value["jwksUrl"], child_path(path, "jwksUrl"), empty=False)
    parts = urlsplit(jwks_url)
    if parts.scheme != "https" or not parts.netloc or not jwks_url.startswith("https://"):
        raise _error(MetadataErrorCode.INVALID_TYPE, "expected an https URL", child_path(path, "jwksUrl"))
    merchant = _merchant(value["merchant"], child_path(path, "merchant"))
    return Ap2Declaration(merchant=merchant, jwks_url=jwks_url, tenant=tenant, required=required)


def _merchant(value: object, path: str) -> Ap2Merchant:
    if not isinstance(value, Mapping):
        raise _error(MetadataErrorCode.INVALID_TYPE, f"expected an object, got {json_type_name(value)}", path)
    for key in value:
        if key not in ("id", "name", "website"):
            raise _error(
                MetadataErrorCode.UNKNOWN_FIELD, "not a member of a merchant", child_path(path, str(key))
            )
    for key in ("id", "name"):
        if key not in value:
            raise _error(MetadataErrorCode.MISSING_FIELD, "required member is missing", child_path(path, key))
    website = (
        _string(value["website"], child_path(path, "website"), empty=False) if "website" in value else None
    )
    return Ap2Merchant(
        id=_string(value["id"], child_path(path, "id"), empty=False),
        name=_string(value["name"], child_path(path, "name"), empty=False),
        website=website,
    )


def _string(value: object, path: str, *, empty: bool) -> str:
    if not isinstance(value, str):
        raise _error(MetadataErrorCode.INVALID_TYPE, f"expected a string, got {json_type_name(value)}", path)
    if not empty and not value:
        raise _error(MetadataErrorCode.INVALID_TYPE, "expected a non-empty string", path)
    return value

"""The AP2 shapes of the embedded flow (§20), read from the specification's own examples.

Every refusal is checked two ways: our reader raises one typed, one-line error naming the member, and the
schema (`spec/schema/ap2.json`) refuses the same value, so the reader is no looser than the contract.
"""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest

from a2a_x402.extension import (
    AP2_CHECKOUT_ARTIFACT_ID,
    AP2_CHECKOUT_ARTIFACT_NAME,
    AP2_CHECKOUT_JWT_KEY,
    AP2_CHECKOUT_MANDATE_KEY,
    AP2_CHECKOUT_RECEIPT_KEY,
    AP2_PAYMENT_MANDATE_KEY,
    AP2_PAYMENT_RECEIPT_KEY,
    EXTENSION_URI,
    MAX_AP2_TOKEN_CHARS,
    Ap2Declaration,
    Ap2ErrorCode,
    Ap2Merchant,
    Ap2PriceError,
    ExtensionMetadataError,
    MetadataErrorCode,
    ap2_digest,
    checkout_total_for_amount,
    minor_unit_exponent,
    parse_ap2_checkout_data,
    parse_ap2_declaration,
    parse_ap2_mandates,
    parse_ap2_receipts,
    payload_hash,
    token_amount_for_total,
)
from tests.spec.support import definition_errors, example, extension_object


def _offer_task() -> Any:
    return example("ap2.payment-required.response.json")["result"]["task"]


def _checkout_data() -> dict[str, Any]:
    [artifact] = _offer_task()["artifacts"]
    data: dict[str, Any] = artifact["parts"][0]["data"]
    return data


def _submitted() -> tuple[dict[str, Any], dict[str, Any]]:
    message = example("ap2.payment-submitted.request.json")["params"]["message"]
    value = extension_object(message)
    assert value is not None
    [mandates] = [part["data"] for part in message["parts"] if "data" in part]
    return value["payload"], mandates


def _receipts_data() -> dict[str, Any]:
    message = example("ap2.payment-completed.response.json")["result"]["task"]["status"]["message"]
    [data] = [part["data"] for part in message["parts"] if "data" in part]
    result: dict[str, Any] = data
    return result


def _card_ap2() -> list[dict[str, Any]]:
    """The declaration §20's examples imply: the checkout's merchant, with the keys at a JWKS URL."""
    payload = _checkout_data()[AP2_CHECKOUT_JWT_KEY].split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return [
        {
            "merchant": claims["merchant"],
            "jwksUrl": "https://merchant.example/.well-known/ap2/default/jwks.json",
        }
    ]


def _refused(read: Any, value: Any) -> ExtensionMetadataError:
    with pytest.raises(ExtensionMetadataError) as caught:
        read(value)
    assert "\n" not in str(caught.value)
    return caught.value


def test_the_literals_are_those_of_the_examples() -> None:
    [artifact] = _offer_task()["artifacts"]
    assert (artifact["artifactId"], artifact["name"]) == (
        AP2_CHECKOUT_ARTIFACT_ID,
        AP2_CHECKOUT_ARTIFACT_NAME,
    )
    assert artifact["extensions"] == [EXTENSION_URI]
    assert set(_checkout_data()) == {AP2_CHECKOUT_JWT_KEY}
    assert set(_submitted()[1]) == {AP2_CHECKOUT_MANDATE_KEY, AP2_PAYMENT_MANDATE_KEY}
    assert set(_receipts_data()) == {AP2_CHECKOUT_RECEIPT_KEY, AP2_PAYMENT_RECEIPT_KEY}
    [info] = example("ap2.mandate-refused.error.json")["error"]["data"]
    assert Ap2ErrorCode(info["metadata"]["ap2Error"]) is Ap2ErrorCode.INVALID_MANDATE


def test_the_error_codes_are_the_schemas() -> None:
    for code in Ap2ErrorCode:
        assert definition_errors("ap2.json", "RefusalMetadata", {"ap2Error": code.value}) == []
    assert definition_errors("ap2.json", "RefusalMetadata", {"ap2Error": "other"}) != []


def test_the_example_parts_read_and_write_back_unchanged() -> None:
    checkout = _checkout_data()
    assert parse_ap2_checkout_data(checkout) == checkout[AP2_CHECKOUT_JWT_KEY]
    _, mandates = _submitted()
    assert parse_ap2_mandates(mandates).to_wire() == mandates
    receipts = _receipts_data()
    assert parse_ap2_receipts(receipts).to_wire() == receipts


def test_the_payload_hash_is_the_payment_mandates() -> None:
    payment, mandates = _submitted()
    # The instrument's payload_hash, as §20.4's example carries it in the closed payment mandate.
    assert payload_hash(payment) == "EcVgaApdeaFJYKZUCHALIu8srF6fuuS4Vtk9YL67Eko"
    reordered = dict(reversed(list(payment.items())))
    assert payload_hash(reordered) == payload_hash(payment)
    floated = copy.deepcopy(payment)
    floated["x402Version"] = 2.0  # what a protobuf Struct makes of it
    assert payload_hash(floated) == payload_hash(payment)
    other = copy.deepcopy(payment)
    other["payload"]["authorization"]["value"] = "250001"
    assert payload_hash(other) != payload_hash(payment)


def test_the_payload_hash_refuses_what_has_no_canonical_form() -> None:
    error = _refused(payload_hash, {"x402Version": 2**60})
    assert error.code is MetadataErrorCode.INVALID_NUMBER


def test_ap2_digest_is_the_checkout_hash() -> None:
    # The checkout_hash of §20.4's example, which the payment mandate names as transaction_id.
    assert ap2_digest(_checkout_data()[AP2_CHECKOUT_JWT_KEY]) == "pldxnDOrbxml4QxhDN2BjiiLUw-zCNxpSrph9_VNZfU"


_LONG = "a." + "b" * MAX_AP2_TOKEN_CHARS + ".c"


@pytest.mark.parametrize(
    ("change", "code", "where"),
    [
        (lambda d: d.pop(AP2_PAYMENT_MANDATE_KEY), MetadataErrorCode.MISSING_FIELD, "ap2.payment_mandate"),
        (lambda d: d.update(extra="x"), MetadataErrorCode.UNKNOWN_FIELD, "data.extra"),
        (
            lambda d: d.update({AP2_CHECKOUT_MANDATE_KEY: 7}),
            MetadataErrorCode.INVALID_TYPE,
            "checkout_mandate",
        ),
        (lambda d: d.update({AP2_CHECKOUT_MANDATE_KEY: "not a token"}), MetadataErrorCode.INVALID_TYPE, ""),
        (lambda d: d.update({AP2_PAYMENT_MANDATE_KEY: "a.b~c"}), MetadataErrorCode.INVALID_TYPE, ""),
        (lambda d: d.update({AP2_PAYMENT_MANDATE_KEY: _LONG}), MetadataErrorCode.TOO_LARGE, ""),
    ],
    ids=["missing", "unknown-member", "not-a-string", "not-a-token", "two-part-jwt", "oversized"],
)
def test_a_malformed_mandates_part_is_refused(change: Any, code: MetadataErrorCode, where: str) -> None:
    _, mandates = _submitted()
    change(mandates)
    error = _refused(parse_ap2_mandates, mandates)
    assert error.code is code
    assert where in error.path
    if code is not MetadataErrorCode.TOO_LARGE:
        assert definition_errors("ap2.json", "MandatesData", mandates) != []


@pytest.mark.parametrize("value", [None, [], "token", 3])
def test_a_part_that_is_no_object_is_refused(value: Any) -> None:
    for read in (parse_ap2_mandates, parse_ap2_receipts, parse_ap2_checkout_data):
        error = _refused(read, value)
        assert (error.code, error.path) == (MetadataErrorCode.INVALID_TYPE, "data")


def test_a_refused_token_is_not_echoed() -> None:
    _, mandates = _submitted()
    mandates[AP2_CHECKOUT_MANDATE_KEY] = "secret-looking value"
    assert "secret" not in str(_refused(parse_ap2_mandates, mandates))


@pytest.mark.parametrize(
    ("change", "code"),
    [
        (lambda d: d.pop(AP2_CHECKOUT_RECEIPT_KEY), MetadataErrorCode.MISSING_FIELD),
        (lambda d: d.update({"ap2.other_receipt": "a.b.c"}), MetadataErrorCode.UNKNOWN_FIELD),
        # A receipt is a plain JWS: SD-JWT disclosures have no place in it.
        (
            lambda d: d.update({AP2_PAYMENT_RECEIPT_KEY: d[AP2_PAYMENT_RECEIPT_KEY] + "~"}),
            MetadataErrorCode.INVALID_TYPE,
        ),
        (lambda d: d.update({AP2_PAYMENT_RECEIPT_KEY: None}), MetadataErrorCode.INVALID_TYPE),
        (lambda d: d.update({AP2_PAYMENT_RECEIPT_KEY: _LONG}), MetadataErrorCode.TOO_LARGE),
    ],
    ids=["missing", "unknown-member", "sd-jwt", "null", "oversized"],
)
def test_a_malformed_receipts_part_is_refused(change: Any, code: MetadataErrorCode) -> None:
    receipts = _receipts_data()
    change(receipts)
    assert _refused(parse_ap2_receipts, receipts).code is code
    if code is not MetadataErrorCode.TOO_LARGE:
        assert definition_errors("ap2.json", "ReceiptsData", receipts) != []


def test_a_checkout_part_with_a_mandate_in_it_is_refused() -> None:
    _, mandates = _submitted()
    value = {AP2_CHECKOUT_JWT_KEY: mandates[AP2_CHECKOUT_MANDATE_KEY]}
    assert _refused(parse_ap2_checkout_data, value).code is MetadataErrorCode.INVALID_TYPE
    assert definition_errors("ap2.json", "CheckoutArtifactData", value) != []


def test_the_declaration_reads_and_writes_back() -> None:
    entries = _card_ap2()
    assert definition_errors("ap2.json", "Declaration", entries) == []
    [entry] = parse_ap2_declaration(entries)
    assert entry.tenant == ""
    assert entry.required is False
    assert entry.to_wire() == entries[0]
    tenant = Ap2Declaration(
        Ap2Merchant("acme", "Acme"), "https://m.example/k.json", tenant="acme", required=True
    )
    wire = tenant.to_wire()
    assert definition_errors("ap2.json", "Declaration", [wire]) == []
    assert parse_ap2_declaration([wire]) == (tenant,)


_MERCHANT = {"id": "m", "name": "M"}


@pytest.mark.parametrize(
    ("value", "code", "path"),
    [
        ({"ap2": 1}, MetadataErrorCode.INVALID_TYPE, "params.ap2"),
        ([], MetadataErrorCode.MISSING_FIELD, "params.ap2"),
        ([{"merchant": _MERCHANT}], MetadataErrorCode.MISSING_FIELD, "params.ap2[0].jwksUrl"),
        ([{"jwksUrl": "https://m.example/k"}], MetadataErrorCode.MISSING_FIELD, "params.ap2[0].merchant"),
        (
            [{"merchant": {"id": "m"}, "jwksUrl": "https://m.example/k"}],
            MetadataErrorCode.MISSING_FIELD,
            "params.ap2[0].merchant.name",
        ),
        (
            [{"merchant": {**_MERCHANT, "website": None}, "jwksUrl": "https://m.example/k"}],
            MetadataErrorCode.INVALID_TYPE,
            "params.ap2[0].merchant.website",
        ),
        (
            [{"merchant": {**_MERCHANT, "id": ""}, "jwksUrl": "https://m.example/k"}],
            MetadataErrorCode.INVALID_TYPE,
            "params.ap2[0].merchant.id",
        ),
        (
            [{"merchant": _MERCHANT, "jwksUrl": "http://m.example/k"}],
            MetadataErrorCode.INVALID_TYPE,
            "params.ap2[0].jwksUrl",
        ),
        (
            [{"merchant": _MERCHANT, "jwksUrl": "https://m.example/k", "required": "yes"}],
            MetadataErrorCode.INVALID_TYPE,
            "params.ap2[0].required",
        ),
        (
            [{"merchant": _MERCHANT, "jwksUrl": "https://m.example/k", "tenant": 5}],
            MetadataErrorCode.INVALID_TYPE,
            "params.ap2[0].tenant",
        ),
        (
            [{"merchant": _MERCHANT, "jwksUrl": "https://m.example/k", "keys": []}],
            MetadataErrorCode.UNKNOWN_FIELD,
            "params.ap2[0].keys",
        ),
        (
            [{"merchant": {**_MERCHANT, "url": "x"}, "jwksUrl": "https://m.example/k"}],
            MetadataErrorCode.UNKNOWN_FIELD,
            "params.ap2[0].merchant.url",
        ),
    ],
    ids=[
        "not-an-array",
        "empty",
        "no-jwks-url",
        "no-merchant",
        "merchant-without-name",
        "null-website",
        "empty-merchant-id",
        "plain-http",
        "required-not-boolean",
        "tenant-not-string",
        "unknown-member",
        "unknown-merchant-member",
    ],
)
def test_a_malformed_declaration_is_refused(value: Any, code: MetadataErrorCode, path: str) -> None:
    error = _refused(parse_ap2_declaration, value)
    assert (error.code, error.path) == (code, path)
    assert definition_errors("ap2.json", "Declaration", value) != []


def test_two_entries_for_one_tenant_are_refused() -> None:
    entry = {"tenant": "acme", "merchant": _MERCHANT, "jwksUrl": "https://m.example/k"}
    error = _refused(parse_ap2_declaration, [entry, entry])
    assert (error.code, error.path) == (MetadataErrorCode.INCONSISTENT_CONTENT, "params.ap2[1].tenant")


def test_the_price_rule_of_the_examples() -> None:
    """250000 atomic units of 6-decimal USDC are the checkout's 25 cents, both ways."""
    terms = extension_object(_offer_task()["status"]["message"])
    assert terms is not None
    [entry] = terms["required"]["accepts"]
    assert checkout_total_for_amount(int(entry["amount"]), decimals=6, currency="USD") == 25
    assert token_amount_for_total(25, decimals=6, currency="USD") == int(entry["amount"])


@pytest.mark.parametrize(
    ("amount", "decimals", "currency", "total"),
    [(0, 6, "USD", 0), (10_000, 6, "USD", 1), (10**18, 18, "EUR", 100), (5, 2, "USD", 5), (7, 0, "JPY", 7)],
)
def test_the_price_rule_round_trips(amount: int, decimals: int, currency: str, total: int) -> None:
    assert checkout_total_for_amount(amount, decimals=decimals, currency=currency) == total
    assert token_amount_for_total(total, decimals=decimals, currency=currency) == amount


@pytest.mark.parametrize(
    ("amount", "decimals", "currency", "words"),
    [
        (250_001, 6, "USD", "not whole USD minor units"),
        (1, 6, "USD", "not whole USD minor units"),
        (25, 6, "XAU", "no minor unit known"),
        (-1, 6, "USD", "non-negative"),
        (True, 6, "USD", "non-negative"),
        (25, -1, "USD", "decimals"),
    ],
    ids=["sub-cent", "one-atomic-unit", "unknown-currency", "negative", "boolean", "negative-decimals"],
)
def test_the_price_rule_refuses_what_it_cannot_express(
    amount: Any, decimals: int, currency: str, words: str
) -> None:
    with pytest.raises(Ap2PriceError, match=words) as caught:
        checkout_total_for_amount(amount, decimals=decimals, currency=currency)
    assert "\n" not in str(caught.value)


def test_a_token_coarser_than_the_currency_cannot_carry_every_total() -> None:
    assert token_amount_for_total(300, decimals=1, currency="USD") == 30
    with pytest.raises(Ap2PriceError, match="not whole in a 1-decimal token"):
        token_amount_for_total(25, decimals=1, currency="USD")
    assert minor_unit_exponent("USD") == 2

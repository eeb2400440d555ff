"""The examples of the embedded flow (§20) are real AP2 documents, bound to each other as the section says.

The other tests check their A2A form and extension objects like every example's. These open the tokens:
the checkout JWT and the receipts verify with the published checkout key, each mandate chain verifies
from the published issuer key through its agent key, and every hash of §20.4 and §20.6 is the hash of
what it names. They read SD-JWTs with a few lines of their own, independent of the AP2 SDK that made
the examples, so the spec's examples are checked without it. The same holds for the v0.2 form (§20.7):
the cart's `merchant_authorization` verifies with a published checkout key and hashes its `contents`, its
x402 terms keep the price rule, and the `user_authorization` verifies from a published issuer key through
its `cnf` key and names the cart and the `payment_mandate_contents` that carry the payment.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

import pytest
import rfc8785
from joserfc import jws
from joserfc.jwk import ECKey

from a2a_x402.extension import (
    AP2_V01_CART_MANDATE_KEY,
    AP2_V01_PAYMENT_MANDATE_KEY,
    AP2_X402_METHOD,
    EXTENSION_URI,
    EXTENSION_URI_V02,
)
from a2a_x402.facilitator.wire import PaymentRequirementsV1, requirements_v1_to_v2
from a2a_x402.merchant.ap2 import IssuerKeys, verify_user_authorization

from .support import JSON, definition_errors, example, extension_object, schema_errors

_CHECKOUT_ARTIFACT = "ap2-checkout"
_MINOR_UNIT_EXPONENTS = {"USD": 2}


def _b64_json(segment: str) -> Any:
    return json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))


def _sha256(text: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(text.encode("ascii")).digest()).rstrip(b"=").decode()


def _canonical_hash(value: Any) -> str:
    return _sha256(rfc8785.dumps(value).decode("ascii"))


def _verified(token: str, jwks: JSON, kid: str | None = None) -> JSON:
    """The payload of compact JWS `token`, verified with the key of `jwks` its header (or `kid`) names."""
    header = _b64_json(token.split(".")[0])
    [jwk] = [key for key in jwks["keys"] if key["kid"] == (kid or header["kid"])]
    payload: JSON = json.loads(jws.deserialize_compact(token, ECKey.import_key(jwk), ["ES256"]).payload)
    return payload


@dataclass(frozen=True)
class _Hop:
    """One SD-JWT of a mandate chain: its issuer-signed JWT, its text as hashed, and its disclosed claims."""

    jwt: str
    text: str
    claims: JSON


def _resolve(value: Any, disclosures: dict[str, list[Any]]) -> Any:
    # RFC 9901: `{"...": digest}` array elements and `_sd` digests are replaced by what they disclose.
    if isinstance(value, list):
        return [
            _resolve(
                disclosures[item["..."]][-1] if isinstance(item, dict) and "..." in item else item,
                disclosures,
            )
            for item in value
        ]
    if isinstance(value, dict):
        resolved = {name: _resolve(item, disclosures) for name, item in value.items() if name != "_sd"}
        for digest in value.get("_sd", []):
            _, name, item = disclosures[digest]
            resolved[name] = _resolve(item, disclosures)
        return resolved
    return value


def _hops(chain: str) -> list[_Hop]:
    """The SD-JWTs of a `~~`-joined chain, each ending in `~` as it is hashed, with their claims resolved."""
    hops = []
    for segment in chain.split("~~"):
        text = segment if segment.endswith("~") else segment + "~"
        jwt, *disclosed = text.split("~")[:-1]
        disclosures = {_sha256(item): _b64_json(item) for item in disclosed}
        hops.append(_Hop(jwt, text, _resolve(_b64_json(jwt.split(".")[1]), disclosures)))
    return hops


def _mandate(chain: str, issuer_keys: JSON) -> tuple[JSON, JSON, JSON]:
    """The open mandate, the closed one and the closing hop's claims (`aud`, `nonce`), signatures checked."""
    open_hop, closed_hop = _hops(chain)
    _verified(open_hop.jwt, issuer_keys)
    [opened] = open_hop.claims["delegate_payload"]
    agent_key = {"keys": [{**opened["cnf"]["jwk"], "kid": "cnf"}]}
    binding = _verified(closed_hop.jwt, agent_key, kid="cnf")
    assert binding["sd_hash"] == _sha256(open_hop.text), "the closed hop signs the open mandate as presented"
    [closed] = closed_hop.claims["delegate_payload"]
    return opened, closed, binding


def _offer() -> tuple[JSON, JSON]:
    """The terms and the checkout artifact of the embedded offer."""
    task = example("ap2.payment-required.response.json")["result"]["task"]
    value = extension_object(task["status"]["message"])
    assert value is not None
    [artifact] = task["artifacts"]
    return value["required"], artifact


def _checkout() -> tuple[str, JSON]:
    _, artifact = _offer()
    token: str = artifact["parts"][0]["data"]["ap2.checkout_jwt"]
    return token, _verified(token, example("ap2.checkout-keys.json"))


def _submitted() -> tuple[JSON, JSON]:
    """The payment and the mandates part of the embedded payment."""
    message = example("ap2.payment-submitted.request.json")["params"]["message"]
    value = extension_object(message)
    assert value is not None
    [mandates] = [part["data"] for part in message["parts"] if "data" in part]
    return value["payload"], mandates


def test_the_checkout_artifact_is_the_offer_of_20_3() -> None:
    _, artifact = _offer()
    assert artifact["artifactId"] == _CHECKOUT_ARTIFACT
    assert EXTENSION_URI in artifact["extensions"]
    [part] = artifact["parts"]
    assert part["mediaType"] == "application/json"
    assert definition_errors("ap2.json", "CheckoutArtifactData", part["data"]) == []


def test_the_checkout_jwt_signs_the_terms_at_the_checkout_price() -> None:
    terms, _ = _offer()
    _, claims = _checkout()
    assert definition_errors("ap2.json", "CheckoutClaims", claims) == []
    assert claims["x402"] == terms
    assert {entry["extra"]["offerId"] for entry in terms["accepts"]} == {claims["id"]}
    [total] = [entry["amount"] for entry in claims["totals"] if entry["type"] == "total"]
    decimals = {(a["network"], a["address"]): a["decimals"] for a in _card_params()["assets"]}
    for entry in terms["accepts"]:
        scale = 10 ** (
            decimals[(entry["network"], entry["asset"])] - _MINOR_UNIT_EXPONENTS[claims["currency"]]
        )
        assert int(entry["amount"]) == total * scale


def _card_params() -> JSON:
    [declaration] = example("agent-card.json")["capabilities"]["extensions"]
    params: JSON = declaration["params"]
    return params


def test_the_mandates_name_the_checkout_and_the_payment() -> None:
    checkout_jwt, checkout = _checkout()
    payment, mandates = _submitted()
    assert definition_errors("ap2.json", "MandatesData", mandates) == []
    issuer_keys = example("ap2.issuer-keys.json")
    merchant = checkout["merchant"]
    _, closed_checkout, checkout_binding = _mandate(mandates["ap2.checkout_mandate"], issuer_keys)
    _, closed_payment, payment_binding = _mandate(mandates["ap2.payment_mandate"], issuer_keys)
    for binding in (checkout_binding, payment_binding):
        assert (binding["aud"], binding["nonce"]) == (merchant["id"], checkout["id"])
    assert definition_errors("ap2.json", "ClosedCheckoutMandate", closed_checkout) == []
    assert definition_errors("ap2.json", "ClosedPaymentMandate", closed_payment) == []
    assert closed_checkout["checkout_jwt"] == checkout_jwt
    assert closed_checkout["checkout_hash"] == _sha256(checkout_jwt)
    assert closed_payment["transaction_id"] == closed_checkout["checkout_hash"]
    assert closed_payment["payee"] == merchant
    [total] = [entry["amount"] for entry in checkout["totals"] if entry["type"] == "total"]
    assert closed_payment["payment_amount"] == {"amount": total, "currency": checkout["currency"]}
    instrument = closed_payment["payment_instrument"]
    payer = payment["payload"]["authorization"]["from"]
    assert instrument["id"] == f"{payment['accepted']['network']}:{payer}"
    assert instrument["payload_hash"] == _canonical_hash(payment)


def test_the_open_payment_mandate_refers_to_the_open_checkout_mandate() -> None:
    _, mandates = _submitted()
    issuer_keys = example("ap2.issuer-keys.json")
    open_checkout_text = _hops(mandates["ap2.checkout_mandate"])[0].text
    opened, _, _ = _mandate(mandates["ap2.payment_mandate"], issuer_keys)
    references = [c for c in opened["constraints"] if c["type"] == "payment.reference"]
    assert [c["conditional_transaction_id"] for c in references] == [_sha256(open_checkout_text)]


def _closed_jwts() -> tuple[str, str]:
    _, mandates = _submitted()
    checkout_hop = _hops(mandates["ap2.checkout_mandate"])[-1]
    payment_hop = _hops(mandates["ap2.payment_mandate"])[-1]
    return checkout_hop.jwt, payment_hop.jwt


def test_the_completion_carries_signed_success_receipts() -> None:
    task = example("ap2.payment-completed.response.json")["result"]["task"]
    message = task["status"]["message"]
    [data] = [part["data"] for part in message["parts"] if "data" in part]
    assert definition_errors("ap2.json", "ReceiptsData", data) == []
    keys = example("ap2.checkout-keys.json")
    checkout_receipt = _verified(data["ap2.checkout_receipt"], keys)
    payment_receipt = _verified(data["ap2.payment_receipt"], keys)
    checkout_jwt, payment_jwt = _closed_jwts()
    _, checkout = _checkout()
    value = extension_object(message)
    assert value is not None
    x402_receipt = value["receipts"][-1]
    assert checkout_receipt["status"] == payment_receipt["status"] == "Success"
    assert checkout_receipt["reference"] == _sha256(checkout_jwt)
    assert checkout_receipt["order_id"] == task["id"]
    assert payment_receipt["reference"] == _sha256(payment_jwt)
    assert payment_receipt["payment_id"] == checkout["id"]
    assert payment_receipt["psp_confirmation_id"] == x402_receipt["transaction"]
    assert (
        payment_receipt["network_confirmation_id"]
        == f"{x402_receipt['network']}:{x402_receipt['transaction']}"
    )
    assert [artifact["artifactId"] for artifact in task["artifacts"]][0] == _CHECKOUT_ARTIFACT


def test_a_refusal_carries_signed_error_receipts() -> None:
    [info] = example("ap2.mandate-refused.error.json")["error"]["data"]
    metadata = info["metadata"]
    assert definition_errors("ap2.json", "RefusalMetadata", metadata) == []
    keys = example("ap2.checkout-keys.json")
    checkout_jwt, payment_jwt = _closed_jwts()
    for token, closed in (
        (metadata["ap2CheckoutReceipt"], checkout_jwt),
        (metadata["ap2PaymentReceipt"], payment_jwt),
    ):
        receipt = _verified(token, keys)
        assert (receipt["status"], receipt["error"]) == ("Error", metadata["ap2Error"])
        assert receipt["reference"] == _sha256(closed)


@pytest.mark.parametrize(
    ("entry", "valid"),
    [
        (
            {
                "merchant": {"id": "merchant.example", "name": "Text statistics merchant"},
                "jwksUrl": "https://m.example/k",
            },
            True,
        ),
        (
            {
                "tenant": "acme",
                "merchant": {"id": "acme", "name": "Acme"},
                "jwksUrl": "https://m.example/k",
                "required": True,
            },
            True,
        ),
        ({"merchant": {"id": "merchant.example", "name": "Text statistics merchant"}}, False),
        ({"merchant": {"id": "merchant.example"}, "jwksUrl": "https://m.example/k"}, False),
        ({"merchant": {"id": "m", "name": "M"}, "jwksUrl": "http://m.example/k"}, False),
    ],
    ids=["default-tenant", "required-for-a-tenant", "no-jwks-url", "merchant-without-name", "plain-http"],
)
def test_card_params_take_the_ap2_declaration(entry: JSON, valid: bool) -> None:
    params = {**_card_params(), "ap2": [entry]}
    assert (schema_errors("card-params.json", params) == []) is valid


# The v0.2 form on A2A 0.3 (§20.7).


def _cart_offer() -> tuple[JSON, JSON]:
    """The task of the v0.2 form's offer and its `CartMandate`."""
    task = example("ap2.v0.2.payment-required.response.json")["result"]
    [artifact] = task["artifacts"]
    assert (artifact["artifactId"], artifact["extensions"]) == (_CHECKOUT_ARTIFACT, [EXTENSION_URI_V02])
    [part] = artifact["parts"]
    assert part["kind"] == "data" and part["data"].keys() == {AP2_V01_CART_MANDATE_KEY}
    cart: JSON = part["data"][AP2_V01_CART_MANDATE_KEY]
    return task, cart


def _cart_claims() -> JSON:
    _, cart = _cart_offer()
    return _verified(cart["merchant_authorization"], example("ap2.checkout-keys.json"))


def _payment_mandate() -> tuple[JSON, JSON]:
    """The v0.2 form's payment message and its `PaymentMandate`."""
    message = example("ap2.v0.2.payment-submitted.request.json")["params"]["message"]
    [data] = [part["data"] for part in message["parts"] if part["kind"] == "data"]
    assert data.keys() == {AP2_V01_PAYMENT_MANDATE_KEY}
    mandate: JSON = data[AP2_V01_PAYMENT_MANDATE_KEY]
    assert mandate.keys() == {"payment_mandate_contents", "user_authorization"}
    return message, mandate


def test_the_v0_2_offer_has_its_terms_in_the_cart_only() -> None:
    task, _ = _cart_offer()
    assert task["status"]["state"] == "input-required"
    # §20.7: v0.2 tells the flows apart by x402.payment.required, so it is not sent.
    assert task["status"]["message"]["metadata"] == {"x402.payment.status": "payment-required"}


def test_the_cart_is_signed_by_a_published_checkout_key_over_its_contents() -> None:
    _, cart = _cart_offer()
    claims = _cart_claims()
    _, checkout = _checkout()
    contents = cart["contents"]
    assert claims.keys() == {"iss", "sub", "iat", "exp", "jti", "cart_hash"}
    assert claims["cart_hash"] == _canonical_hash(contents)
    assert (claims["iss"], claims["sub"], claims["jti"]) == (
        checkout["iss"],
        checkout["merchant"]["id"],
        contents["id"],
    )
    assert datetime.fromisoformat(contents["cart_expiry"]).timestamp() == claims["exp"] > claims["iat"]
    assert contents["merchant_name"] == checkout["merchant"]["name"]


def test_the_cart_carries_the_x402_terms_at_its_total() -> None:
    _, cart = _cart_offer()
    request = cart["contents"]["payment_request"]
    [method] = request["method_data"]
    assert method["supported_methods"] == AP2_X402_METHOD
    terms, details = method["data"], request["details"]
    offer_id = cart["contents"]["id"]
    assert details["id"] == offer_id
    total = details["total"]["amount"]
    assert [item["amount"] for item in details["display_items"]] == [total]
    params = _card_params()
    decimals = {(a["network"], a["address"]): a["decimals"] for a in params["assets"]}
    pay_to = {(entry["network"], entry["address"]) for entry in params["payTo"] if "tenant" not in entry}
    assert terms["x402Version"] == 1 and terms["accepts"]
    for entry in terms["accepts"]:
        # The x402 v1 terms of a v0.2 interface (§13), which read as v2 terms the card allows.
        term = requirements_v1_to_v2(PaymentRequirementsV1.from_wire(entry)).to_json_dict()
        assert term["extra"]["offerId"] == offer_id
        assert (term["network"], term["payTo"]) in pay_to
        # The price rule of §20.3, with the total in major units (a W3C payment amount).
        exponent = decimals[(term["network"], term["asset"])]
        assert Decimal(term["amount"]) == Decimal(str(total["value"])) * 10**exponent
        assert total["currency"] == "USD"


def test_the_payment_mandate_pays_the_cart_with_the_x402_payment() -> None:
    task, cart = _cart_offer()
    message, mandate = _payment_mandate()
    contents = mandate["payment_mandate_contents"]
    response = contents["payment_response"]
    offer_id = cart["contents"]["id"]
    assert (message["role"], message["taskId"]) == ("user", task["id"])
    # §20.7: payment-submitted and no other x402.payment.* key, the payment being in `details`.
    assert message["metadata"] == {"x402.payment.status": "payment-submitted"}
    assert (response["request_id"], contents["payment_details_id"]) == (offer_id, offer_id)
    assert response["method_name"] == AP2_X402_METHOD
    assert contents["payment_details_total"] == cart["contents"]["payment_request"]["details"]["total"]
    assert contents["merchant_agent"] == _cart_claims()["sub"]
    payment = response["details"]
    [method] = cart["contents"]["payment_request"]["method_data"]
    [entry] = method["data"]["accepts"]
    authorization = payment["payload"]["authorization"]
    assert (payment["x402Version"], payment["scheme"], payment["network"]) == (
        1,
        entry["scheme"],
        entry["network"],
    )
    assert (authorization["to"], authorization["value"]) == (entry["payTo"], entry["maxAmountRequired"])


def _user_authorization() -> tuple[JSON, JSON]:
    """The issuer-signed JWT's claims and the key-binding JWT's, every signature and binding checked."""
    _, mandate = _payment_mandate()
    token: str = mandate["user_authorization"]
    issued, *disclosures, binding = token.split("~")
    assert binding, "user_authorization ends with a key-binding JWT"
    claims = _verified(issued, example("ap2.issuer-keys.json"))
    named = set(claims.get("_sd", []))
    assert all(_sha256(disclosure) in named for disclosure in disclosures)
    assert _b64_json(binding.split(".")[0]) == {"alg": "ES256", "typ": "kb+jwt"}
    holder = {"keys": [{**claims["cnf"]["jwk"], "kid": "cnf"}]}
    bound = _verified(binding, holder, kid="cnf")
    assert bound["sd_hash"] == _sha256(token[: len(token) - len(binding)])
    return claims, bound


def test_the_user_authorization_binds_the_cart_and_the_payment_to_the_round() -> None:
    _, cart = _cart_offer()
    _, mandate = _payment_mandate()
    cart_claims = _cart_claims()
    claims, bound = _user_authorization()
    assert (bound["aud"], bound["nonce"]) == (cart_claims["sub"], cart["contents"]["id"])
    assert cart_claims["iat"] <= bound["iat"] <= cart_claims["exp"]
    assert claims["iat"] <= bound["iat"] <= claims["exp"]
    assert bound["transaction_data"] == [
        _canonical_hash(cart),
        _canonical_hash(mandate["payment_mandate_contents"]),
    ]


def test_the_merchant_reads_the_user_authorization_as_these_tests_do() -> None:
    # A second reading, by the merchant's own verifier (§20.7), of the same presentation.
    _, cart = _cart_offer()
    _, mandate = _payment_mandate()
    cart_claims = _cart_claims()
    _, bound = _user_authorization()
    hashes = verify_user_authorization(
        mandate["user_authorization"],
        IssuerKeys.from_jwks(example("ap2.issuer-keys.json")),
        audience=cart_claims["sub"],
        nonce=cart["contents"]["id"],
        not_before=cart_claims["iat"],
        now=bound["iat"],
    )
    assert list(hashes) == bound["transaction_data"]

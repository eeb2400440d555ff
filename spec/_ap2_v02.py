"""The examples of the embedded flow's v0.2 form (§20.7), made by the project's own code with throwaway keys.

A maintainer command (``python -m spec.build --ap2-v02-examples``), like ``--sign-card``: the cart is
``a2a_x402.merchant.ap2.build_cart``'s, signed with a fresh checkout key; the payment is
``a2a_x402.payer.sign_payment``'s, by a fresh payer key, on the x402 v1 form of the §20 example's terms
(what a v0.2 interface offers for `exact` by EIP-3009, §13); the ``PaymentMandate`` is the AP2 SDK's v0.1
model, its ``user_authorization`` an SD-JWT a fresh issuer key issued for a fresh agent key, with a
key-binding JWT over the two hashes. Only the public keys are published, as second keys of the
``ap2.checkout-keys.json`` and ``ap2.issuer-keys.json`` examples; every private key exists only in memory.
The times are the §20 examples', so the documents read as the same morning's.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

from a2a_x402.extension import (
    AP2_V01_CART_MANDATE_KEY,
    AP2_V01_PAYMENT_MANDATE_KEY,
    EXTENSION_URI_V02,
    Ap2Merchant,
)

from ._markdown import read_examples, render_example, replace_examples

__all__ = ["REQUIRED_EXAMPLE", "SUBMITTED_EXAMPLE", "make_ap2_v02_examples"]

REQUIRED_EXAMPLE = "ap2.v0.2.payment-required.response.json"
SUBMITTED_EXAMPLE = "ap2.v0.2.payment-submitted.request.json"
_CHECKOUT_KEYS = "ap2.checkout-keys.json"
_ISSUER_KEYS = "ap2.issuer-keys.json"
_OFFER_1_0 = "ap2.payment-required.response.json"
_MANDATES_1_0 = "ap2.payment-submitted.request.json"
_CART_ARTIFACT = {"artifactId": "ap2-checkout", "name": "AP2 cart", "extensions": [EXTENSION_URI_V02]}
_TASK_ID = "d84f1c2a-6b3e-4f97-8a05-3e9c7b1d2f60"
_CONTEXT_ID = "1b7e9d35-c2a4-4e08-b6f1-8d3c5a9e7f24"
_OFFER_ID = "8c2f4e6a1d3b45079e8a6c4f2b0d1e3a"
_STATUS_MESSAGE_ID = "e3a7c915-4d2b-4f6e-8c10-5b9d2f7a3e81"
_PAYMENT_MESSAGE_ID = "7d5b2e90-1c8f-4a36-9e4d-2f6a8c0b5e17"
_MIME_TYPE = "application/json"
_STATUS_TEXT = "Payment required: 0.25 USDC on Base Sepolia, with an AP2 PaymentMandate: see the AP2 cart."
_BINDING_DELAY_S = 30  # the agent signs half a minute after the cart was offered


def make_ap2_v02_examples(markdown: str) -> str:
    """``markdown`` with the two §20.7 examples made afresh and the two JWK Set examples given their new
    second key (any earlier second key replaced; the first, which the A2A 1.0 examples use, kept)."""
    examples = {example.name: example.document for example in read_examples(markdown)}
    task = examples[_OFFER_1_0]["result"]["task"]
    required = task["status"]["message"]["metadata"][_uri_1_0(task)]["required"]
    claims = _payload(task["artifacts"][0]["parts"][0]["data"]["ap2.checkout_jwt"])
    merchant = Ap2Merchant(**claims["merchant"])
    terms, requirements = _v1_terms(required, _STATUS_TEXT)
    checkout_keys, cart = _cart(terms, merchant, claims)
    payment = _v1_payment(requirements, valid_after=claims["iat"] - 30, valid_before=claims["iat"] + 330)
    issuer_jwk, mandate = _mandate(
        cart, payment, merchant_id=merchant.id, now=claims["iat"] + _BINDING_DELAY_S
    )
    texts = {
        REQUIRED_EXAMPLE: render_example(_offer_document(cart, task["status"]["timestamp"])),
        SUBMITTED_EXAMPLE: render_example(_payment_document(mandate)),
        _CHECKOUT_KEYS: render_example(
            _with_second_key(
                examples[_CHECKOUT_KEYS], _kid(task["artifacts"][0]["parts"][0]["data"]), checkout_keys
            )
        ),
        _ISSUER_KEYS: render_example(
            _with_second_key(examples[_ISSUER_KEYS], _issuer_kid_1_0(examples[_MANDATES_1_0]), issuer_jwk)
        ),
    }
    return replace_examples(markdown, texts)


def _uri_1_0(task: Mapping[str, Any]) -> str:
    [uri] = task["status"]["message"]["extensions"]
    return str(uri)


def _b64_json(segment: str) -> Any:
    return json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))


def _payload(token: str) -> Any:
    return _b64_json(token.split(".")[1])


def _kid(data: Mapping[str, str]) -> str:
    return str(_b64_json(data["ap2.checkout_jwt"].split(".")[0])["kid"])


def _issuer_kid_1_0(request: Mapping[str, Any]) -> str:
    [mandates] = [part["data"] for part in request["params"]["message"]["parts"] if "data" in part]
    return str(_b64_json(mandates["ap2.payment_mandate"].split(".")[0])["kid"])


def _with_second_key(jwks: Mapping[str, Any], kept_kid: str, jwk: Mapping[str, Any]) -> dict[str, Any]:
    [kept] = [key for key in jwks["keys"] if key["kid"] == kept_kid]
    return {"keys": [kept, dict(jwk)]}


def _v1_terms(required: Mapping[str, Any], reason: str) -> tuple[dict[str, Any], Any]:
    """The x402 v1 terms a v0.2 interface offers for the §20 example's v2 terms (``_OFFER_ID`` as offer),
    and the v2 requirements of its entry."""
    from a2a_x402.facilitator.wire import (
        PaymentRequired,
        PaymentRequiredV1,
        requirements_v1_to_v2,
        requirements_v2_to_v1,
    )

    fresh = json.loads(json.dumps(required))
    for entry in fresh["accepts"]:
        entry["extra"]["offerId"] = _OFFER_ID
    terms_v2 = PaymentRequired.from_wire(fresh)
    resource = terms_v2.resource.model_copy(update={"mime_type": _MIME_TYPE})
    accepts = tuple(requirements_v2_to_v1(entry, resource) for entry in terms_v2.accepts)
    terms = PaymentRequiredV1(x402_version=1, error=reason, accepts=accepts)
    return terms.to_json_dict(), requirements_v1_to_v2(accepts[0])


def _cart(terms: Mapping[str, Any], merchant: Ap2Merchant, claims: Mapping[str, Any]) -> tuple[Any, Any]:
    """A fresh checkout key's public JWK and the ``CartMandate`` it signed for ``terms``."""
    from a2a_x402.agentcard import generate_signing_key
    from a2a_x402.merchant.ap2 import CheckoutKeys, build_cart

    keys = CheckoutKeys((generate_signing_key("ES256"),))
    [line] = claims["line_items"]
    [total] = [entry["amount"] for entry in claims["totals"] if entry["type"] == "total"]
    cart = build_cart(
        terms,
        offer_id=_OFFER_ID,
        merchant=merchant,
        keys=keys,
        title=line["item"]["title"],
        total=total,
        currency=claims["currency"],
        now=claims["iat"],
        lifetime_s=claims["exp"] - claims["iat"],
    )
    [public] = keys.public_jwks()["keys"]
    return public, cart


def _v1_payment(requirements: Any, *, valid_after: int, valid_before: int) -> dict[str, Any]:
    """An x402 v1 payment of ``requirements`` by a fresh payer (EIP-3009, the form v1 terms are paid in)."""
    from eth_account import Account

    from a2a_x402.facilitator.wire import v1_network_from_chain_id
    from a2a_x402.payer import sign_payment

    signed = sign_payment(
        Account.create().key.hex(), requirements, valid_after=valid_after, valid_before=valid_before
    ).to_json_dict()
    return {
        "x402Version": 1,
        "scheme": requirements.scheme,
        "network": v1_network_from_chain_id(requirements.chain_id),
        "payload": signed["payload"],
    }


def _mandate(
    cart: Mapping[str, Any], payment: Mapping[str, Any], *, merchant_id: str, now: int
) -> tuple[Any, Any]:
    """A fresh issuer key's public JWK and the ``PaymentMandate`` paying ``cart`` with ``payment``, its
    ``user_authorization`` issued by that key for a fresh agent key, as the kit's AP2 v0.1 checks make it."""
    from a2a_x402.conformance._ap2_sdk import generate_key, payment_mandate, public_jwk, read_cart

    issuer, agent = generate_key("ap2-v02-example-issuer"), generate_key("ap2-v02-example-agent")
    mandate = payment_mandate(
        read_cart(cart), payment, user_key=issuer, agent_key=agent, merchant_id=merchant_id, now=now
    )
    return {**public_jwk(issuer), "alg": "ES256", "use": "sig"}, mandate


def _offer_document(cart: Mapping[str, Any], timestamp: str) -> dict[str, Any]:
    """The answer to the request of §8.1 on A2A 0.3: the cart's artifact, and no x402.payment.required."""
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "result": {
            "artifacts": [
                {
                    **_CART_ARTIFACT,
                    "parts": [{"kind": "data", "data": {AP2_V01_CART_MANDATE_KEY: dict(cart)}}],
                }
            ],
            "contextId": _CONTEXT_ID,
            "id": _TASK_ID,
            "kind": "task",
            "status": {
                "message": {
                    "contextId": _CONTEXT_ID,
                    "extensions": [EXTENSION_URI_V02],
                    "kind": "message",
                    "messageId": _STATUS_MESSAGE_ID,
                    "metadata": {"x402.payment.status": "payment-required"},
                    "parts": [{"kind": "text", "text": _STATUS_TEXT}],
                    "role": "agent",
                    "taskId": _TASK_ID,
                },
                "state": "input-required",
                "timestamp": timestamp,
            },
        },
    }


def _payment_document(mandate: Mapping[str, Any]) -> dict[str, Any]:
    """The payment message on A2A 0.3: the ``PaymentMandate`` part and ``payment-submitted`` alone."""
    return {
        "id": 2,
        "jsonrpc": "2.0",
        "method": "message/send",
        "params": {
            "message": {
                "extensions": [EXTENSION_URI_V02],
                "kind": "message",
                "messageId": _PAYMENT_MESSAGE_ID,
                "metadata": {"x402.payment.status": "payment-submitted"},
                "parts": [
                    {"kind": "text", "text": "Here is my payment, in my AP2 PaymentMandate."},
                    {"kind": "data", "data": {AP2_V01_PAYMENT_MANDATE_KEY: dict(mandate)}},
                ],
                "role": "user",
                "taskId": _TASK_ID,
            }
        },
    }

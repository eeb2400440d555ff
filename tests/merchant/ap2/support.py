"""Shared by the tests of what the merchant signs: checkout key files, the round of the §20 examples, and
reading a compact JWS without verifying it."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from joserfc.jwk import KeySet

from a2a_x402.extension import Ap2Merchant
from a2a_x402.facilitator.wire import PaymentRequired
from a2a_x402.merchant.ap2 import CheckoutItem, CheckoutKeys, ParAsset
from tests.spec.support import example

MERCHANT = Ap2Merchant(
    id="merchant.example", name="Text statistics merchant", website="https://merchant.example"
)
"""The tenant's AP2 merchant in the examples."""
ITEM = CheckoutItem(id="text-stats", title="Text statistics, one request")
USDC = ParAsset(network="eip155:84532", address="0x036CbD53842c5426634e7929541eC2318f3dCF7e", decimals=6)
LINKS = {"terms_of_service": "https://merchant.example/terms"}
OFFER_ID = "5d1e8a3c7b9f42e0a6c4d2b8f0e1a3c5"
TASK_ID = "a3c9e1f7-52b4-4d8e-9f06-7c1d2e3b4a59"


def write_key(
    path: Path,
    key: ec.EllipticCurvePrivateKey | None = None,
    *,
    private_format: serialization.PrivateFormat = serialization.PrivateFormat.PKCS8,
) -> ec.EllipticCurvePrivateKey:
    """Write ``key`` (a fresh P-256 key by default) to ``path`` as an unencrypted PEM; return it."""
    key = key if key is not None else ec.generate_private_key(ec.SECP256R1())
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, private_format, serialization.NoEncryption())
    )
    return key


def example_round() -> tuple[dict[str, Any], dict[str, Any], str]:
    """The examples' checkout: the terms (``required`` of the status), the JWT's claims, and the JWT."""
    task = example("ap2.payment-required.response.json")["result"]["task"]
    required = task["status"]["message"]["metadata"][
        "https://github.com/google-agentic-commerce/a2a-x402/blob/main/spec/v0.3"
    ]["required"]
    jwt = task["artifacts"][0]["parts"][0]["data"]["ap2.checkout_jwt"]
    return required, claims_of(jwt), jwt


def example_terms() -> PaymentRequired:
    """The examples' terms as the merchant stores them."""
    return PaymentRequired.from_wire(example_round()[0])


def published(keys: CheckoutKeys) -> KeySet:
    """The keys a client reads from the tenant's ``jwksUrl``: the JWK Set as JSON, parsed by joserfc."""
    served: Any = json.loads(json.dumps(keys.public_jwks()))
    return KeySet.import_key_set(served)


def header_of(token: str) -> Any:
    """The protected header of a compact JWS, unverified."""
    return _segment(token.split(".")[0])


def claims_of(token: str) -> Any:
    """The payload of a compact JWS, unverified."""
    return _segment(token.split(".")[1])


def _segment(text: str) -> Any:
    return json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def shape(value: Any) -> Any:
    """The structure of a JSON value: objects by their member names, arrays by their items, and scalars by
    their type."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shape(item) for item in value]
    return type(value).__name__

"""Signatures per reading: what `read_card` makes of a card for each SDK, and how our verifier treats them.

The a2a-sdk 1.x reading is pinned against that SDK's own canonical form here; a2a-sdk 0.3's verifier (in
`.venv-compat`) checks both SDK readings end to end in tests/merchant/edge/test_card_interop.py.
"""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest
from a2a.client.card_resolver import parse_agent_card
from a2a.utils.signing import _canonicalize_agent_card

from a2a_x402.agentcard import (
    OTHER_READING,
    CardReading,
    CardStatus,
    CardVerifier,
    SigningKey,
    VerificationKey,
    canonicalize_card,
    generate_signing_key,
    parse_jwks,
    read_card,
    sign_card,
)
from a2a_x402.agentcard._jws import sign_payload

BASE = "https://shop.example"


def card_v0_3() -> dict[str, Any]:
    """A 0.3 card as the merchant serves it: `preferredTransport` at its 0.3 default, `required: false`."""
    return {
        "name": "Shop",
        "description": "Sells things – cheaply",  # non-ASCII: a2a-sdk 0.3 writes it \\u-escaped
        "version": "1.0.0",
        "url": f"{BASE}/a2a/jsonrpc",
        "preferredTransport": "JSONRPC",
        "protocolVersion": "0.3",
        "additionalInterfaces": [{"transport": "JSONRPC", "url": f"{BASE}/a2a/jsonrpc"}],
        "capabilities": {
            "streaming": True,
            "pushNotifications": False,
            "extensions": [{"uri": "https://ext.example/v1", "required": False, "params": {"n": 6}}],
        },
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "s", "name": "S", "description": "d", "tags": ["t"]}],
    }


def dual_card() -> dict[str, Any]:
    interfaces = [{"url": f"{BASE}/a2a/jsonrpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]
    return {**card_v0_3(), "supportedInterfaces": interfaces}


def header_of(signature: dict[str, str]) -> dict[str, Any]:
    encoded = signature["protected"]
    header: dict[str, Any] = json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
    return header


def trusted(key: SigningKey) -> list[VerificationKey]:
    return list(parse_jwks({"keys": [key.public_jwk()]}).values())


@pytest.fixture
def key() -> SigningKey:
    return generate_signing_key("ES256")


@pytest.mark.parametrize("card", [card_v0_3(), dual_card()], ids=["v0_3", "dual"])
def test_the_sdk_v1_reading_is_the_sdks_own_canonical_form(card: dict[str, Any]) -> None:
    sdk = _canonicalize_agent_card(parse_agent_card(copy.deepcopy(card))).encode()
    assert read_card(card, CardReading.SDK_V1) == sdk
    assert sdk != canonicalize_card(card)  # else one signature would do


def test_the_sdk_v0_3_reading_drops_defaults_and_unknown_members_and_escapes_non_ascii() -> None:
    reading = read_card(dual_card(), CardReading.SDK_V0_3)
    assert reading is not None
    read = json.loads(reading)
    assert "preferredTransport" not in read and "supportedInterfaces" not in read
    assert read["capabilities"]["extensions"][0]["required"] is False  # ours drops a false bool
    assert b"\\u2013" in reading and reading == read_card(card_v0_3(), CardReading.SDK_V0_3)


def test_a_1_0_card_has_no_0_3_reading() -> None:
    card = {key: value for key, value in dual_card().items() if key not in ("url", "preferredTransport")}
    assert read_card(card, CardReading.SDK_V0_3) is None


def test_sign_card_signs_each_distinct_reading_once_per_key_ours_first(key: SigningKey) -> None:
    other = generate_signing_key("EdDSA")
    signed = sign_card(dual_card(), [key, other], jku=f"{BASE}/jwks", readings=tuple(CardReading))
    assert [(header_of(s).get("cardReading"), header_of(s)["kid"]) for s in signed["signatures"]] == [
        (None, key.kid),
        (None, other.kid),
        ("a2a-sdk-1", key.kid),
        ("a2a-sdk-1", other.kid),
        ("a2a-sdk-0.3", key.kid),
        ("a2a-sdk-0.3", other.kid),
    ]
    # A card every reader reads alike gets one signature per key, untagged.
    plain = {"name": "n", "description": "d", "version": "1", "skills": card_v0_3()["skills"]}
    plain["supportedInterfaces"] = dual_card()["supportedInterfaces"]
    plain["capabilities"] = {"streaming": True}
    plain["defaultInputModes"] = plain["defaultOutputModes"] = ["text/plain"]
    assert read_card(plain, CardReading.SDK_V1) == canonicalize_card(plain)
    once = sign_card(plain, [key], readings=tuple(CardReading))
    assert [header_of(s) for s in once["signatures"]] == [{"alg": "ES256", "typ": "JOSE", "kid": key.kid}]


async def test_our_verifier_sets_other_readings_aside_without_failing_the_card(key: SigningKey) -> None:
    signed = sign_card(dual_card(), [key], readings=tuple(CardReading))
    # Only the signing key is trusted: were the tagged signatures checked over our reading, they would fail.
    result = await CardVerifier(trusted_keys=trusted(key)).verify(signed)

    assert (result.status, result.kid) == (CardStatus.VERIFIED, key.kid)
    assert [(c.index, c.code) for c in result.checks] == [(0, None)]
    assert [(c.index, c.kid, c.reading, c.code) for c in result.others] == [
        (1, key.kid, "a2a-sdk-1", OTHER_READING),
        (2, key.kid, "a2a-sdk-0.3", OTHER_READING),
    ]


async def test_a_card_signed_only_over_an_sdk_reading_does_not_verify_with_ours(key: SigningKey) -> None:
    # An SDK reading covers less than the served JSON (a2a-sdk 0.3 drops `supportedInterfaces`): accepting
    # it would let those members change unnoticed. Tagging it cannot be undone: the tag is signed.
    signed = sign_card(dual_card(), [key], readings=tuple(CardReading))
    only_sdk = {**signed, "signatures": signed["signatures"][2:]}
    result = await CardVerifier(trusted_keys=trusted(key)).verify(only_sdk)

    assert (result.status, result.code) == (CardStatus.FAILED, "card_verification_failed")
    assert result.checks == () and [c.reading for c in result.others] == ["a2a-sdk-0.3"]
    assert "another verifier's reading" in result.reason and "a2a-sdk-0.3" in result.reason


async def test_a_malformed_reading_tag_is_a_malformed_signature(key: SigningKey) -> None:
    card = dual_card()
    entry = sign_payload(canonicalize_card(card), key, jku=None)
    header = {**header_of(entry), "cardReading": 3}
    entry["protected"] = base64.urlsafe_b64encode(json.dumps(header).encode()).rstrip(b"=").decode()
    result = await CardVerifier(trusted_keys=trusted(key)).verify({**card, "signatures": [entry]})

    assert [c.code for c in result.checks] == ["signature_malformed"] and "cardReading" in result.reason

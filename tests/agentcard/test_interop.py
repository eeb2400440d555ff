"""Interop with a2a-sdk 1.3.0's ``a2a.utils.signing`` (PyJWT based).

Cards signed by the SDK verify with ours and ours verify with the SDK, for every card outside the SDK's
empty-field deviation: the SDK strips every empty string, list and object (REQUIRED ones included) before
JCS, while A2A §8.4.1 keeps them. That deviation and the served-JSON difference (legacy 0.3 members) are
pinned here too, so a change on either side shows up.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from a2a.server.request_handlers.response_helpers import agent_card_to_dict
from a2a.types import AgentCapabilities, AgentCard
from a2a.utils.signing import (
    InvalidSignaturesError,
    _canonicalize_agent_card,
    create_agent_card_signer,
    create_signature_verifier,
)
from google.protobuf.json_format import MessageToDict, ParseDict
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from joserfc.jwk import OKPKey

from a2a_x402.agentcard import (
    CardStatus,
    CardVerifier,
    SigningKey,
    canonicalize_card,
    generate_signing_key,
    parse_jwks,
    sign_card,
)
from tests.agentcard.conftest import load_vector, merchant_card
from tests.agentcard.strategies import card_dicts

JKU = "https://shop.example/.well-known/jwks.json"
KEYS = {alg: generate_signing_key(alg) for alg in ("ES256", "EdDSA")}


def sdk_sign(card: AgentCard, key: SigningKey) -> AgentCard:
    signer = create_agent_card_signer(
        key.key.as_pem(private=True), {"kid": key.kid, "alg": key.alg, "jku": JKU, "typ": "JOSE"}
    )
    return signer(card)


def sdk_verify(card: AgentCard, key: SigningKey) -> None:
    def key_provider(kid: str | None, jku: str | None) -> bytes:
        assert (kid, jku) == (key.kid, JKU)
        return key.key.as_pem(private=False)

    create_signature_verifier(key_provider, [key.alg])(card)


def our_verifier(key: SigningKey) -> CardVerifier:
    return CardVerifier(trusted_keys=parse_jwks({"keys": [key.public_jwk()]}).values())


@pytest.mark.parametrize("alg", ["ES256", "EdDSA"])
async def test_sdk_signed_card_verifies_with_ours(alg: str) -> None:
    key = KEYS[alg]
    signed = sdk_sign(ParseDict(merchant_card(), AgentCard()), key)
    verifier = our_verifier(key)
    assert (await verifier.verify(signed)).verified
    assert (await verifier.verify(json.loads(json.dumps(MessageToDict(signed))))).verified


@pytest.mark.parametrize("alg", ["ES256", "EdDSA"])
def test_our_signed_card_verifies_with_the_sdk(alg: str) -> None:
    key = KEYS[alg]
    signed = sign_card(merchant_card(), [key], jku=JKU)
    sdk_verify(ParseDict(signed, AgentCard()), key)


async def test_committed_sdk_signed_vector_verifies() -> None:
    vector = load_vector("signed_es256_sdk.json")
    verifier = CardVerifier(trusted_keys=parse_jwks({"keys": [vector["public_jwk"]]}).values())
    assert canonicalize_card(vector["signed"]) == vector["canonical"].encode()
    result = await verifier.verify(vector["signed"])
    assert result.verified and result.kid == "sdk-test-key"
    tampered = copy.deepcopy(vector["signed"])
    tampered["provider"]["organization"] = "ACME Evil"
    assert not (await verifier.verify(tampered)).verified


def test_committed_eddsa_vector_verifies_with_the_sdk() -> None:
    vector = load_vector("signed_eddsa.json")
    jwk = vector["private_jwk"]
    key = SigningKey(
        kid=jwk["kid"], alg="EdDSA", key=OKPKey.import_key({k: jwk[k] for k in ("kty", "crv", "d", "x")})
    )
    sdk_verify(ParseDict(vector["signed"], AgentCard()), key)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(card_dicts(nonempty=True), st.sampled_from(["ES256", "EdDSA"]))
async def test_both_directions_for_cards_without_empty_fields(card: dict[str, Any], alg: str) -> None:
    key = KEYS[alg]
    proto = ParseDict(card, AgentCard())
    assert _canonicalize_agent_card(proto).encode() == canonicalize_card(card)

    assert (await our_verifier(key).verify(sdk_sign(ParseDict(card, AgentCard()), key))).verified
    sdk_verify(ParseDict(sign_card(card, [key], jku=JKU), AgentCard()), key)


SPEC_FRAGMENT = AgentCard(
    name="Example Agent",
    description="",
    capabilities=AgentCapabilities(streaming=False, push_notifications=False),
)


def test_deviation_the_sdk_strips_empty_required_fields_of_the_spec_example() -> None:
    sdk = _canonicalize_agent_card(SPEC_FRAGMENT)
    assert sdk == '{"capabilities":{"pushNotifications":false,"streaming":false},"name":"Example Agent"}'
    ours = json.loads(canonicalize_card(SPEC_FRAGMENT))
    assert ours["description"] == "" and ours["skills"] == []  # as §8.4.1 and its example require
    assert canonicalize_card(SPEC_FRAGMENT) == load_vector("spec_example.json")["canonical"].encode()


async def test_deviation_signatures_do_not_cross_for_the_spec_example() -> None:
    key = KEYS["ES256"]
    by_sdk = sdk_sign(copy.deepcopy(SPEC_FRAGMENT), key)
    result = await our_verifier(key).verify(by_sdk)
    assert result.status is CardStatus.FAILED and [c.code for c in result.checks] == ["signature_mismatch"]

    by_us = sign_card(MessageToDict(SPEC_FRAGMENT), [key], jku=JKU)
    with pytest.raises(InvalidSignaturesError):
        sdk_verify(ParseDict(by_us, AgentCard()), key)


async def test_sdk_served_dual_stack_card_is_not_what_the_sdk_signed() -> None:
    # The SDK signs the proto, then serves MessageToDict plus merged 0.3 members when an interface speaks 0.3.
    # We verify the JSON received, so such a card fails here; the merchant must sign the dict it serves.
    key = KEYS["ES256"]
    card = merchant_card()
    card["supportedInterfaces"].append(
        {"url": "https://shop.example/a2a/jsonrpc", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"}
    )
    signed_proto = sdk_sign(ParseDict(card, AgentCard()), key)
    served = agent_card_to_dict(signed_proto)
    assert {"url", "preferredTransport", "protocolVersion"} <= set(served)

    verifier = our_verifier(key)
    assert (await verifier.verify(signed_proto)).verified
    assert [c.code for c in (await verifier.verify(served)).checks] == ["signature_mismatch"]

    ours = sign_card(served, [key], jku=JKU)
    assert (await verifier.verify(json.loads(json.dumps(ours)))).verified
    with pytest.raises(InvalidSignaturesError):  # the SDK parses into the proto and drops the 0.3 members
        sdk_verify(ParseDict(ours, AgentCard(), ignore_unknown_fields=True), key)

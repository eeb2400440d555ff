"""The signed merchant's cards verify with each ecosystem's own verifier, not only with ours.

Three verifiers, each reading the card as its clients do: ours (`CardVerifier`, over the JSON received),
a2a-sdk 1.x's (`create_signature_verifier` on the card its `A2ACardResolver` parses, in-process) and
a2a-sdk 0.3.x's (the same on its pydantic card, in `.venv-compat` as a subprocess: the two SDKs cannot share
a virtualenv). The cards are fetched from the real merchant: the 1.0 card, the 0.3 card, and the card
served without `A2A-Version`, which both SDKs' clients fetch; at the root and at a named tenant's root.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client.card_resolver import parse_agent_card
from a2a.utils.signing import InvalidSignaturesError, create_signature_verifier

from a2a_x402.agentcard import (
    CardReading,
    CardVerifier,
    KeyStore,
    SignaturePolicy,
    generate_signing_key,
    parse_jwks,
    sign_card,
)
from a2a_x402.merchant.edge import AGENT_CARD_PATH, JSONRPC_PATH, tenant_root
from tests.fixtures.compat import CompatPython
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.merchant import TWO_TENANTS, MerchantStarter
from tests.merchant.test_card_signing import fetch_jwks, sdk_key_provider, signing_merchant, verify

pytestmark = pytest.mark.timeout(90)

REQUESTS = {"1.0": {"A2A-Version": "1.0"}, "0.3": {"A2A-Version": "0.3"}, "none": {}}

# a2a-sdk 0.3's client path: `A2ACardResolver` validates the JSON as its `AgentCard`, then calls the
# verifier. Keys come from the published JWK Set; with "only", every kid but that one gets an unrelated key,
# so a card verifies only through a signature of that key.
SDK_V0_3_VERIFY = """
import json, sys
from a2a.types import AgentCard
from a2a.utils.signing import InvalidSignaturesError, create_signature_verifier
from jwt import PyJWK
from pydantic import ValidationError

data = json.load(sys.stdin)
keys = {key["kid"]: PyJWK(key) for key in data["jwks"]["keys"]}
stranger = PyJWK(data["stranger"])

def provide(kid, _jku):
    return keys[kid] if data["only"] in (None, kid) else stranger

verdicts = {}
for name, card_json in data["cards"].items():
    try:
        card = AgentCard.model_validate(card_json)
    except ValidationError:
        verdicts[name] = "unparseable"
        continue
    try:
        create_signature_verifier(provide, ["ES256", "EdDSA"])(card)
        verdicts[name] = "verified"
    except InvalidSignaturesError:
        verdicts[name] = "InvalidSignaturesError"
print(json.dumps(verdicts))
"""


async def fetch_cards(http: httpx.AsyncClient, base_url: str) -> dict[str, dict[str, Any]]:
    cards: dict[str, dict[str, Any]] = {}
    for name, headers in REQUESTS.items():
        reply = await http.get(base_url + AGENT_CARD_PATH, headers=headers)
        assert reply.status_code == 200, reply.text
        cards[name] = reply.json()
    return cards


def sdk_v1_verdicts(
    cards: dict[str, dict[str, Any]], jwks: dict[str, Any], only: str | None = None
) -> dict[str, str]:
    """a2a-sdk 1.x's verdict on each card, parsed as its `A2ACardResolver` parses it."""
    provide = sdk_key_provider(jwks)
    stranger = generate_signing_key("ES256").key.as_pem(private=False)
    verdicts = {}
    for name, card_json in cards.items():
        verifier = create_signature_verifier(
            lambda kid, jku: provide(kid, jku) if only in (None, kid) else stranger, ["ES256", "EdDSA"]
        )
        try:
            verifier(parse_agent_card(copy.deepcopy(card_json)))
            verdicts[name] = "verified"
        except InvalidSignaturesError:
            verdicts[name] = "InvalidSignaturesError"
    return verdicts


async def sdk_v0_3_verdicts(
    compat: CompatPython, cards: dict[str, dict[str, Any]], jwks: dict[str, Any], only: str | None = None
) -> dict[str, str]:
    stranger = generate_signing_key("ES256").public_jwk()
    verdicts: dict[str, str] = await compat.run(
        SDK_V0_3_VERIFY, {"cards": cards, "jwks": jwks, "only": only, "stranger": stranger}
    )
    return verdicts


async def test_each_served_card_verifies_with_both_sdks_verifiers_and_ours(
    start_merchant: MerchantStarter, sqlite_url: str, tmp_path: Path, compat_python: CompatPython
) -> None:
    merchant = signing_merchant(start_merchant, sqlite_url, tmp_path)

    async with httpx.AsyncClient(timeout=HANG_S) as http:
        cards = await fetch_cards(http, merchant.base_url)
        jwks = await fetch_jwks(http, merchant.base_url)
        ours = {name: await verify(http, merchant.base_url, card) for name, card in cards.items()}

    assert sdk_v1_verdicts(cards, jwks) == {"1.0": "verified", "0.3": "verified", "none": "verified"}
    # A 1.0 card is no 0.3 card (no `url`): a 0.3 client refuses it before looking at signatures.
    assert await sdk_v0_3_verdicts(compat_python, cards, jwks) == {
        "1.0": "unparseable",
        "0.3": "verified",
        "none": "verified",
    }
    for name, result in ours.items():
        # Ours checks only the signatures over its own reading, and each of those verifies.
        assert result.verified, (name, result.reason)
        assert result.checks and all(check.verified for check in result.checks), name


async def test_during_a_rotation_each_key_signs_every_reading(
    start_merchant: MerchantStarter, sqlite_url: str, tmp_path: Path, compat_python: CompatPython
) -> None:
    store = KeyStore(tmp_path / "keys")
    old = store.generate().kid
    new = store.rotate().kid
    merchant = start_merchant(sqlite_url, card_keys_dir=str(tmp_path / "keys"))

    async with httpx.AsyncClient(timeout=HANG_S) as http:
        cards = await fetch_cards(http, merchant.base_url)
        jwks = await fetch_jwks(http, merchant.base_url)
        ours = {name: await verify(http, merchant.base_url, card) for name, card in cards.items()}
    # A verifier that knows only one of the two keys still verifies every card.
    only_old = CardVerifier(trusted_keys=[parse_jwks(jwks)[old]], policy=SignaturePolicy.REQUIRE)
    only_new = CardVerifier(trusted_keys=[parse_jwks(jwks)[new]], policy=SignaturePolicy.REQUIRE)
    for card in cards.values():
        assert (await only_old.verify(card)).kid == old
        assert (await only_new.verify(card)).kid == new

    for kid in (old, new):
        assert set(sdk_v1_verdicts(cards, jwks, only=kid).values()) == {"verified"}, kid
        v0_3 = await sdk_v0_3_verdicts(compat_python, cards, jwks, only=kid)
        assert v0_3 == {"1.0": "unparseable", "0.3": "verified", "none": "verified"}, kid
    for name, result in ours.items():
        assert [(check.kid, check.code) for check in result.checks] == [(new, None), (old, None)], name
        # Whatever else the card carries is over another verifier's reading, signed by both keys too.
        assert [check.kid for check in result.others] == [new, old] * (len(result.others) // 2), name


async def test_a_card_with_both_versions_members_verifies_with_both_sdks_and_ours(
    start_merchant: MerchantStarter, sqlite_url: str, tmp_path: Path, compat_python: CompatPython
) -> None:
    # The card a client without `A2A-Version` gets may carry the 1.0 `supportedInterfaces` beside the 0.3
    # members: each SDK drops what it does not know, so each reads it differently from the other and from us.
    merchant = start_merchant(sqlite_url)
    key = generate_signing_key("ES256")
    async with httpx.AsyncClient(timeout=HANG_S) as http:
        served = await fetch_cards(http, merchant.base_url)
    dual = {**served["0.3"], "supportedInterfaces": served["1.0"]["supportedInterfaces"]}
    signed = sign_card(dual, [key], readings=tuple(CardReading))  # as merchant.app signs
    jwks = {"keys": [key.public_jwk()]}

    result = await CardVerifier(
        trusted_keys=[parse_jwks(jwks)[key.kid]], policy=SignaturePolicy.REQUIRE
    ).verify(signed)
    assert result.verified and [check.code for check in result.checks] == [None]
    assert sdk_v1_verdicts({"dual": signed}, jwks) == {"dual": "verified"}
    assert await sdk_v0_3_verdicts(compat_python, {"dual": signed}, jwks) == {"dual": "verified"}
    # Each reading covers the URLs its reader connects to (the 1.0 interfaces, the 0.3 `url`): moving them to
    # another origin breaks the signature for every verifier.
    moved = json.loads(json.dumps(signed).replace(merchant.base_url, "https://attacker.example"))
    assert not (await CardVerifier(trusted_keys=[parse_jwks(jwks)[key.kid]]).verify(moved)).verified
    assert sdk_v1_verdicts({"moved": moved}, jwks) == {"moved": "InvalidSignaturesError"}
    assert await sdk_v0_3_verdicts(compat_python, {"moved": moved}, jwks) == {
        "moved": "InvalidSignaturesError"
    }


async def test_a_named_tenants_own_cards_verify_with_both_sdks_and_ours(
    start_merchant: MerchantStarter, sqlite_url: str, tmp_path: Path, compat_python: CompatPython
) -> None:
    # No default tenant: a 0.3 client reaches acme only through acme's own card, signed as the root's.
    merchant = signing_merchant(start_merchant, sqlite_url, tmp_path, tenants=dict(TWO_TENANTS))
    root = merchant.base_url + tenant_root("acme")

    async with httpx.AsyncClient(timeout=HANG_S) as http:
        cards = await fetch_cards(http, root)
        jwks = await fetch_jwks(http, merchant.base_url)
        ours = {name: await verify(http, merchant.base_url, card) for name, card in cards.items()}

    assert cards["0.3"]["url"] == root + JSONRPC_PATH
    assert sdk_v1_verdicts(cards, jwks) == {"1.0": "verified", "0.3": "verified", "none": "verified"}
    assert await sdk_v0_3_verdicts(compat_python, cards, jwks) == {
        "1.0": "unparseable",
        "0.3": "verified",
        "none": "verified",
    }
    for name, result in ours.items():
        assert result.verified, (name, result.reason)
        assert result.checks and all(check.verified for check in result.checks), name

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import rfc8785
from a2a.types import AgentCard
from google.protobuf.json_format import ParseDict

from a2a_x402.agentcard import (
    JWKS_PATH,
    CardStatus,
    CardTooLargeError,
    CardUnsignedError,
    CardVerificationError,
    CardVerifier,
    DuplicateKeyError,
    JwksCache,
    KeyStore,
    SignaturePolicy,
    SigningKey,
    VerificationResult,
    canonicalize_card,
    generate_signing_key,
    jwks_url,
    parse_card_json,
    parse_jwks,
    sign_card,
)
from a2a_x402.agentcard._jws import sign_payload
from tests.agentcard.conftest import KeyServer, merchant_card

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def header_entry(header: dict[str, Any], signature: str) -> dict[str, str]:
    return {"protected": b64(json.dumps(header).encode()), "signature": signature}


def codes(result: VerificationResult) -> list[str | None]:
    return [check.code for check in result.checks]


@pytest.fixture
def key() -> SigningKey:
    return generate_signing_key("ES256")


@pytest.fixture
def verifier(http_client: httpx.AsyncClient) -> CardVerifier:
    """Fetches jku over plain HTTP from 127.0.0.1 (development flag), clock fixed at NOW."""
    return CardVerifier(jwks=JwksCache(http_client, allow_insecure_localhost=True), clock=lambda: NOW)


@pytest.fixture
def published(key_server: KeyServer, key: SigningKey) -> KeyServer:
    """The key server publishing ``key``; cards signed with jku on it are bound to its origin."""
    key_server.jwks = {"keys": [key.public_jwk()]}
    return key_server


def signed_card(server: KeyServer, *keys: SigningKey) -> dict[str, Any]:
    """The sample card with its interfaces on ``server``'s origin, signed with jku there."""
    return sign_card(merchant_card(server.base_url), list(keys), jku=server.jwks_url)


async def test_signed_card_verifies_with_a_key_from_jku(
    published: KeyServer, verifier: CardVerifier, key: SigningKey
) -> None:
    result = await verifier.verify(signed_card(published, key), card_url=published.card_url)
    assert result.status is CardStatus.VERIFIED and result.verified
    assert result.kid == key.kid and result.code is None
    assert [(c.index, c.kid, c.alg, c.jku, c.code) for c in result.checks] == [
        (0, key.kid, "ES256", published.jwks_url, None)
    ]


async def test_served_bytes_verify_after_parse(
    published: KeyServer, verifier: CardVerifier, key: SigningKey
) -> None:
    body = json.dumps(signed_card(published, key), ensure_ascii=False, indent=2).encode()
    assert (await verifier.verify(parse_card_json(body), card_url=published.card_url)).verified


async def test_protobuf_card_verifies(published: KeyServer, verifier: CardVerifier, key: SigningKey) -> None:
    proto = ParseDict(signed_card(published, key), AgentCard())
    assert (await verifier.verify(proto, card_url=published.card_url)).verified


async def test_merchant_to_payer_over_https(
    tmp_path: Path, tls_key_server: KeyServer, tls_client: httpx.AsyncClient
) -> None:
    # The merchant side: a key directory, its JWKS and a card signed with jku on its own origin.
    store = KeyStore(tmp_path / "keys")
    store.generate("ES256")
    store.rotate()
    tls_key_server.jwks = store.public_jwks()
    tls_key_server.card = sign_card(
        merchant_card(tls_key_server.base_url), store.signing_keys(), jku=jwks_url(tls_key_server.base_url)
    )
    # The payer side: fetch the card bytes, parse them safely, verify with the card's own URL.
    verifier = CardVerifier(jwks=JwksCache(tls_client), policy=SignaturePolicy.REQUIRE)
    card_url = tls_key_server.url("/.well-known/agent-card.json")
    for _ in range(2):
        body = (await tls_client.get(card_url)).content
        result = await verifier.verify(parse_card_json(body), card_url=card_url)
        assert result.verified and codes(result) == [None, None]
    assert tls_key_server.hits[JWKS_PATH] == 1


async def test_key_rotation_overlap_and_retirement(
    tmp_path: Path, key_server: KeyServer, http_client: httpx.AsyncClient
) -> None:
    store = KeyStore(tmp_path / "keys")
    old = store.generate("ES256")
    key_server.jwks = store.public_jwks()
    before_rotation = signed_card(key_server, *store.signing_keys())
    stale_verifier = CardVerifier(jwks=JwksCache(http_client, allow_insecure_localhost=True))
    # Caches the one-key JWKS.
    assert (await stale_verifier.verify(before_rotation, card_url=key_server.card_url)).verified

    new = store.rotate()
    key_server.jwks = store.public_jwks()
    during_rotation = signed_card(key_server, *store.signing_keys())
    # A verifier holding the old JWKS still accepts the card through the old key's signature.
    stale = await stale_verifier.verify(during_rotation, card_url=key_server.card_url)
    assert stale.verified and stale.kid == old.kid
    assert codes(stale) == ["signature_key_not_found", None]
    fresh = await CardVerifier(jwks=JwksCache(http_client, allow_insecure_localhost=True)).verify(
        during_rotation, card_url=key_server.card_url
    )
    assert fresh.kid == new.kid and codes(fresh) == [None, None]

    store.retire(old.kid)
    key_server.jwks = store.public_jwks()
    after = await CardVerifier(jwks=JwksCache(http_client, allow_insecure_localhost=True)).verify(
        before_rotation, card_url=key_server.card_url
    )
    assert after.status is CardStatus.FAILED
    assert codes(after) == ["signature_key_not_found"]


async def test_tampered_card_field(published: KeyServer, verifier: CardVerifier, key: SigningKey) -> None:
    card = signed_card(published, key)
    card["skills"][0]["description"] = "Purchase items at twice the price"
    result = await verifier.verify(card, card_url=published.card_url)
    assert result.status is CardStatus.FAILED and result.code == "card_verification_failed"
    assert codes(result) == ["signature_mismatch"]
    assert "does not match the card" in result.reason


async def test_tampered_protected_header(
    published: KeyServer, verifier: CardVerifier, key: SigningKey
) -> None:
    card = signed_card(published, key)
    entry = card["signatures"][0]
    header = json.loads(base64.urlsafe_b64decode(entry["protected"] + "=="))
    entry["protected"] = b64(json.dumps({**header, "x-extra": "added after signing"}).encode())
    result = await verifier.verify(card, card_url=published.card_url)
    assert codes(result) == ["signature_mismatch"]


async def test_unknown_kid(published: KeyServer, verifier: CardVerifier, key: SigningKey) -> None:
    card = signed_card(published, generate_signing_key())  # signed with a key the JWKS does not hold
    result = await verifier.verify(card, card_url=published.card_url)
    assert codes(result) == ["signature_key_not_found"]
    assert "no key" in result.checks[0].reason


async def test_jku_that_is_not_https(
    key: SigningKey, http_client: httpx.AsyncClient, key_server: KeyServer
) -> None:
    card = sign_card(
        merchant_card("http://shop.example"), [key], jku="http://shop.example/.well-known/jwks.json"
    )
    verifier = CardVerifier(jwks=JwksCache(http_client, allow_insecure_localhost=True))
    result = await verifier.verify(card)
    assert codes(result) == ["jwks_url_not_allowed"] and "not HTTPS" in result.checks[0].reason
    # Loopback over plain HTTP needs the development flag.
    key_server.jwks = {"keys": [key.public_jwk()]}
    production = CardVerifier(jwks=JwksCache(http_client))
    result = await production.verify(signed_card(key_server, key), card_url=key_server.card_url)
    assert codes(result) == ["jwks_url_not_allowed"]
    assert key_server.hits[JWKS_PATH] == 0


@pytest.mark.parametrize(
    ("path", "code"),
    [("/garbage", "jwks_invalid"), ("/slow", "jwks_timeout"), ("/failing", "jwks_fetch_failed")],
)
async def test_jku_that_answers_garbage_or_times_out(
    key_server: KeyServer, http_client: httpx.AsyncClient, key: SigningKey, path: str, code: str
) -> None:
    card = sign_card(merchant_card(key_server.base_url), [key], jku=key_server.url(path))
    verifier = CardVerifier(jwks=JwksCache(http_client, timeout_s=0.3, allow_insecure_localhost=True))
    result = await verifier.verify(card, card_url=key_server.card_url)
    assert result.status is CardStatus.FAILED and codes(result) == [code]


async def test_jku_on_another_origin_than_the_card(
    published: KeyServer, http_client: httpx.AsyncClient, key: SigningKey
) -> None:
    # An attacker's card: interfaces claim shop.example, the key comes from the attacker's JWKS.
    card = sign_card(merchant_card(), [key], jku=published.jwks_url)
    verifier = CardVerifier(jwks=JwksCache(http_client, allow_insecure_localhost=True))
    result = await verifier.verify(card)
    assert codes(result) == ["jwks_url_not_allowed"] and "not on the origin" in result.checks[0].reason
    assert published.hits[JWKS_PATH] == 0
    # Fetched from the key server's own origin, the same card is bound through card_url.
    bound = await verifier.verify(card, card_url=published.url("/.well-known/agent-card.json"))
    assert bound.verified


async def test_jku_on_an_interface_origin_the_card_itself_adds(
    key_server: KeyServer, http_client: httpx.AsyncClient
) -> None:
    # The attack: a card fetched from shop.example, signed with the attacker's key, listing an extra
    # interface on the attacker's origin and a jku there. The signature covers that interface, but the
    # attacker made the signature, so the interface proves nothing about who owns the key.
    attacker = generate_signing_key()
    key_server.jwks = {"keys": [attacker.public_jwk()]}
    card = merchant_card()
    card["supportedInterfaces"].append(
        {"url": key_server.url("/a2a/jsonrpc"), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    )
    forged = sign_card(card, [attacker], jku=key_server.jwks_url)
    verifier = CardVerifier(
        jwks=JwksCache(http_client, allow_insecure_localhost=True), policy=SignaturePolicy.REQUIRE
    )
    with pytest.raises(CardVerificationError) as refused:
        await verifier.verify(forged, card_url="https://shop.example/.well-known/agent-card.json")
    assert codes(refused.value.result) == ["jwks_url_not_allowed"]
    assert "not on the origin the card was fetched from" in refused.value.result.checks[0].reason
    assert key_server.hits[JWKS_PATH] == 0


async def test_configured_jku_origins(
    published: KeyServer, http_client: httpx.AsyncClient, key: SigningKey
) -> None:
    # A merchant whose keys live on a separate key host the payer was told to trust.
    card = sign_card(merchant_card(), [key], jku=published.jwks_url)
    card_url = "https://shop.example/.well-known/agent-card.json"
    jwks = JwksCache(http_client, allow_insecure_localhost=True)
    assert codes(await CardVerifier(jwks=jwks).verify(card, card_url=card_url)) == ["jwks_url_not_allowed"]
    trusting = CardVerifier(jwks=jwks, jku_origins=[published.base_url + "/any/path"])
    assert (await trusting.verify(card, card_url=card_url)).verified
    assert (await trusting.verify(card)).verified
    with pytest.raises(ValueError, match="keys.example"):
        CardVerifier(jku_origins=["keys.example"])


async def test_alg_none(published: KeyServer, verifier: CardVerifier, key: SigningKey) -> None:
    card = merchant_card(published.base_url)
    card["signatures"] = [
        header_entry({"alg": "none", "typ": "JOSE", "kid": key.kid, "jku": published.jwks_url}, "")
    ]
    result = await verifier.verify(card, card_url=published.card_url)
    assert codes(result) == ["signature_alg_not_allowed"] and "'none'" in result.checks[0].reason


async def test_hs256_with_the_public_key_as_secret(
    published: KeyServer, verifier: CardVerifier, key: SigningKey
) -> None:
    card = merchant_card(published.base_url)
    protected = b64(
        json.dumps({"alg": "HS256", "typ": "JOSE", "kid": key.kid, "jku": published.jwks_url}).encode()
    )
    signing_input = f"{protected}.{b64(canonicalize_card(card))}".encode()
    for secret in (key.key.as_pem(private=False), json.dumps(key.public_jwk()).encode()):
        forged = b64(hmac.new(secret, signing_input, hashlib.sha256).digest())
        card["signatures"] = [{"protected": protected, "signature": forged}]
        result = await verifier.verify(card, card_url=published.card_url)
        assert codes(result) == ["signature_alg_not_allowed"] and "'HS256'" in result.checks[0].reason
    assert published.hits[JWKS_PATH] == 0


def test_hmac_can_never_be_configured() -> None:
    with pytest.raises(ValueError, match="HS256"):
        CardVerifier(algorithms=["ES256", "HS256"])
    with pytest.raises(ValueError, match="none"):
        CardVerifier(algorithms=["none"])


async def test_signature_over_the_card_with_signatures_included(
    published: KeyServer, verifier: CardVerifier, key: SigningKey
) -> None:
    card = merchant_card(published.base_url)
    with_signatures = {**json.loads(canonicalize_card(card)), "signatures": []}
    entry = sign_payload(rfc8785.dumps(with_signatures), key, jku=published.jwks_url)
    result = await verifier.verify({**card, "signatures": [entry]}, card_url=published.card_url)
    assert codes(result) == ["signature_mismatch"]


def test_duplicate_members_in_the_card_json() -> None:
    body = (
        json.dumps(merchant_card())
        .encode()
        .replace(b'"name": "Merchant Agent"', b'"name": "Merchant Agent", "name": "Evil"')
    )
    with pytest.raises(DuplicateKeyError, match="'name'"):
        parse_card_json(body)


def test_ten_megabyte_card_is_refused_before_parsing() -> None:
    card = merchant_card()
    card["description"] = "x" * (10 * 1024 * 1024)
    with pytest.raises(CardTooLargeError):
        parse_card_json(json.dumps(card).encode())


@pytest.mark.parametrize(
    ("member", "value", "code"),
    [
        ("exp", NOW - timedelta(seconds=1), "signature_key_expired"),
        ("exp", NOW, "signature_key_expired"),
        ("nbf", NOW + timedelta(hours=1), "signature_key_not_yet_valid"),
        ("exp", NOW + timedelta(days=1), None),
        ("nbf", NOW - timedelta(days=1), None),
    ],
)
async def test_key_validity_window(
    key_server: KeyServer,
    verifier: CardVerifier,
    key: SigningKey,
    member: str,
    value: datetime,
    code: str | None,
) -> None:
    key_server.jwks = {"keys": [{**key.public_jwk(), member: int(value.timestamp())}]}
    assert codes(await verifier.verify(signed_card(key_server, key), card_url=key_server.card_url)) == [code]


@pytest.mark.parametrize("revoke", ["kid", "thumbprint"])
async def test_revoked_key(
    published: KeyServer, http_client: httpx.AsyncClient, key: SigningKey, revoke: str
) -> None:
    revoked = key.kid if revoke == "kid" else key.key.thumbprint()
    verifier = CardVerifier(jwks=JwksCache(http_client, allow_insecure_localhost=True), revoked={revoked})
    result = await verifier.verify(signed_card(published, key), card_url=published.card_url)
    assert codes(result) == ["signature_key_revoked"]


async def test_revoked_thumbprint_catches_a_republished_kid(key: SigningKey) -> None:
    renamed = {**key.public_jwk(), "kid": "innocent-looking"}
    card = sign_card(merchant_card(), [SigningKey(kid="innocent-looking", alg="ES256", key=key.key)])
    verifier = CardVerifier(
        trusted_keys=parse_jwks({"keys": [renamed]}).values(), revoked={key.key.thumbprint()}
    )
    assert codes(await verifier.verify(card)) == ["signature_key_revoked"]


async def test_key_of_another_type_under_the_same_kid(
    key_server: KeyServer, verifier: CardVerifier, key: SigningKey
) -> None:
    other = generate_signing_key("EdDSA").public_jwk()
    key_server.jwks = {"keys": [{**other, "kid": key.kid, "alg": "EdDSA"}]}
    result = await verifier.verify(signed_card(key_server, key), card_url=key_server.card_url)
    assert codes(result) == ["signature_key_mismatch"]


async def test_trusted_keys_need_no_fetch_and_take_precedence(
    key: SigningKey, http_client: httpx.AsyncClient
) -> None:
    card = sign_card(merchant_card(), [key], jku="https://shop.example/.well-known/jwks.json")
    verifier = CardVerifier(
        jwks=JwksCache(http_client, timeout_s=0.1),
        trusted_keys=parse_jwks({"keys": [key.public_jwk()]}).values(),
    )
    assert (await verifier.verify(card)).verified  # shop.example is never contacted


async def test_without_a_key_source(key: SigningKey) -> None:
    with_jku = sign_card(merchant_card(), [key], jku="https://shop.example/.well-known/jwks.json")
    result = await CardVerifier().verify(with_jku)
    assert codes(result) == ["signature_key_not_found"] and "not configured" in result.checks[0].reason
    without_jku = sign_card(merchant_card(), [key])
    result = await CardVerifier().verify(without_jku)
    assert codes(result) == ["signature_key_not_found"] and "names no jku" in result.checks[0].reason


async def test_one_good_signature_among_bad_ones(
    published: KeyServer, verifier: CardVerifier, key: SigningKey
) -> None:
    card = signed_card(published, generate_signing_key(), key)
    card["signatures"].insert(0, {"protected": "!!", "signature": "x"})
    result = await verifier.verify(card, card_url=published.card_url)
    assert result.verified and result.kid == key.kid
    assert codes(result) == ["signature_malformed", "signature_key_not_found", None]


@pytest.mark.parametrize(
    ("signatures", "status", "code"),
    [
        (None, CardStatus.UNSIGNED, "card_unsigned"),
        ([], CardStatus.UNSIGNED, "card_unsigned"),
        ("abc", CardStatus.FAILED, "signature_malformed"),
        ({"protected": "x"}, CardStatus.FAILED, "signature_malformed"),
        ([{"protected": "x", "signature": "y"}] * 9, CardStatus.FAILED, "signature_malformed"),
    ],
    ids=["absent", "empty", "string", "object", "too-many"],
)
async def test_signatures_member_itself(
    verifier: CardVerifier, signatures: Any, status: CardStatus, code: str
) -> None:
    card = merchant_card()
    if signatures is not None:
        card["signatures"] = signatures
    result = await verifier.verify(card)
    assert (result.status, result.code, result.checks) == (status, code, ())


async def test_card_without_canonical_form(
    published: KeyServer, verifier: CardVerifier, key: SigningKey
) -> None:
    card = signed_card(published, key)
    card["capabilities"]["streaming"] = "yes"
    result = await verifier.verify(card, card_url=published.card_url)
    assert result.status is CardStatus.FAILED and result.code == "card_not_canonicalizable"
    assert "capabilities.streaming" in result.reason


async def test_policy_require_raises_with_the_result(
    published: KeyServer, http_client: httpx.AsyncClient, key: SigningKey
) -> None:
    verifier = CardVerifier(
        jwks=JwksCache(http_client, allow_insecure_localhost=True), policy=SignaturePolicy.REQUIRE
    )
    with pytest.raises(CardUnsignedError) as unsigned:
        await verifier.verify(merchant_card())
    assert unsigned.value.code == "card_unsigned" and unsigned.value.result.status is CardStatus.UNSIGNED
    tampered = signed_card(published, key)
    tampered["name"] = "Someone Else"
    with pytest.raises(CardVerificationError) as failed:
        await verifier.verify(tampered, card_url=published.card_url)
    assert failed.value.code == "card_verification_failed"
    assert codes(failed.value.result) == ["signature_mismatch"]
    assert "signature_mismatch" in str(failed.value)
    assert (await verifier.verify(signed_card(published, key), card_url=published.card_url)).verified


async def test_policy_warn_logs_the_reason_and_continues(
    verifier: CardVerifier, caplog: pytest.LogCaptureFixture
) -> None:
    assert verifier.policy is SignaturePolicy.WARN  # the default
    with caplog.at_level(logging.WARNING, logger="a2a_x402.agentcard._verify"):
        result = await verifier.verify(
            merchant_card(), card_url="https://shop.example/.well-known/agent-card.json"
        )
    assert result.status is CardStatus.UNSIGNED
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert "code=card_unsigned" in record.getMessage() and "https://shop.example" in record.getMessage()


async def test_policy_off_checks_nothing(key_server: KeyServer, http_client: httpx.AsyncClient) -> None:
    verifier = CardVerifier(
        jwks=JwksCache(http_client, allow_insecure_localhost=True), policy=SignaturePolicy.OFF
    )
    garbage = {"signatures": [{"protected": "x", "signature": "y"}], "name": 5}
    for card in (garbage, merchant_card()):
        result = await verifier.verify(card)
        assert (result.status, result.code, result.checks) == (CardStatus.SKIPPED, None, ())
    assert sum(key_server.hits.values()) == 0

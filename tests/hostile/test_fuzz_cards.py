"""Agent Cards and their signatures from a hostile counterpart: parse, canonicalize, verify, load keys.

`tests/agentcard` checks canonicalization of generated valid cards. These properties feed each entry point
the payer runs on bytes it fetched: `parse_card_json` on arbitrary bytes and broken JSON texts,
`canonicalize_card` on arbitrary objects, `CardVerifier.verify` on cards carrying arbitrary `signatures`
(random objects, well-formed JWS headers with random members, and real signatures with one character
changed), and `VerificationKey.from_jwk` / `parse_jwks` on arbitrary JWKs. Each must answer with a value
or its documented error, and a changed signature must never verify.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from a2a_x402.agentcard import (
    CanonicalizationError,
    CardParseError,
    CardStatus,
    CardUnsignedError,
    CardVerificationError,
    CardVerifier,
    JwksCache,
    KeyLoadError,
    SignaturePolicy,
    VerificationKey,
    canonicalize_card,
    generate_signing_key,
    parse_card_json,
    parse_jwks,
    sign_card,
)
from tests.agentcard.conftest import MERCHANT_CARD

from .strategies import json_values, mutated, printable_text

_FUZZ = settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
_SIGNER = generate_signing_key("ES256")
_TRUSTED = VerificationKey.from_jwk(_SIGNER.public_jwk())
# Port 1 on loopback refuses connections: a jku there makes the verifier really try, and fail, to fetch.
_REFUSING_ORIGIN = "http://127.0.0.1:1"


def _card() -> dict[str, Any]:
    card = copy.deepcopy(MERCHANT_CARD)
    card["supportedInterfaces"].append(
        {"url": f"{_REFUSING_ORIGIN}/a2a/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}
    )
    return card


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


# -- parse_card_json ----------------------------------------------------------------------------------

_json_texts = st.one_of(
    st.binary(max_size=200),
    json_values.map(lambda value: json.dumps(value).encode()),
    mutated([_card]).map(lambda card: json.dumps(card, ensure_ascii=False).encode("utf-8", "surrogatepass")),
    st.sampled_from(
        [
            b'{"a": 1, "a": 2}',
            b'{"a": NaN}',
            b'{"a": 1e400}',
            b'{"a": -Infinity}',
            b'{"a": ' + b"9" * 5000 + b"}",
            b"[" * 200 + b"]" * 200,
            b'{"a": "' + b"[" * 500 + b'"}',
            b'{"a": "\\ud800"}',
            b"\xef\xbb\xbf{}",
            b'{"a": 1}\n\x00',
        ]
    ),
)


@_FUZZ
@given(_json_texts)
def test_card_bytes_parse_to_an_object_or_raise_card_parse_error(data: bytes) -> None:
    try:
        card = parse_card_json(data)
    except CardParseError:
        return
    assert isinstance(card, dict)


# -- canonicalize_card --------------------------------------------------------------------------------


@_FUZZ
@given(mutated([_card], rounds=3) | st.dictionaries(printable_text, json_values, max_size=4))
def test_any_object_canonicalizes_or_raises_canonicalization_error(card: Any) -> None:
    if not isinstance(card, dict):
        return
    try:
        canonical = canonicalize_card(card)
    except CanonicalizationError:
        return
    # The canonical bytes are themselves a card with the same canonical form (signatures cover them).
    assert canonicalize_card(parse_card_json(canonical)) == canonical


# -- CardVerifier.verify ------------------------------------------------------------------------------

_JKUS = [
    f"{_REFUSING_ORIGIN}/.well-known/jwks.json",
    "https://shop.example/.well-known/jwks.json",
    "https://elsewhere.example/jwks",
    "http://[::1",
    "https://user:pw@shop.example/jwks",
    "",
]


def _mostly(good: st.SearchStrategy[Any], bad: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """`good` about four times in five, so that an example breaks few things and the later checks run.

    (Hypothesis draws both ends of an integer range often, and `st.one_of` counts a repeated branch once.)
    """
    return st.sampled_from([True, True, True, True, False]).flatmap(lambda ok: good if ok else bad)


@st.composite
def _headers(draw: st.DrawFn) -> dict[str, Any]:
    header: dict[str, Any] = {
        "alg": draw(
            _mostly(st.just("ES256"), st.sampled_from(["EdDSA", "RS256", "none", "HS256"]) | json_values)
        ),
        # Another kid than the trusted key's sends the verifier to the jku.
        "kid": draw(_mostly(st.sampled_from([_SIGNER.kid, "other-key"]), printable_text | json_values)),
        "typ": draw(_mostly(st.sampled_from(["JOSE", "application/jose"]), json_values)),
    }
    if draw(_mostly(st.just(True), st.just(False))):
        header["jku"] = draw(_mostly(st.sampled_from(_JKUS), json_values))
    if not draw(_mostly(st.just(True), st.just(False))):
        header[draw(st.sampled_from(["crit", "b64", "x5u", "alg", "kid"]))] = draw(json_values)
    return header


_b64url_text = st.binary(min_size=1, max_size=80).map(_b64url)
_signature_entries = _mostly(
    st.fixed_dictionaries(
        {
            "protected": _mostly(_headers().map(lambda h: _b64url(json.dumps(h).encode())), printable_text),
            "signature": _mostly(_b64url_text, printable_text),
        },
        optional={"header": json_values | st.dictionaries(printable_text, json_values, max_size=2)},
    ),
    json_values,
)


@pytest.fixture
async def refusing_jwks_client() -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client for a JwksCache; every jku the tests name refuses or is refused before any fetch."""
    async with httpx.AsyncClient(timeout=2.0) as client:
        yield client


@_FUZZ
@given(
    st.lists(_signature_entries, max_size=3) | json_values,
    st.sampled_from(list(SignaturePolicy)),
    st.none() | st.sampled_from([f"{_REFUSING_ORIGIN}/.well-known/agent-card.json", "not a url"]),
)
async def test_any_signatures_give_a_result_or_the_policy_error(
    refusing_jwks_client: httpx.AsyncClient,
    signatures: Any,
    policy: SignaturePolicy,
    card_url: str | None,
) -> None:
    verifier = CardVerifier(
        jwks=JwksCache(refusing_jwks_client, allow_insecure_localhost=True, timeout_s=2.0),
        trusted_keys=[_TRUSTED],
        policy=policy,
    )
    card = {**_card(), "signatures": signatures}
    try:
        result = await verifier.verify(card, card_url=card_url)
    except (CardUnsignedError, CardVerificationError) as exc:
        assert policy is SignaturePolicy.REQUIRE
        assert exc.code in {"card_unsigned", "card_verification_failed"}
        return
    # Nothing random verifies (only a signature made by the trusted key could), so `require` always raised.
    assert policy is not SignaturePolicy.REQUIRE
    assert result.status is not CardStatus.VERIFIED
    for check in result.checks:
        assert check.code is not None and check.code.startswith(("signature_", "jwks_", "card_"))


_SIGNED = sign_card(_card(), [_SIGNER], jku=f"{_REFUSING_ORIGIN}/.well-known/jwks.json")
_B64URL_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


@_FUZZ
@given(st.sampled_from(["protected", "signature"]), st.data())
async def test_a_signature_with_one_character_changed_never_verifies(
    member: str, data: st.DataObject
) -> None:
    verifier = CardVerifier(trusted_keys=[_TRUSTED], policy=SignaturePolicy.WARN)
    assert (await verifier.verify(_SIGNED)).verified
    card = copy.deepcopy(_SIGNED)
    text: str = card["signatures"][0][member]
    index = data.draw(st.integers(0, len(text) - 1))
    replacement = data.draw(st.sampled_from(_B64URL_ALPHABET + "=+/.~\n ").filter(lambda c: c != text[index]))
    card["signatures"][0][member] = text[:index] + replacement + text[index + 1 :]

    result = await verifier.verify(card)

    assert result.status is CardStatus.FAILED
    assert result.checks[0].code is not None


@_FUZZ
@given(mutated([_card], rounds=1))
async def test_a_changed_card_never_verifies_with_the_original_signature(card: Any) -> None:
    verifier = CardVerifier(trusted_keys=[_TRUSTED], policy=SignaturePolicy.WARN)
    if not isinstance(card, dict):
        return
    try:
        same = canonicalize_card(card) == canonicalize_card(_card())
    except CanonicalizationError:
        same = False
    result = await verifier.verify({**card, "signatures": _SIGNED["signatures"]})
    assert result.verified is same


# -- JWKs ---------------------------------------------------------------------------------------------

_jwks = mutated(
    [
        _SIGNER.public_jwk,
        generate_signing_key("EdDSA").public_jwk,
        lambda: {"keys": [_SIGNER.public_jwk()]},
        lambda: {**_SIGNER.public_jwk(), "exp": 2_000_000_000, "nbf": 0, "key_ops": ["verify"]},
    ],
    st.one_of(json_values, st.sampled_from(["EC", "OKP", "RSA", "oct", "P-256", "Ed25519", "sig", 2**64])),
)


@_FUZZ
@given(_jwks)
def test_any_jwk_loads_or_raises_key_load_error(document: Any) -> None:
    if not isinstance(document, dict):
        return
    for load in (VerificationKey.from_jwk, parse_jwks):
        try:
            load(document)
        except KeyLoadError:
            pass

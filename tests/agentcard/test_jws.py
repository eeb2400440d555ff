from __future__ import annotations

import base64
import json
from typing import Any

import jwt
import pytest
from joserfc.errors import SecurityWarning
from joserfc.jwk import ECKey, OKPKey, RSAKey
from joserfc.jws import JWSRegistry

from a2a_x402.agentcard import (
    VERIFICATION_ALGORITHMS,
    AlgorithmNotAllowedError,
    CanonicalizationError,
    KeyMismatchError,
    SignatureMalformedError,
    SignatureMismatchError,
    SigningError,
    SigningKey,
    VerificationKey,
    canonicalize_card,
    generate_signing_key,
    sign_card,
)
from a2a_x402.agentcard._jws import decode_signature, sign_payload, verify_signature
from tests.agentcard.conftest import load_vector, merchant_card

JKU = "https://shop.example/.well-known/jwks.json"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def header_of(signature: dict[str, Any]) -> dict[str, Any]:
    decoded: dict[str, Any] = json.loads(unb64(signature["protected"]))
    return decoded


def public(key: SigningKey) -> VerificationKey:
    return VerificationKey.from_jwk(key.public_jwk())


def test_the_spec_examples_protected_header_byte_for_byte() -> None:
    vector = load_vector("spec_example.json")
    spec = vector["spec_signature"]
    key = SigningKey(kid="key-1", alg="ES256", key=generate_signing_key("ES256").key)
    [ours] = sign_card(vector["input"], [key], jku=vector["spec_header"]["jku"])["signatures"]
    # Same members in the same order, compact: the header we write is the spec's, byte for byte.
    assert ours["protected"] == spec["protected"]
    assert json.loads(unb64(spec["protected"])) == vector["spec_header"]
    header, protected, signature = decode_signature(spec, VERIFICATION_ALGORITHMS)
    assert (header.alg, header.typ, header.kid) == ("ES256", "JOSE", "key-1")
    assert header.jku == vector["spec_header"]["jku"]
    assert protected == spec["protected"] and len(unb64(signature)) == 64  # ES256 r||s


def test_sign_card_adds_one_detached_signature_per_key() -> None:
    es, ed = generate_signing_key("ES256"), generate_signing_key("EdDSA")
    card = merchant_card()
    signed = sign_card(card, [es, ed], jku=JKU)
    assert card == merchant_card()  # not modified
    assert {k: v for k, v in signed.items() if k != "signatures"} == card
    assert [set(s) for s in signed["signatures"]] == [{"protected", "signature"}] * 2
    assert [header_of(s) for s in signed["signatures"]] == [
        {"alg": "ES256", "typ": "JOSE", "kid": es.kid, "jku": JKU},
        {"alg": "EdDSA", "typ": "JOSE", "kid": ed.kid, "jku": JKU},
    ]
    for entry in signed["signatures"]:
        assert "=" not in entry["protected"] + entry["signature"]
    assert len(unb64(signed["signatures"][0]["signature"])) == 64  # ES256 is r || s, not DER


@pytest.mark.parametrize("alg", ["ES256", "EdDSA"])
def test_signature_covers_the_canonical_bytes_per_pyjwt(alg: str) -> None:
    # PyJWT is an independent JWS implementation: it checks header.payload.signature with the payload
    # being exactly the canonical card.
    key = generate_signing_key(alg)
    entry = sign_card(merchant_card(), [key], jku=JKU)["signatures"][0]
    compact = f"{entry['protected']}.{b64(canonicalize_card(merchant_card()))}.{entry['signature']}"
    decoded = jwt.api_jws.decode_complete(compact, key.key.as_pem(private=False), algorithms=[alg])
    assert decoded["payload"] == canonicalize_card(merchant_card())
    assert decoded["header"]["kid"] == key.kid


def test_existing_signatures_are_replaced_not_signed() -> None:
    key = generate_signing_key()
    once = sign_card(merchant_card(), [key])
    twice = sign_card(once, [key])
    assert len(twice["signatures"]) == 1
    verify_signature(canonicalize_card(twice), *_parts(twice["signatures"][0]), public(key))


def test_without_jku_the_header_has_none() -> None:
    entry = sign_card(merchant_card(), [generate_signing_key()])["signatures"][0]
    assert set(header_of(entry)) == {"alg", "typ", "kid"}


def test_sign_card_needs_a_key_and_a_canonical_card() -> None:
    with pytest.raises(SigningError, match="no signing key"):
        sign_card(merchant_card(), [])
    with pytest.raises(CanonicalizationError):
        sign_card({**merchant_card(), "name": 5}, [generate_signing_key()])


def test_eddsa_vector_byte_for_byte() -> None:
    vector = load_vector("signed_eddsa.json")
    jwk = vector["private_jwk"]
    key = SigningKey(
        kid=jwk["kid"], alg=jwk["alg"], key=OKPKey.import_key({k: jwk[k] for k in ("kty", "crv", "d", "x")})
    )
    assert canonicalize_card(vector["card"]) == vector["canonical"].encode()
    assert sign_card(vector["card"], [key], jku=vector["jku"]) == vector["signed"]


def test_eddsa_primitive_matches_rfc8037_appendix_a4() -> None:
    vector = load_vector("signed_eddsa.json")["private_jwk"]
    key = OKPKey.import_key({k: vector[k] for k in ("kty", "crv", "d", "x")})
    protected, payload = b64(b'{"alg":"EdDSA"}'), b64(b"Example of Ed25519 signing")
    signing_input = f"{protected}.{payload}".encode()
    assert b64(JWSRegistry.algorithms["EdDSA"].sign(signing_input, key)) == (
        "hgyY0il_MGCjP0JzlnLWG1PPOt7-09PGcvMg3AIbQR6dWbhijcNR4ki4iylGjg5BhVsPt9g7sVvpAr_MuM0KAg"
    )


def _parts(entry: dict[str, Any]) -> tuple[str, str, str]:
    header, protected, signature = decode_signature(entry, VERIFICATION_ALGORITHMS)
    return protected, signature, header.alg


@pytest.mark.parametrize(
    ("alg", "make_key"),
    [
        ("ES384", lambda: ECKey.generate_key("P-384")),
        ("RS256", lambda: RSAKey.generate_key(2048)),
        ("PS256", lambda: RSAKey.generate_key(2048)),
        ("Ed25519", lambda: OKPKey.generate_key("Ed25519")),
    ],
)
def test_other_asymmetric_algorithms_verify(alg: str, make_key: Any) -> None:
    # We only sign with ES256/EdDSA, but a counterpart may use any of these.
    private = make_key()
    payload = canonicalize_card(merchant_card())
    protected = b64(json.dumps({"alg": alg, "typ": "JOSE", "kid": "k"}).encode())
    signature = b64(JWSRegistry.algorithms[alg].sign(f"{protected}.{b64(payload)}".encode(), private))
    key = VerificationKey.from_jwk({**private.as_dict(private=False), "kid": "k"})
    verify_signature(payload, protected, signature, alg, key)
    with pytest.raises(SignatureMismatchError):
        verify_signature(payload + b" ", protected, signature, alg, key)


def _entry(protected: dict[str, Any], signature: str = "AAAA", **extra: Any) -> dict[str, Any]:
    return {"protected": b64(json.dumps(protected).encode()), "signature": signature, **extra}


GOOD_HEADER = {"alg": "ES256", "typ": "JOSE", "kid": "k"}


@pytest.mark.parametrize(
    ("entry", "error", "message"),
    [
        ("text", SignatureMalformedError, "must be a JSON object"),
        ({"protected": 1, "signature": "AAAA"}, SignatureMalformedError, "must both be strings"),
        ({"protected": "e30=", "signature": "AAAA"}, SignatureMalformedError, "not a base64url JSON object"),
        ({"protected": "e30+", "signature": "AAAA"}, SignatureMalformedError, "not a base64url"),
        (
            {"protected": b64(b"[1]"), "signature": "AAAA"},
            SignatureMalformedError,
            "not a base64url JSON object",
        ),
        (
            {"protected": b64(b'{"alg":"ES256","alg":"none","typ":"JOSE","kid":"k"}'), "signature": "AAAA"},
            SignatureMalformedError,
            "duplicate member 'alg'",
        ),
        (_entry({"typ": "JOSE", "kid": "k"}), SignatureMalformedError, 'no string "alg"'),
        (_entry({**GOOD_HEADER, "alg": "none"}, ""), AlgorithmNotAllowedError, "'none' is not allowed"),
        (_entry({**GOOD_HEADER, "alg": "HS256"}), AlgorithmNotAllowedError, "'HS256' is not allowed"),
        (_entry({**GOOD_HEADER, "kid": ""}), SignatureMalformedError, '"kid"'),
        (_entry({"alg": "ES256", "kid": "k"}), SignatureMalformedError, '"typ" must be'),
        (_entry({**GOOD_HEADER, "typ": "JWT"}), SignatureMalformedError, '"typ" must be'),
        (_entry({**GOOD_HEADER, "jku": 5}), SignatureMalformedError, '"jku" must be a string'),
        (_entry({**GOOD_HEADER, "crit": ["exp"]}), SignatureMalformedError, "crit"),
        (_entry({**GOOD_HEADER, "b64": False, "crit": ["b64"]}), SignatureMalformedError, "crit"),
        (_entry({**GOOD_HEADER, "b64": False}), SignatureMalformedError, "unencoded payloads"),
        (_entry(GOOD_HEADER, header="x"), SignatureMalformedError, '"header" must be a JSON object'),
        (_entry(GOOD_HEADER, header={"kid": "other"}), SignatureMalformedError, "repeats protected member"),
        (_entry(GOOD_HEADER, ""), SignatureMalformedError, '"signature" is not unpadded base64url'),
        (_entry(GOOD_HEADER, "AAA="), SignatureMalformedError, '"signature" is not unpadded base64url'),
        (_entry(GOOD_HEADER, "A" * 3000), SignatureMalformedError, '"signature" is not unpadded base64url'),
    ],
    ids=[
        "not-object",
        "protected-number",
        "padded-protected",
        "std-alphabet",
        "header-array",
        "duplicate-alg",
        "no-alg",
        "alg-none",
        "hs256",
        "empty-kid",
        "no-typ",
        "typ-jwt",
        "jku-number",
        "crit",
        "b64-crit",
        "b64-false",
        "header-string",
        "header-overlap",
        "empty-signature",
        "padded-signature",
        "huge-signature",
    ],
)
def test_decode_signature_refuses(entry: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        decode_signature(entry, VERIFICATION_ALGORITHMS)


def test_decode_signature_accepts_jose_spellings_and_a_disjoint_unprotected_header() -> None:
    for typ in ("JOSE", "jose", "application/jose"):
        header, _, _ = decode_signature(_entry({**GOOD_HEADER, "typ": typ}, header={"note": "x"}), ["ES256"])
        assert (header.alg, header.kid, header.jku) == ("ES256", "k", None)


def test_allow_list_is_the_callers() -> None:
    with pytest.raises(AlgorithmNotAllowedError, match="'ES256' is not allowed; accepted: EdDSA"):
        decode_signature(_entry(GOOD_HEADER), ["EdDSA"])


def test_non_canonical_base64url_signature_is_a_mismatch() -> None:
    # "AB" and "AC" decode to the same byte; only the canonical spelling is accepted.
    key = generate_signing_key()
    payload = canonicalize_card(merchant_card())
    entry = sign_payload(payload, key, jku=None)
    signature = entry["signature"]
    assert len(signature) % 4 == 2  # 64 bytes -> 86 characters, the last carrying 4 unused bits
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    tweaked = signature[:-1] + alphabet[alphabet.index(signature[-1]) ^ 1]  # flips an unused bit
    assert unb64(tweaked) == unb64(signature)
    with pytest.raises(SignatureMismatchError):
        verify_signature(payload, entry["protected"], tweaked, "ES256", public(key))


def test_key_must_fit_the_header() -> None:
    es, ed = generate_signing_key("ES256"), generate_signing_key("EdDSA")
    payload = canonicalize_card(merchant_card())
    entry = sign_payload(payload, es, jku=None)
    with pytest.raises(KeyMismatchError, match="is for EdDSA, the signature says ES256"):
        verify_signature(payload, entry["protected"], entry["signature"], "ES256", public(ed))
    ed_without_alg = VerificationKey.from_jwk({k: v for k, v in ed.public_jwk().items() if k != "alg"})
    with pytest.raises(KeyMismatchError, match="ES256 needs a EC key, got OKP"):
        verify_signature(payload, entry["protected"], entry["signature"], "ES256", ed_without_alg)
    for member, value, message in [
        ("alg", "ES384", "is for ES384"),
        ("use", "enc", "has use 'enc'"),
        ("key_ops", ["sign"], "key_ops"),
    ]:
        key = VerificationKey.from_jwk({**es.public_jwk(), member: value})
        with pytest.raises(KeyMismatchError, match=message):
            verify_signature(payload, entry["protected"], entry["signature"], "ES256", key)
    p384 = VerificationKey.from_jwk({**ECKey.generate_key("P-384").as_dict(private=False), "kid": "p"})
    with pytest.raises(KeyMismatchError, match="needs curve P-256"):
        verify_signature(payload, entry["protected"], entry["signature"], "ES256", p384)
    with pytest.warns(SecurityWarning):  # joserfc's own warning, on generation and on import
        small_rsa = VerificationKey.from_jwk({**RSAKey.generate_key(1024).as_dict(private=False), "kid": "r"})
    with pytest.raises(KeyMismatchError, match="below 2048"):
        verify_signature(payload, entry["protected"], entry["signature"], "RS256", small_rsa)

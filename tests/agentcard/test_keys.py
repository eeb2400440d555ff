from __future__ import annotations

import json
import logging
import stat
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from joserfc.jwk import ECKey, OKPKey

from a2a_x402.agentcard import (
    DEFAULT_KEYS_ENV,
    KeyLoadError,
    KeyStatus,
    KeyStore,
    KeyStoreError,
    SigningKey,
    VerificationKey,
    generate_signing_key,
    load_signing_key,
    load_signing_keys_from_env,
    parse_jwks,
    sign_card,
)
from tests.agentcard.conftest import merchant_card

RFC8037_PRIVATE_JWK: dict[str, Any] = {
    "kty": "OKP",
    "crv": "Ed25519",
    "d": "nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A",
    "x": "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo",
}
RFC8037_THUMBPRINT = "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"  # RFC 8037 Appendix A.3


def _pem(
    key: ec.EllipticCurvePrivateKey | ed25519.Ed25519PrivateKey | rsa.RSAPrivateKey, *, sec1: bool = False
) -> bytes:
    private_format = (
        serialization.PrivateFormat.TraditionalOpenSSL if sec1 else serialization.PrivateFormat.PKCS8
    )
    return key.private_bytes(serialization.Encoding.PEM, private_format, serialization.NoEncryption())


@pytest.mark.parametrize(("alg", "kty", "crv"), [("ES256", "EC", "P-256"), ("EdDSA", "OKP", "Ed25519")])
def test_generated_key_publishes_only_its_public_half(alg: str, kty: str, crv: str) -> None:
    key = generate_signing_key(alg)
    public = key.public_jwk()
    assert key.alg == alg and key.kid == key.key.thumbprint()
    assert public["kty"] == kty and public["crv"] == crv
    assert public["kid"] == key.kid and public["alg"] == alg and public["use"] == "sig"
    assert "d" not in public
    assert key.private_jwk()["d"]


def test_kid_is_the_rfc7638_thumbprint() -> None:
    path_key = SigningKey(kid=RFC8037_THUMBPRINT, alg="EdDSA", key=OKPKey.import_key(RFC8037_PRIVATE_JWK))
    assert path_key.key.thumbprint() == RFC8037_THUMBPRINT


@pytest.mark.parametrize("alg", ["RS256", "HS256", "none", "ES384"])
def test_only_es256_and_eddsa_keys_are_generated(alg: str) -> None:
    with pytest.raises(KeyLoadError, match="cannot generate"):
        generate_signing_key(alg)


def test_signing_key_refuses_public_keys_and_mismatched_algorithms() -> None:
    private = ECKey.generate_key("P-256")
    with pytest.raises(KeyLoadError, match="public key"):
        SigningKey(kid="k", alg="ES256", key=ECKey.import_key(private.as_dict(private=False)))
    with pytest.raises(KeyLoadError, match="EdDSA needs a OKP key"):
        SigningKey(kid="k", alg="EdDSA", key=private)
    with pytest.raises(KeyLoadError, match="cannot sign with 'ES384'"):
        SigningKey(kid="k", alg="ES384", key=ECKey.generate_key("P-384"))
    with pytest.raises(KeyLoadError, match="kid"):
        SigningKey(kid="", alg="ES256", key=private)


@pytest.mark.parametrize(
    ("make", "alg"),
    [
        (lambda: _pem(ec.generate_private_key(ec.SECP256R1())), "ES256"),
        (lambda: _pem(ec.generate_private_key(ec.SECP256R1()), sec1=True), "ES256"),
        (lambda: _pem(ed25519.Ed25519PrivateKey.generate()), "EdDSA"),
    ],
    ids=["p256-pkcs8", "p256-sec1", "ed25519-pkcs8"],
)
def test_load_signing_key_from_pem(tmp_path: Path, make: object, alg: str) -> None:
    pem = make()  # type: ignore[operator]
    path = tmp_path / "key.pem"
    path.write_bytes(b"\n" + pem + b"\n")
    key = load_signing_key(path)
    assert key.alg == alg and key.kid == key.key.thumbprint()
    assert load_signing_key(str(path)).kid == key.kid


def test_load_signing_key_from_jwk_keeps_its_kid_and_alg(tmp_path: Path) -> None:
    path = tmp_path / "key.jwk"
    path.write_text(json.dumps({**RFC8037_PRIVATE_JWK, "kid": "merchant-2026", "alg": "EdDSA"}))
    key = load_signing_key(path)
    assert (key.kid, key.alg) == ("merchant-2026", "EdDSA")
    path.write_text(json.dumps(RFC8037_PRIVATE_JWK))
    assert load_signing_key(path).kid == RFC8037_THUMBPRINT


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (lambda: _pem(rsa.generate_private_key(public_exponent=65537, key_size=2048)), "only P-256"),
        (lambda: _pem(ec.generate_private_key(ec.SECP384R1())), "only P-256"),
        (
            lambda: ec.generate_private_key(ec.SECP256R1()).private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.BestAvailableEncryption(b"secret"),
            ),
            "not an unencrypted PEM",
        ),
        (lambda: _pem(ec.generate_private_key(ec.SECP256R1())) * 2, "holds 2 keys"),
        (lambda: b"-----BEGIN PRIVATE KEY-----\nAAAA\n", "no complete PEM block"),
        (lambda: b"not a key", "neither PEM nor a JWK"),
        (
            lambda: json.dumps({k: v for k, v in RFC8037_PRIVATE_JWK.items() if k != "d"}).encode(),
            "public key",
        ),
        (lambda: json.dumps({"kty": "oct", "k": "c2VjcmV0"}).encode(), "not supported"),
        (lambda: json.dumps({"keys": []}).encode(), "non-empty array"),
        (lambda: json.dumps({**RFC8037_PRIVATE_JWK, "alg": "ES256"}).encode(), "ES256 needs a EC key"),
    ],
    ids=[
        "rsa",
        "p384",
        "encrypted",
        "two-keys",
        "truncated",
        "garbage",
        "public-jwk",
        "oct",
        "empty-set",
        "alg-lie",
    ],
)
def test_load_signing_key_refuses_what_it_cannot_sign_with(
    tmp_path: Path, content: object, message: str
) -> None:
    path = tmp_path / "key"
    path.write_bytes(content())  # type: ignore[operator]
    with pytest.raises(KeyLoadError, match=message) as raised:
        load_signing_key(path)
    assert raised.value.code == "key_load_failed"


def test_load_signing_key_missing_file(tmp_path: Path) -> None:
    with pytest.raises(KeyLoadError, match="cannot read key file"):
        load_signing_key(tmp_path / "absent.pem")


def test_keys_from_the_environment_in_order() -> None:
    first, second = generate_signing_key("ES256"), generate_signing_key("EdDSA")
    as_set = json.dumps({"keys": [first.private_jwk(), second.private_jwk()]})
    assert [k.kid for k in load_signing_keys_from_env(environ={DEFAULT_KEYS_ENV: as_set})] == [
        first.kid,
        second.kid,
    ]
    pems = _pem(ec.generate_private_key(ec.SECP256R1())) + _pem(ed25519.Ed25519PrivateKey.generate())
    keys = load_signing_keys_from_env("MY_KEYS", environ={"MY_KEYS": pems.decode()})
    assert [k.alg for k in keys] == ["ES256", "EdDSA"]
    single = load_signing_keys_from_env(environ={DEFAULT_KEYS_ENV: json.dumps(first.private_jwk())})
    assert single[0].kid == first.kid


def test_keys_from_the_process_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    key = generate_signing_key()
    monkeypatch.setenv(DEFAULT_KEYS_ENV, json.dumps(key.private_jwk()))
    assert load_signing_keys_from_env()[0].kid == key.kid
    monkeypatch.setenv(DEFAULT_KEYS_ENV, "  ")
    with pytest.raises(KeyLoadError, match="is not set"):
        load_signing_keys_from_env()
    monkeypatch.delenv(DEFAULT_KEYS_ENV)
    with pytest.raises(KeyLoadError, match=f"{DEFAULT_KEYS_ENV} is not set"):
        load_signing_keys_from_env()


def test_verification_key_from_jwk_reads_validity_and_drops_private_members() -> None:
    key = VerificationKey.from_jwk(
        {**RFC8037_PRIVATE_JWK, "kid": "k", "alg": "EdDSA", "exp": 2_000_000_000, "nbf": 1}
    )
    assert not key.key.is_private
    assert key.thumbprint == RFC8037_THUMBPRINT
    assert key.expires_at == datetime(2033, 5, 18, 3, 33, 20, tzinfo=UTC)
    assert key.not_before == datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)
    assert VerificationKey.from_jwk(RFC8037_PRIVATE_JWK).kid == RFC8037_THUMBPRINT


@pytest.mark.parametrize(
    "jwk",
    [
        {**RFC8037_PRIVATE_JWK, "exp": "tomorrow"},
        {**RFC8037_PRIVATE_JWK, "nbf": True},
        {**RFC8037_PRIVATE_JWK, "exp": 1e300},
        {**RFC8037_PRIVATE_JWK, "kid": 7},
        {**RFC8037_PRIVATE_JWK, "key_ops": "verify"},
        {"kty": "EC", "crv": "P-256", "x": "AAAA", "y": "AAAA"},
        {"kty": "oct", "k": "c2VjcmV0"},
        {"kty": "EC"},
    ],
    ids=[
        "exp-text",
        "nbf-bool",
        "exp-out-of-range",
        "kid-number",
        "key-ops-string",
        "off-curve",
        "oct",
        "no-members",
    ],
)
def test_verification_key_refuses_malformed_jwks(jwk: dict[str, object]) -> None:
    with pytest.raises(KeyLoadError):
        VerificationKey.from_jwk(jwk)


def test_parse_jwks_skips_unusable_entries_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    good = generate_signing_key().public_jwk()
    with caplog.at_level(logging.WARNING, logger="a2a_x402.agentcard._keys"):
        keys = parse_jwks({"keys": [{"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"}, "text", good]})
    assert list(keys) == [good["kid"]]
    assert "entry 0 skipped" in caplog.text and "entry 1 skipped" in caplog.text


def test_parse_jwks_refuses_duplicate_kids_and_wrong_shapes() -> None:
    good = generate_signing_key().public_jwk()
    with pytest.raises(KeyLoadError, match="two keys with kid"):
        parse_jwks({"keys": [good, good]})
    documents: list[dict[str, Any]] = [{}, {"keys": {}}, {"keys": "x"}]
    for document in documents:
        with pytest.raises(KeyLoadError, match='"keys" array'):
            parse_jwks(document)


def test_store_generate_rotate_retire_lifecycle(tmp_path: Path) -> None:
    store = KeyStore(tmp_path / "keys")
    assert store.signing_keys() == [] and store.public_jwks() == {"keys": []}
    first = store.generate("EdDSA")
    assert first.status is KeyStatus.ACTIVE and first.created_at.tzinfo is UTC

    second = store.rotate()
    assert second.alg == "EdDSA" and second.serial == first.serial + 1
    assert [k.kid for k in store.signing_keys()] == [second.kid, first.kid]
    assert [k["kid"] for k in store.public_jwks()["keys"]] == [second.kid, first.kid]

    signed = sign_card(merchant_card(), store.signing_keys())
    assert len(signed["signatures"]) == 2

    retired = store.retire(first.kid)
    assert retired.status is KeyStatus.RETIRED and retired.retired_at is not None
    assert [k.kid for k in store.signing_keys()] == [second.kid]
    assert [k["kid"] for k in store.public_jwks()["keys"]] == [second.kid]
    assert [(r.kid, r.status) for r in store.records()] == [
        (second.kid, KeyStatus.ACTIVE),
        (first.kid, KeyStatus.RETIRED),
    ]


def test_store_persists_across_instances_with_private_file_modes(tmp_path: Path) -> None:
    directory = tmp_path / "keys"
    record = KeyStore(directory).generate()
    reopened = KeyStore(directory)
    assert [k.kid for k in reopened.signing_keys()] == [record.kid]
    assert reopened.records() == [record]
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    key_file = directory / f"{record.kid}.json"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert json.loads(key_file.read_text())["jwk"]["d"]
    assert all("d" not in jwk for jwk in reopened.public_jwks()["keys"])
    assert [p.name for p in directory.iterdir()] == [key_file.name]  # no temporary files left behind


def test_store_refuses_unsafe_lifecycle_steps(tmp_path: Path) -> None:
    store = KeyStore(tmp_path)
    with pytest.raises(KeyStoreError, match="generate one first"):
        store.rotate()
    only = store.generate()
    with pytest.raises(KeyStoreError, match="last active key"):
        store.retire(only.kid)
    with pytest.raises(KeyStoreError, match="no key 'nope'"):
        store.retire("nope")
    store.rotate()
    store.retire(only.kid)
    with pytest.raises(KeyStoreError, match="already retired"):
        store.retire(only.kid)
    with pytest.raises(KeyLoadError):
        store.generate("HS256")


def test_store_reports_a_corrupt_or_renamed_key_file(tmp_path: Path) -> None:
    store = KeyStore(tmp_path)
    record = store.generate()
    original = tmp_path / f"{record.kid}.json"
    original.rename(tmp_path / "other.json")
    with pytest.raises(KeyStoreError, match="the file name must match"):
        store.signing_keys()
    (tmp_path / "other.json").write_text('{"serial": 1, "serial": 2}')
    with pytest.raises(KeyStoreError, match="unreadable or corrupt") as raised:
        store.records()
    assert raised.value.code == "key_store_error"

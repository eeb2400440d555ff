"""A tenant's checkout keys (§20.1): PEM files of P-256 keys, the first signing, all published, stable kids,
every other key refused in one line, and no private material in an error or a log line."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from joserfc import jwt
from joserfc.jwk import ECKey

from a2a_x402.agentcard import generate_signing_key
from a2a_x402.merchant.ap2 import (
    CheckoutKeyError,
    CheckoutKeys,
    CheckoutTokenError,
    load_checkout_keys,
)
from a2a_x402.observability import REDACTED, redact
from tests.merchant.ap2.support import header_of, published, write_key
from tests.spec.support import example

_EC_PARAMETERS = b"-----BEGIN EC PARAMETERS-----\nBggqhkjOPQMBBw==\n-----END EC PARAMETERS-----\n"


def _private_forms(key: ec.EllipticCurvePrivateKey) -> list[str]:
    """Every way the key's private part could be written: JWK ``d``, hex, decimal, PEM body lines."""
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    forms = [str(ECKey.import_key(pem).as_dict(private=True)["d"])]
    scalar = key.private_numbers().private_value
    forms += [f"{scalar:064x}", str(scalar)]
    for private_format in (serialization.PrivateFormat.PKCS8, serialization.PrivateFormat.TraditionalOpenSSL):
        text = key.private_bytes(serialization.Encoding.PEM, private_format, serialization.NoEncryption())
        forms += [line for line in text.decode().splitlines() if "-----" not in line and len(line) >= 16]
    return forms


def test_the_first_key_signs_and_every_key_is_published_by_its_thumbprint(tmp_path: Path) -> None:
    new = write_key(tmp_path / "new.pem")
    old = write_key(tmp_path / "old.pem", private_format=serialization.PrivateFormat.TraditionalOpenSSL)
    keys = load_checkout_keys([tmp_path / "new.pem", tmp_path / "old.pem"], tenant="acme")
    thumbprints = [
        ECKey.import_key(
            key.public_key().public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
        ).thumbprint()
        for key in (new, old)
    ]
    assert keys.kids == tuple(thumbprints)
    assert keys.signing_kid == thumbprints[0]
    jwks = keys.public_jwks()
    assert [entry["kid"] for entry in jwks["keys"]] == thumbprints
    served = example("ap2.checkout-keys.json")["keys"]
    for entry in jwks["keys"] + served:
        assert set(entry) == {"kty", "crv", "x", "y", "kid", "alg", "use"}
        assert (entry["kty"], entry["crv"], entry["alg"], entry["use"]) == ("EC", "P-256", "ES256", "sig")
    token = keys.sign({"hello": "world", "n": 1})
    assert header_of(token) == {"alg": "ES256", "typ": "JWT", "kid": thumbprints[0]}
    assert jwt.decode(token, published(keys), algorithms=["ES256"]).claims == {"hello": "world", "n": 1}
    assert keys.verify(token) == {"hello": "world", "n": 1}


def test_a_key_has_the_same_kid_in_every_file_format(tmp_path: Path) -> None:
    key = write_key(tmp_path / "pkcs8.pem")
    write_key(tmp_path / "sec1.pem", key, private_format=serialization.PrivateFormat.TraditionalOpenSSL)
    # As `openssl ecparam -genkey` writes it: the curve's parameters, then the key.
    (tmp_path / "openssl.pem").write_bytes(_EC_PARAMETERS + (tmp_path / "sec1.pem").read_bytes())
    kids = {
        load_checkout_keys([tmp_path / name]).signing_kid for name in ("pkcs8.pem", "sec1.pem", "openssl.pem")
    }
    assert len(kids) == 1


def _wrong_curve(path: Path) -> None:
    write_key(path, ec.generate_private_key(ec.SECP384R1()))


def _ed25519(path: Path) -> None:
    key = ed25519.Ed25519PrivateKey.generate()
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )


def _rsa(path: Path) -> None:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )


def _public_only(path: Path) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    path.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )


def _encrypted(path: Path) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"correct horse battery"),
        )
    )


def _not_a_key(path: Path) -> None:
    path.write_text("[tenants.acme]\npay_to = '0x53e80BC7DF960b978Ef9211fD3908b266F4ce50a'\n")


def _broken_pem(path: Path) -> None:
    body = "MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg"  # a P-256 PKCS#8 key, cut short
    path.write_text(f"-----BEGIN PRIVATE KEY-----\n{body}\n-----END PRIVATE KEY-----\n")


def _missing(path: Path) -> None:
    del path  # nothing is written


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (_wrong_curve, "the key is EC secp384r1; checkout keys are EC P-256"),
        (_ed25519, "the key is Ed25519; checkout keys are EC P-256"),
        (_rsa, "the key is RSA; checkout keys are EC P-256"),
        (_public_only, "holds no PEM private key"),
        (_encrypted, "encrypted"),
        (_not_a_key, "not a PEM file"),
        (_broken_pem, "holds no PEM private key"),
        (_missing, "cannot be read (No such file or directory)"),
    ],
    ids=["p384", "ed25519", "rsa", "public-key", "encrypted", "not-a-key", "broken-pem", "missing"],
)
def test_a_key_that_cannot_sign_checkouts_is_refused_in_one_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, make: Callable[[Path], None], words: str
) -> None:
    path = tmp_path / "checkout.pem"
    make(path)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(CheckoutKeyError) as caught:
        load_checkout_keys([path])
    message = str(caught.value)
    assert message == f"checkout key file {path}: {message.split(': ', 1)[1]}"
    assert words in message
    assert "\n" not in message
    content = path.read_text(errors="replace") if path.exists() else ""
    for line in content.splitlines():
        if len(line) >= 16 and "-----" not in line:
            assert line not in message
            assert line not in caplog.text


def test_one_key_twice_or_none_at_all_is_refused(tmp_path: Path) -> None:
    key = write_key(tmp_path / "a.pem")
    write_key(tmp_path / "b.pem", key, private_format=serialization.PrivateFormat.TraditionalOpenSSL)
    with pytest.raises(CheckoutKeyError, match="given twice"):
        load_checkout_keys([tmp_path / "a.pem", tmp_path / "b.pem"])
    with pytest.raises(CheckoutKeyError, match="at least one"):
        load_checkout_keys([])
    with pytest.raises(CheckoutKeyError, match="checkout keys are ES256"):
        CheckoutKeys((generate_signing_key("EdDSA"),))


def test_a_loaded_key_is_redacted_from_every_log_line_and_never_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    key = write_key(tmp_path / "checkout.pem")
    forms = _private_forms(key)
    caplog.set_level(logging.DEBUG)
    keys = load_checkout_keys([tmp_path / "checkout.pem"], tenant="acme")
    assert keys.signing_kid in caplog.text
    for form in forms:
        assert form not in caplog.text
        assert redact(f"the key is {form}.") == f"the key is {REDACTED}."
    assert all(form not in repr(keys) for form in forms)
    assert all(form not in str(keys.public_jwks()) for form in forms)


@pytest.mark.parametrize(
    "mangle",
    [
        lambda token: token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB"),
        lambda token: "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0." + token.split(".")[1] + ".",
        lambda token: token.replace(".", "~"),
        lambda token: "eyJhbGciOiJFUzI1NiIsInR5cCI6IkpXVCJ9." + token.split(".", 1)[1],
    ],
    ids=["signature", "alg-none", "not-a-jws", "no-kid"],
)
def test_a_token_these_keys_did_not_sign_is_refused_in_one_line(
    tmp_path: Path, mangle: Callable[[str], str]
) -> None:
    write_key(tmp_path / "checkout.pem")
    keys = load_checkout_keys([tmp_path / "checkout.pem"])
    forged = mangle(keys.sign({"id": "x"}))
    with pytest.raises(CheckoutTokenError) as caught:
        keys.verify(forged)
    assert "\n" not in str(caught.value)
    assert forged.split(".")[0] not in str(caught.value)


def test_a_token_of_another_tenants_key_is_not_ours(tmp_path: Path) -> None:
    write_key(tmp_path / "ours.pem")
    write_key(tmp_path / "theirs.pem")
    ours, theirs = (load_checkout_keys([tmp_path / name]) for name in ("ours.pem", "theirs.pem"))
    with pytest.raises(CheckoutTokenError, match="no checkout key has the kid"):
        ours.verify(theirs.sign({"id": "x"}))

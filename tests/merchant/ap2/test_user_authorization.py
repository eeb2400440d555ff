"""The `user_authorization` of an AP2 v0.1 PaymentMandate, read strictly (§20.7): an SD-JWT of a key the
tenant trusts, with a key-binding JWT of its `cnf` key over the two hashes, for this merchant and offer.
Every other token is refused with `invalid_credential`, without quoting it."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from a2a_x402.extension import Ap2ErrorCode
from a2a_x402.merchant.ap2 import IssuerKeys, MandateRefused, verify_user_authorization
from tests.fixtures.ap2 import new_key, public_jwks
from tests.fixtures.ap2_v01 import Shopper

pytest.importorskip("sd_jwt.issuer", reason="the AP2 SDK's SD-JWT library is not installed")

NOW = 1_777_889_100
CART_IAT = NOW - 60
HASHES = ("cart-hash", "contents-hash")
AUD = "merchant.example"
NONCE = "5d1e8a3c7b9f42e0a6c4d2b8f0e1a3c5"


@pytest.fixture(scope="module")
def shopper() -> Shopper:
    return Shopper(new_key("trusted-surface"), new_key())


@pytest.fixture(scope="module")
def issuers(shopper: Shopper) -> IssuerKeys:
    return IssuerKeys.from_jwks(public_jwks(shopper.user_key))


def verify(token: object, issuers: IssuerKeys, **changes: Any) -> tuple[str, ...]:
    arguments: dict[str, Any] = {"audience": AUD, "nonce": NONCE, "not_before": CART_IAT, "now": NOW}
    return verify_user_authorization(token, issuers, **(arguments | changes))


def refusal(token: object, issuers: IssuerKeys, **changes: Any) -> str:
    with pytest.raises(MandateRefused) as refused:
        verify(token, issuers, **changes)
    assert refused.value.code is Ap2ErrorCode.INVALID_CREDENTIAL
    if isinstance(token, str) and len(token) > 40:
        assert token not in refused.value.detail
    return refused.value.detail


def test_a_good_authorization_gives_its_two_hashes(shopper: Shopper, issuers: IssuerKeys) -> None:
    token = shopper.authorize(HASHES, aud=AUD, nonce=NONCE, now=NOW)
    assert verify(token, issuers) == HASHES


def test_what_the_round_binds_is_checked(shopper: Shopper, issuers: IssuerKeys) -> None:
    token = shopper.authorize(HASHES, aud=AUD, nonce=NONCE, now=NOW)
    assert "aud" in refusal(token, issuers, audience="other.example")
    assert "nonce" in refusal(token, issuers, nonce="another-offer")
    assert "iat" in refusal(token, issuers, not_before=NOW + 3600)
    credential = shopper.credential(now=NOW)
    future = shopper.authorize(HASHES, aud=AUD, nonce=NONCE, now=NOW + 3600, credential=credential)
    assert "iat" in refusal(future, issuers)


def test_signatures_and_the_issuer_are_checked(shopper: Shopper, issuers: IssuerKeys) -> None:
    stranger = Shopper(new_key("stranger"), shopper.agent_key)
    assert "trust" in refusal(stranger.authorize(HASHES, aud=AUD, nonce=NONCE, now=NOW), issuers)
    impostor = Shopper(new_key("trusted-surface"), shopper.agent_key)  # the trusted kid, another key
    assert "does not verify" in refusal(impostor.authorize(HASHES, aud=AUD, nonce=NONCE, now=NOW), issuers)
    forged = shopper.authorize(HASHES, aud=AUD, nonce=NONCE, now=NOW, signer=new_key())
    assert "key-binding JWT does not verify" in refusal(forged, issuers)


def test_the_key_binding_belongs_to_its_credential(shopper: Shopper, issuers: IssuerKeys) -> None:
    token = shopper.authorize(HASHES, aud=AUD, nonce=NONCE, now=NOW)
    other = shopper.credential(now=NOW - 5)
    binding = token.rsplit("~", 1)[1]
    assert "sd_hash" in refusal(other + binding, issuers)
    assert "key-binding" in refusal(token.rsplit("~", 1)[0] + "~", issuers)
    assert "disclosure" in refusal(other[:-1] + "~WyJzYWx0IiwgIm5hbWUiLCAidmFsdWUiXQ~" + binding, issuers)


def test_an_expired_credential_is_refused(shopper: Shopper, issuers: IssuerKeys) -> None:
    old = shopper.credential(now=NOW - 7200)  # issued for an hour
    token = shopper.authorize(HASHES, aud=AUD, nonce=NONCE, now=NOW, credential=old)
    assert "expired" in refusal(token, issuers)


def test_the_key_binding_must_say_what_it_is(shopper: Shopper, issuers: IssuerKeys) -> None:
    token = shopper.authorize(HASHES, aud=AUD, nonce=NONCE, now=NOW)
    head, binding = token.rsplit("~", 1)
    header, payload, signature = binding.split(".")
    plain = base64.urlsafe_b64encode(json.dumps({"alg": "ES256", "typ": "JWT"}).encode()).rstrip(b"=")
    assert "kb+jwt" in refusal(f"{head}~{plain.decode()}.{payload}.{signature}", issuers)
    one = shopper.authorize(HASHES[:1], aud=AUD, nonce=NONCE, now=NOW)
    assert "transaction_data" in refusal(one, issuers)


@pytest.mark.parametrize(
    "token", [None, 42, "", "not-an-sd-jwt", "a" * 40_000, "é~x", "~~", "x.y.z~"], ids=repr
)
def test_what_is_no_presentation_is_refused(token: object, issuers: IssuerKeys) -> None:
    refusal(token, issuers)

"""A tenant's trusted issuer keys (`TrustedIssuers`): its files' keys and `https` JWK Sets served for real on
127.0.0.1 (TLS, and plain http where loopback allows it), fetched with a deadline and a size limit, cached
for the refresh interval, refetched for an unknown kid at most once per interval whatever a stranger
sends, and refused whole when they hold a private key or a key that is not P-256."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import secrets
import sys
from typing import Any

import httpx
import pytest

from a2a_x402.agentcard import JWKS_PATH
from a2a_x402.extension import Ap2Mandates
from a2a_x402.merchant.ap2 import IssuerKeys, TrustedIssuers, check_issuer_url, issuer_kids
from tests.agentcard.conftest import DRIP_S, SLOW_ANSWER_S, KeyServer
from tests.fixtures.ap2 import new_key, public_jwks
from tests.fixtures.deadlines import HANG_S

NO_FILES = IssuerKeys({})


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def served(server: KeyServer, *kids: str) -> list[Any]:
    """Serve fresh keys named `kids` at `server`'s JWK Set; return them."""
    keys = [new_key(kid) for kid in kids]
    server.jwks = public_jwks(*keys)
    return keys


async def test_an_https_source_is_fetched_over_tls(
    tls_key_server: KeyServer, tls_client: httpx.AsyncClient
) -> None:
    served(tls_key_server, "surface-1")
    trusted = TrustedIssuers(NO_FILES, [tls_key_server.jwks_url], tls_client)
    keys = await trusted.keys_for({"surface-1"})
    assert list(keys.by_kid) == ["surface-1"] and "d" not in keys.by_kid["surface-1"]
    assert tls_key_server.hits[JWKS_PATH] == 1
    assert await trusted.check_sources() == []


async def test_a_source_whose_certificate_is_not_trusted_gives_no_key(
    tls_key_server: KeyServer, http_client: httpx.AsyncClient
) -> None:
    served(tls_key_server, "surface-1")
    trusted = TrustedIssuers(NO_FILES, [tls_key_server.jwks_url], http_client)
    assert (await trusted.keys_for({"surface-1"})).by_kid == {}
    [problem] = await trusted.check_sources()
    assert problem.startswith(f"{tls_key_server.jwks_url} could not be reached")


@pytest.mark.parametrize(
    "url",
    [
        "http://issuer.example/jwks.json",
        "https://user:secret@issuer.example/jwks.json",
        "ftp://issuer.example/jwks.json",
        "http://127.0.0.2/jwks.json",
    ],
)
def test_only_https_or_loopback_http_is_a_source(url: str) -> None:
    with pytest.raises(ValueError, match="must be an absolute https:// URL") as refused:
        check_issuer_url(url)
    assert "secret" not in str(refused.value)
    with pytest.raises(ValueError):
        TrustedIssuers(NO_FILES, [url], httpx.AsyncClient())


async def test_keys_are_cached_for_the_refresh_interval(
    key_server: KeyServer, http_client: httpx.AsyncClient
) -> None:
    served(key_server, "surface-1")
    clock = FakeClock()
    trusted = TrustedIssuers(NO_FILES, [key_server.jwks_url], http_client, refresh_s=300, clock=clock)
    for _ in range(5):
        assert "surface-1" in (await trusted.keys_for({"surface-1"})).by_kid
    assert key_server.hits[JWKS_PATH] == 1

    # The issuer rotates: the cached set counts until it is due, then the new one.
    served(key_server, "surface-2")
    clock.now += 299
    assert list((await trusted.keys_for({"surface-1"})).by_kid) == ["surface-1"]
    clock.now += 1
    assert list((await trusted.keys_for({"surface-1"})).by_kid) == ["surface-2"]
    assert key_server.hits[JWKS_PATH] == 2


async def test_a_stale_set_is_not_trusted_while_its_source_fails(
    key_server: KeyServer, http_client: httpx.AsyncClient
) -> None:
    served(key_server, "surface-1")
    clock = FakeClock()
    trusted = TrustedIssuers(NO_FILES, [key_server.jwks_url], http_client, refresh_s=300, clock=clock)
    assert "surface-1" in (await trusted.keys_for({"surface-1"})).by_kid
    key_server.jwks = {"keys": "none"}
    clock.now += 300
    assert (await trusted.keys_for({"surface-1"})).by_kid == {}
    assert trusted.current().by_kid == {}


async def test_an_unknown_kid_refetches_at_most_once_per_interval(
    key_server: KeyServer, http_client: httpx.AsyncClient
) -> None:
    served(key_server, "surface-1")
    clock = FakeClock()
    trusted = TrustedIssuers(NO_FILES, [key_server.jwks_url], http_client, min_refetch_s=30, clock=clock)
    await trusted.keys_for({"surface-1"})

    # A stranger presents made-up kids, one after another and all at once: the source is not asked again.
    for _ in range(20):
        await trusted.keys_for({secrets.token_hex(8)})
    await asyncio.gather(*(trusted.keys_for({secrets.token_hex(8)}) for _ in range(50)))
    assert key_server.hits[JWKS_PATH] == 1

    # Once the interval has passed, one unknown kid makes one refetch, which finds the issuer's new key;
    # fifty at once still make one.
    [rotated] = served(key_server, "surface-2")
    clock.now += 30
    found = await asyncio.gather(*(trusted.keys_for({"surface-2"}) for _ in range(50)))
    assert all("surface-2" in keys.by_kid for keys in found)
    assert key_server.hits[JWKS_PATH] == 2
    assert json.loads(rotated.export_public())["x"] == found[0].by_kid["surface-2"]["x"]


async def test_a_failing_source_is_asked_at_most_once_per_interval(
    key_server: KeyServer, http_client: httpx.AsyncClient
) -> None:
    clock = FakeClock()
    trusted = TrustedIssuers(NO_FILES, [key_server.url("/failing")], http_client, clock=clock)
    for _ in range(10):
        assert (await trusted.keys_for({secrets.token_hex(8)})).by_kid == {}
    assert key_server.hits["/failing"] == 1
    clock.now += 30
    await trusted.keys_for({"any"})
    assert key_server.hits["/failing"] == 2


async def test_a_kid_of_a_file_fetches_nothing(key_server: KeyServer, http_client: httpx.AsyncClient) -> None:
    served(key_server, "surface-1")
    files = IssuerKeys.from_jwks(public_jwks(new_key("file-1")))
    trusted = TrustedIssuers(files, [key_server.jwks_url], http_client)
    assert list((await trusted.keys_for({"file-1"})).by_kid) == ["file-1"]
    assert key_server.hits[JWKS_PATH] == 0
    assert set((await trusted.keys_for({"surface-1"})).by_kid) == {"file-1", "surface-1"}
    assert key_server.hits[JWKS_PATH] == 1


@pytest.mark.parametrize("path", ["/slow", "/drip"])
async def test_a_source_too_slow_is_cut_off_at_its_deadline(
    key_server: KeyServer, http_client: httpx.AsyncClient, path: str
) -> None:
    trusted = TrustedIssuers(NO_FILES, [key_server.url(path)], http_client, timeout_s=0.5)
    # The deadline is the whole exchange's: the server would take SLOW_ANSWER_S or DRIP_S.
    async with asyncio.timeout(min(SLOW_ANSWER_S, DRIP_S) - 1):
        assert (await trusted.keys_for({"surface-1"})).by_kid == {}
        [problem] = await trusted.check_sources()
    assert problem == f"{key_server.url(path)} did not answer within 0.5 s"


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("/huge", "over the limit of 65536"),
        ("/huge-chunked", "over the limit of 65536 bytes"),
        ("/gzip-bomb", "over the limit of 65536 bytes"),
        ("/redirect", "answered HTTP 302"),
        ("/failing", "answered HTTP 500"),
        ("/garbage", "Expecting value"),
        ("/not-a-jwks", "needs a non-empty array of keys"),
        ("/duplicate-kid", "needs a kid of its own"),
    ],
)
async def test_a_source_that_misbehaves_gives_no_key_and_one_line(
    key_server: KeyServer, http_client: httpx.AsyncClient, path: str, says: str
) -> None:
    served(key_server, "surface-1")
    trusted = TrustedIssuers(NO_FILES, [key_server.url(path)], http_client, timeout_s=HANG_S)
    assert (await trusted.keys_for({"surface-1"})).by_kid == {}
    [problem] = await trusted.check_sources()
    assert problem.startswith(key_server.url(path)) and says in problem and "\n" not in problem
    assert "<html>" not in problem and "xxxx" not in problem


async def test_a_private_key_served_is_refused_whole_and_never_shown(
    tls_key_server: KeyServer, tls_client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    [good, private] = served(tls_key_server, "surface-1", "leaked-1")
    leaked = json.loads(private.export_private())
    tls_key_server.jwks = {"keys": [json.loads(good.export_public()), leaked]}
    trusted = TrustedIssuers(NO_FILES, [tls_key_server.jwks_url], tls_client)
    with caplog.at_level(logging.DEBUG):
        assert (await trusted.keys_for({"surface-1", "leaked-1"})).by_kid == {}
        [problem] = await trusted.check_sources()
    assert "'leaked-1' is a private key" in problem
    assert leaked["d"] not in problem and leaked["d"] not in caplog.text


@pytest.mark.parametrize(
    "key",
    [
        {"kty": "EC", "crv": "P-384", "kid": "p384", "x": "AA", "y": "AA"},
        {"kty": "RSA", "kid": "rsa", "n": "AQAB", "e": "AQAB"},
        {"kty": "OKP", "crv": "Ed25519", "kid": "ed", "x": "AA"},
    ],
)
async def test_a_key_that_is_not_p256_is_refused_as_a_file_is(
    key_server: KeyServer, http_client: httpx.AsyncClient, key: dict[str, str]
) -> None:
    key_server.jwks = {"keys": [key]}
    trusted = TrustedIssuers(NO_FILES, [key_server.jwks_url], http_client)
    assert (await trusted.keys_for({key["kid"]})).by_kid == {}
    [problem] = await trusted.check_sources()
    assert problem.endswith("issuer key 0 is not an EC P-256 key")


def _segment(value: Any) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


@pytest.mark.parametrize(
    ("header", "kids"),
    [
        (_segment({"alg": "ES256", "kid": "surface-1"}), {"surface-1"}),
        (_segment({"alg": "ES256"}), set()),
        (_segment({"kid": 7}), set()),
        (_segment({"kid": "k" * 257}), set()),
        (_segment(["not", "a", "header"]), set()),
        ("%%%not-base64", set()),
        ("", set()),
        # Nested deeper than Python's recursion limit, inside the header's length cap: no kid, no error.
        (base64.urlsafe_b64encode(b"[" * 3000).rstrip(b"=").decode(), set()),
    ],
)
def test_issuer_kids_reads_only_what_it_can(header: str, kids: set[str]) -> None:
    token = f"{header}.payload.sig~disclosure~~closing.jwt.sig~"
    # At Python's own recursion limit (a process with py_ecc imported has 100,000), the nesting overflows.
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(1000)
    try:
        assert issuer_kids(Ap2Mandates(checkout_mandate=token, payment_mandate=token)) == kids
    finally:
        sys.setrecursionlimit(previous)

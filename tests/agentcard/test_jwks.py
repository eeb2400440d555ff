from __future__ import annotations

import asyncio
from functools import partial

import httpx
import pytest

from a2a_x402.agentcard import (
    JWKS_PATH,
    JkuNotAllowedError,
    JwksCache,
    JwksFetchError,
    JwksInvalidError,
    JwksTimeoutError,
    KeyNotFoundError,
    check_jku,
    generate_signing_key,
    jwks_url,
)
from tests.agentcard.conftest import DRIP_BYTES, KeyServer
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.servers import bind_loopback


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_jwks_url_is_the_well_known_path_of_the_origin() -> None:
    assert JWKS_PATH == "/.well-known/jwks.json"
    assert jwks_url("https://shop.example") == "https://shop.example/.well-known/jwks.json"
    assert (
        jwks_url("https://shop.example:8443/a2a/jsonrpc?x=1#f")
        == "https://shop.example:8443/.well-known/jwks.json"
    )
    with pytest.raises(ValueError, match="not an absolute URL"):
        jwks_url("shop.example")


@pytest.mark.parametrize(
    ("url", "dev", "allowed"),
    [
        ("https://shop.example/.well-known/jwks.json", False, True),
        ("HTTPS://SHOP.EXAMPLE/jwks", False, True),
        ("https://127.0.0.1:8443/jwks", False, True),
        ("http://shop.example/.well-known/jwks.json", False, False),
        ("http://shop.example/.well-known/jwks.json", True, False),
        ("http://127.0.0.1:9999/jwks", False, False),
        ("http://127.0.0.1:9999/jwks", True, True),
        ("http://localhost/jwks", True, True),
        ("http://[::1]:80/jwks", True, True),
        ("http://127.0.0.2/jwks", True, False),
        ("http://localhost.evil.example/jwks", True, False),
        ("https://user:pass@shop.example/jwks", False, False),
        ("ftp://shop.example/jwks", False, False),
        ("file:///etc/passwd", True, False),
        ("/.well-known/jwks.json", False, False),
        ("https://shop.example:99999/jwks", False, False),
        ("https:///jwks", False, False),
    ],
)
async def test_check_url(url: str, dev: bool, allowed: bool) -> None:
    async with httpx.AsyncClient(timeout=HANG_S) as client:
        cache = JwksCache(client, allow_insecure_localhost=dev)
        # The cache's rule and check_jku, the same rule without a cache, agree on every URL.
        for check in (cache.check_url, partial(check_jku, allow_insecure_localhost=dev)):
            if allowed:
                check(url)
            else:
                with pytest.raises(JkuNotAllowedError) as raised:
                    check(url)
                assert raised.value.code == "jwks_url_not_allowed"


async def test_refused_url_is_never_fetched(key_server: KeyServer, http_client: httpx.AsyncClient) -> None:
    key = generate_signing_key()
    key_server.jwks = {"keys": [key.public_jwk()]}
    with pytest.raises(JkuNotAllowedError, match="not HTTPS"):
        await JwksCache(http_client).get_key(key_server.jwks_url, key.kid)
    assert key_server.hits[JWKS_PATH] == 0


async def test_fetches_over_https_without_the_development_flag(
    tls_key_server: KeyServer, tls_client: httpx.AsyncClient
) -> None:
    key = generate_signing_key()
    tls_key_server.jwks = {"keys": [key.public_jwk()]}
    found = await JwksCache(tls_client).get_key(tls_key_server.jwks_url, key.kid)
    assert found.kid == key.kid and found.thumbprint == key.key.thumbprint()


async def test_cached_within_ttl_and_refetched_after(
    key_server: KeyServer, http_client: httpx.AsyncClient
) -> None:
    key = generate_signing_key()
    key_server.jwks = {"keys": [key.public_jwk()]}
    clock = FakeClock()
    cache = JwksCache(http_client, ttl_s=60, allow_insecure_localhost=True, clock=clock)
    for _ in range(3):
        await cache.get_key(key_server.jwks_url, key.kid)
    assert key_server.hits[JWKS_PATH] == 1
    clock.now += 60
    await cache.get_key(key_server.jwks_url, key.kid)
    assert key_server.hits[JWKS_PATH] == 2


async def test_unknown_kid_refetches_once_then_fails(
    key_server: KeyServer, http_client: httpx.AsyncClient
) -> None:
    old, new = generate_signing_key(), generate_signing_key()
    key_server.jwks = {"keys": [old.public_jwk()]}
    clock = FakeClock()
    cache = JwksCache(http_client, min_refetch_interval_s=30, allow_insecure_localhost=True, clock=clock)
    await cache.get_key(key_server.jwks_url, old.kid)

    # The signer rotates; within the refetch interval the cached set is trusted as it is.
    key_server.jwks = {"keys": [new.public_jwk(), old.public_jwk()]}
    with pytest.raises(KeyNotFoundError, match=new.kid) as raised:
        await cache.get_key(key_server.jwks_url, new.kid)
    assert raised.value.code == "signature_key_not_found"
    assert key_server.hits[JWKS_PATH] == 1

    clock.now += 30
    assert (await cache.get_key(key_server.jwks_url, new.kid)).kid == new.kid
    assert key_server.hits[JWKS_PATH] == 2

    clock.now += 30
    with pytest.raises(KeyNotFoundError):
        await cache.get_key(key_server.jwks_url, "made-up")
    assert key_server.hits[JWKS_PATH] == 3  # exactly one refetch for the unknown kid
    with pytest.raises(KeyNotFoundError):
        await cache.get_key(key_server.jwks_url, "made-up-too")
    assert key_server.hits[JWKS_PATH] == 3


async def test_the_documented_refetch_interval_is_the_default(
    key_server: KeyServer, http_client: httpx.AsyncClient
) -> None:
    # The signed Agent Cards guide promises an unknown kid is looked up again only once the cached set is
    # 30 s old.
    old, new = generate_signing_key(), generate_signing_key()
    key_server.jwks = {"keys": [old.public_jwk()]}
    clock = FakeClock()
    cache = JwksCache(http_client, allow_insecure_localhost=True, clock=clock)
    await cache.get_key(key_server.jwks_url, old.kid)
    key_server.jwks = {"keys": [new.public_jwk(), old.public_jwk()]}

    clock.now += 29
    with pytest.raises(KeyNotFoundError):
        await cache.get_key(key_server.jwks_url, new.kid)
    clock.now += 1
    assert (await cache.get_key(key_server.jwks_url, new.kid)).kid == new.kid
    assert key_server.hits[JWKS_PATH] == 2


async def test_concurrent_lookups_share_one_fetch(
    key_server: KeyServer, http_client: httpx.AsyncClient
) -> None:
    key = generate_signing_key()
    key_server.jwks = {"keys": [key.public_jwk()]}
    cache = JwksCache(http_client, allow_insecure_localhost=True)
    found = await asyncio.gather(*(cache.get_key(key_server.jwks_url, key.kid) for _ in range(20)))
    assert {k.kid for k in found} == {key.kid}
    assert key_server.hits[JWKS_PATH] == 1


async def test_failures_are_not_cached(key_server: KeyServer, http_client: httpx.AsyncClient) -> None:
    key = generate_signing_key()
    cache = JwksCache(http_client, allow_insecure_localhost=True)
    key_server.jwks = {"keys": "broken"}
    with pytest.raises(JwksInvalidError):
        await cache.get_key(key_server.jwks_url, key.kid)
    key_server.jwks = {"keys": [key.public_jwk()]}
    assert (await cache.get_key(key_server.jwks_url, key.kid)).kid == key.kid


async def test_oldest_set_is_evicted_beyond_max_entries(
    key_server: KeyServer, http_client: httpx.AsyncClient
) -> None:
    key = generate_signing_key()
    key_server.jwks = {"keys": [key.public_jwk()]}
    clock = FakeClock()
    cache = JwksCache(http_client, max_entries=2, allow_insecure_localhost=True, clock=clock)
    urls = [f"{key_server.jwks_url}?n={n}" for n in range(3)]
    for url in urls:
        clock.now += 1
        await cache.get_key(url, key.kid)
    await cache.get_key(urls[2], key.kid)
    await cache.get_key(urls[1], key.kid)
    assert key_server.hits[JWKS_PATH] == 3
    await cache.get_key(urls[0], key.kid)
    assert key_server.hits[JWKS_PATH] == 4


@pytest.mark.parametrize(
    ("path", "error", "message"),
    [
        ("/garbage", JwksInvalidError, "not JSON"),
        ("/not-a-jwks", JwksInvalidError, '"keys" array'),
        ("/duplicate-member", JwksInvalidError, "duplicate member 'keys'"),
        ("/duplicate-kid", JwksInvalidError, "two keys with kid"),
        # Refused while reading (Content-Length, then a running count of inflated bytes), not after.
        ("/huge", JwksInvalidError, r"^JWK Set at \S+ is \d+ bytes, over the limit of 65536$"),
        ("/huge-chunked", JwksInvalidError, r"^JWK Set at \S+ is over the limit of 65536 bytes$"),
        ("/gzip-bomb", JwksInvalidError, r"^JWK Set at \S+ is over the limit of 65536 bytes$"),
        ("/failing", JwksFetchError, "HTTP 500"),
        ("/redirect", JwksFetchError, "HTTP 302"),
        ("/absent", JwksFetchError, "HTTP 404"),
    ],
)
async def test_bad_answers_are_typed_errors(
    key_server: KeyServer, http_client: httpx.AsyncClient, path: str, error: type[Exception], message: str
) -> None:
    key = generate_signing_key()
    key_server.jwks = {"keys": [key.public_jwk()]}
    cache = JwksCache(http_client, allow_insecure_localhost=True)
    with pytest.raises(error, match=message):
        await cache.get_key(key_server.url(path), key.kid)


async def test_a_server_that_never_answers_times_out(
    key_server: KeyServer, http_client: httpx.AsyncClient
) -> None:
    # Counted, not timed: the fetch gave up before the server answered (16 times its timeout later), which a
    # loaded machine cannot make happen the other way round.
    cache = JwksCache(http_client, timeout_s=0.3, allow_insecure_localhost=True)
    with pytest.raises(JwksTimeoutError, match="did not answer within 0.3 s") as raised:
        await cache.get_key(key_server.url("/slow"), "k")
    assert raised.value.code == "jwks_timeout"
    assert key_server.hits["/slow"] == 1
    assert key_server.slow_answered == 0, "the fetch waited for the answer instead of its deadline"


async def test_a_server_that_drips_bytes_hits_the_overall_deadline(
    key_server: KeyServer, http_client: httpx.AsyncClient
) -> None:
    # Each byte arrives well within the timeout, so only a deadline on the whole fetch stops it.
    # Counted, not timed: the fetch gave up while the body was still dripping (all of it takes 10 times the
    # deadline), so the deadline covers the whole fetch, not each read.
    cache = JwksCache(http_client, timeout_s=0.5, allow_insecure_localhost=True)
    with pytest.raises(JwksTimeoutError):
        await cache.get_key(key_server.url("/drip"), "k")
    assert key_server.hits["/drip"] == 1
    assert key_server.dripped < DRIP_BYTES, "the fetch read the whole drip instead of keeping its deadline"


async def test_connection_refused_is_a_fetch_error(http_client: httpx.AsyncClient) -> None:
    sock = bind_loopback()
    port = sock.getsockname()[1]
    sock.close()  # nothing listens on this port now
    cache = JwksCache(http_client, allow_insecure_localhost=True)
    with pytest.raises(JwksFetchError) as raised:
        await cache.get_key(f"http://127.0.0.1:{port}/.well-known/jwks.json", "k")
    assert raised.value.code == "jwks_fetch_failed"
    # In words, never an exception's name or repr ("ConnectError('All connection attempts failed')").
    assert str(raised.value) == (
        f"http://127.0.0.1:{port}/.well-known/jwks.json could not be reached (connection refused)"
    )


async def test_untrusted_certificate_is_a_fetch_error(
    tls_key_server: KeyServer, http_client: httpx.AsyncClient
) -> None:
    # http_client trusts the system CAs only, not the test server's self-signed certificate.
    with pytest.raises(
        JwksFetchError, match=r"could not be reached \(its TLS certificate is not trusted: "
    ) as raised:
        await JwksCache(http_client).get_key(tls_key_server.jwks_url, "k")
    assert "Error" not in str(raised.value)

"""The SSRF guard: only public addresses, unless private targets are allowed; requests pinned to the IP."""

from __future__ import annotations

import ipaddress

import pytest

from a2a_x402.merchant.webhooks import UnsafeTargetError, is_public_address, resolve_target


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8080/hook",
        "http://10.1.2.3/hook",
        "http://172.16.0.1/hook",
        "http://192.168.1.1/hook",
        "http://169.254.169.254/latest/meta-data",  # cloud metadata, link-local
        "http://100.64.0.1/hook",  # carrier-grade NAT
        "http://0.0.0.0/hook",
        "http://[::1]/hook",
        "http://[fe80::1]/hook",
        "http://[fd00::1]/hook",
        "http://[::ffff:127.0.0.1]/hook",  # IPv4-mapped loopback
        "http://[::ffff:0:7f00:1]/hook",  # IPv4-translated loopback
        "http://[64:ff9b::7f00:1]/hook",  # NAT64 of 127.0.0.1
        "http://[64:ff9b::a9fe:a9fe]/hook",  # NAT64 of the cloud metadata address
        "http://[64:ff9b:1::808:808]/hook",  # local-use NAT64
        "http://[2002:7f00:1::]/hook",  # 6to4 of 127.0.0.1
        "http://[2002:a00:1::1]/hook",  # 6to4 of 10.0.0.1
        "http://[::a00:1]/hook",  # IPv4-compatible 10.0.0.1
        "http://[::808:808]/hook",  # IPv4-compatible (deprecated, never routed)
        "http://192.0.0.8/hook",  # IETF protocol assignments
        "http://224.0.0.1/hook",
        "http://localhost:9/hook",  # a name that resolves to loopback
    ],
)
async def test_non_public_targets_are_refused(url: str) -> None:
    with pytest.raises(UnsafeTargetError, match="non-public") as raised:
        await resolve_target(url, allow_private=False)
    assert raised.value.code == "unsafe_webhook_target"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://example.com/hook", "http"),
        ("/relative/hook", "http"),
        ("http://no-such-host.invalid/hook", "cannot resolve"),
    ],
)
async def test_malformed_or_unresolvable_targets_are_refused(url: str, message: str) -> None:
    with pytest.raises(UnsafeTargetError, match=message):
        await resolve_target(url, allow_private=True)


async def test_a_slow_lookup_is_refused_at_its_time_limit() -> None:
    with pytest.raises(UnsafeTargetError, match="no answer within 0 s"):
        await resolve_target("http://localhost/hook", allow_private=True, resolve_timeout_s=0)


async def test_a_public_address_is_allowed_and_pinned() -> None:
    target = await resolve_target("https://93.184.215.14:8443/x402/events?t=1", allow_private=False)

    assert str(target.url) == "https://93.184.215.14:8443/x402/events?t=1"
    assert target.host == "93.184.215.14:8443" and target.sni_hostname is None  # no name to present


async def test_allowed_private_names_are_pinned_to_the_checked_address() -> None:
    target = await resolve_target("http://localhost:8080/hook", allow_private=True)
    secure = await resolve_target("https://localhost/hook", allow_private=True)

    assert target.address.is_loopback
    assert target.url.host == str(target.address) and target.url.port == 8080 and target.url.path == "/hook"
    assert target.host == "localhost:8080"  # sent as the Host header
    assert target.sni_hostname is None
    assert secure.url.host == str(secure.address) and secure.sni_hostname == "localhost"


@pytest.mark.parametrize(
    ("address", "public"),
    [
        ("8.8.8.8", True),
        ("2606:4700:4700::1111", True),
        ("::ffff:8.8.8.8", True),
        ("64:ff9b::808:808", True),  # NAT64 of a public address
        ("2002:808:808::1", True),  # 6to4 of a public address
        ("64:ff9b::7f00:1", False),
        ("2002:7f00:1::", False),
        ("::a00:1", False),
        ("192.0.0.8", False),
        ("10.0.0.1", False),
        ("ff02::1", False),
    ],
)
def test_is_public_address(address: str, public: bool) -> None:
    assert is_public_address(ipaddress.ip_address(address)) is public

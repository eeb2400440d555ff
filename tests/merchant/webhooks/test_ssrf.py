"""The SSRF guard: only public addresses, unless private targets are allowed; requests pinned to the IP."""

from __future__ import annotations

import ipaddress

import pytest

from merchant.webhooks import UnsafeTargetError, is_public_address, resolve_target


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
        ("10.0.0.1", False),
        ("ff02::1", False),
    ],
)
def test_is_public_address(address: str, public: bool) -> None:
    assert is_public_address(ipaddress.ip_address(address)) is public

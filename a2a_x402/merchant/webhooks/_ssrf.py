"""The SSRF guard: a webhook URL may only reach publicly routable addresses.

The host is resolved once (without blocking the event loop, within `RESOLVE_TIMEOUT_S`), every address it
resolves to must be globally routable unicast (`is_global`, which on Python 3.11 still passes the IETF
block 192.0.0.0/24, hence the explicit list), and an IPv6 address that carries an IPv4 address (IPv4-mapped,
IPv4-translated, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`) is judged by that IPv4 address too, since a
gateway on the way turns it into a request to it. The request is then sent to that checked address,
with the original `Host` header and TLS server name, so a DNS answer that changes between the check and
the connection (DNS rebinding) cannot redirect it. `allow_private` lifts the address check for
development and tests only.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass

import httpx

from ._errors import UnsafeTargetError

__all__ = ["RESOLVE_TIMEOUT_S", "Target", "is_public_address", "resolve_target"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

RESOLVE_TIMEOUT_S = 5.0
"""How long resolving a webhook host may take."""

# Not globally routable, but `is_global` says otherwise on Python 3.11.
_NOT_GLOBAL_V4 = (ipaddress.IPv4Network("192.0.0.0/24"),)
# The deprecated IPv4-compatible ::/96, and NAT64 for local use (RFC 8215).
_NOT_GLOBAL_V6 = (ipaddress.IPv6Network("::/96"), ipaddress.IPv6Network("64:ff9b:1::/48"))
# Prefixes whose low 32 bits are an IPv4 address a translator will connect to.
_LOW_32_BITS_V4 = (ipaddress.IPv6Network("64:ff9b::/96"), ipaddress.IPv6Network("::ffff:0:0:0/96"))


@dataclass(frozen=True, slots=True)
class Target:
    """Where to send: `url` has the checked IP address as its host; `host` and `sni_hostname` keep the
    original name for the `Host` header and, for https to a host name, TLS (name and certificate check)."""

    url: httpx.URL
    host: str
    sni_hostname: str | None
    address: IPAddress


def _embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    embedded = [found for found in (address.ipv4_mapped, address.sixtofour) if found is not None]
    if any(address in network for network in _LOW_32_BITS_V4):
        embedded.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
    return embedded


def is_public_address(address: IPAddress) -> bool:
    """Whether `address` is globally routable unicast, and so is any IPv4 address embedded in it
    (IPv4-mapped, IPv4-translated, NAT64 and 6to4 forms)."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return is_public_address(address.ipv4_mapped)
        if any(address in network for network in _NOT_GLOBAL_V6):
            return False
        if not all(is_public_address(embedded) for embedded in _embedded_ipv4(address)):
            return False
    elif any(address in network for network in _NOT_GLOBAL_V4):
        return False
    return address.is_global and not address.is_multicast


async def resolve_target(
    url: str, *, allow_private: bool, resolve_timeout_s: float = RESOLVE_TIMEOUT_S
) -> Target:
    """Check `url` and pin it to one resolved address.

    Raises:
        UnsafeTargetError: the URL is not absolute http(s), its host does not resolve (within
            `resolve_timeout_s`), or (unless `allow_private`) any of its addresses is not public.
    """
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise UnsafeTargetError(f"not a valid URL: {exc}") from exc
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise UnsafeTargetError(f"webhook URLs must be absolute http(s) URLs, got scheme {parsed.scheme!r}")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    addresses = await _resolve(parsed.host, port, resolve_timeout_s)
    if not allow_private:
        refused = sorted({str(address) for address in addresses if not is_public_address(address)})
        if refused:
            raise UnsafeTargetError(f"{parsed.host} resolves to non-public address(es) {', '.join(refused)}")
    address = addresses[0]
    named = str(address) != parsed.host.strip("[]")
    return Target(
        url=parsed.copy_with(host=str(address)),
        host=parsed.netloc.decode("ascii"),
        sni_hostname=parsed.host if parsed.scheme == "https" and named else None,
        address=address,
    )


async def _resolve(host: str, port: int, timeout_s: float) -> list[IPAddress]:
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        async with asyncio.timeout(timeout_s):
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise UnsafeTargetError(f"cannot resolve {host}: {exc.strerror}") from exc
    except TimeoutError as exc:
        raise UnsafeTargetError(f"cannot resolve {host}: no answer within {timeout_s:g} s") from exc
    addresses: list[IPAddress] = []
    for _family, _type, _proto, _name, sockaddr in infos:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise UnsafeTargetError(f"{host} resolves to no address")
    return addresses

"""The SSRF guard: a webhook URL may only reach publicly routable addresses.

The host is resolved once (without blocking the event loop), every address it resolves to must be public
(not private, loopback, link-local, shared, multicast, reserved or unspecified, IPv4-mapped forms
included), and the request is then sent to that checked address, with the original `Host` header and TLS
server name, so a DNS answer that changes between the check and the connection (DNS rebinding) cannot
redirect it. `allow_private` lifts the address check for development and tests only.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass

import httpx

from ._errors import UnsafeTargetError

__all__ = ["Target", "is_public_address", "resolve_target"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True, slots=True)
class Target:
    """Where to send: `url` has the checked IP address as its host; `host` and `sni_hostname` keep the
    original name for the `Host` header and, for https to a host name, TLS (name and certificate check)."""

    url: httpx.URL
    host: str
    sni_hostname: str | None
    address: IPAddress


def is_public_address(address: IPAddress) -> bool:
    """Whether `address` is globally routable unicast (an IPv4-mapped IPv6 address is judged as IPv4)."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_global and not address.is_multicast


async def resolve_target(url: str, *, allow_private: bool) -> Target:
    """Check `url` and pin it to one resolved address.

    Raises:
        UnsafeTargetError: the URL is not absolute http(s), its host does not resolve, or (unless
            `allow_private`) any of its addresses is not public.
    """
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise UnsafeTargetError(f"not a valid URL: {exc}") from exc
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise UnsafeTargetError(f"webhook URLs must be absolute http(s) URLs, got scheme {parsed.scheme!r}")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    addresses = await _resolve(parsed.host, port)
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


async def _resolve(host: str, port: int) -> list[IPAddress]:
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise UnsafeTargetError(f"cannot resolve {host}: {exc.strerror}") from exc
    addresses: list[IPAddress] = []
    for _family, _type, _proto, _name, sockaddr in infos:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in addresses:
            addresses.append(address)
    if not addresses:
        raise UnsafeTargetError(f"{host} resolves to no address")
    return addresses

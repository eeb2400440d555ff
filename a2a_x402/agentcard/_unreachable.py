"""Why an HTTP request got no answer, in a few words for a person (`connection refused`).

httpx says only "All connection attempts failed" for a closed port, and its exceptions' names and reprs
are no words for a user. The payer, the conformance kit and the JWK Set fetch all say it this way.
"""

from __future__ import annotations

import os
import socket
import ssl

import httpx

__all__ = ["unreachable_reason"]


def unreachable_reason(exc: BaseException) -> str:
    """A short reason a request got no answer: the first timeout, TLS or OS error among its causes."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        if isinstance(link, TimeoutError | httpx.TimeoutException):
            return "no answer in time"
        if isinstance(link, socket.gaierror):
            return "its host name does not resolve"
        if isinstance(link, ssl.SSLCertVerificationError):
            return f"its TLS certificate is not trusted: {link.verify_message}"
        if isinstance(link, ssl.SSLError):
            return f"TLS failed: {(link.reason or 'handshake failed').lower().replace('_', ' ')}"
        if isinstance(link, OSError) and link.errno:
            return os.strerror(link.errno).lower()
        link = link.__cause__ or link.__context__
    return "no answer"

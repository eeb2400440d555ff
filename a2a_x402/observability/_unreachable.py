"""Why an operation got no answer, or failed, in a few words for a person (`connection refused`): never an
exception's class name or repr.

httpx says only "All connection attempts failed" for a closed port, aiohttp repeats the address and every
attempt's error, a database driver "Multiple exceptions: [Errno 111] Connect call failed ('127.0.0.1',
5432)", and exceptions' names and reprs are no words for a user. The payer, the conformance kit, the JWK
Set fetch, the JSON-RPC client, the webhook sender and `/readyz` all say it this way.
"""

from __future__ import annotations

import os
import re
import socket
import ssl
from collections.abc import Iterator

import httpx

__all__ = ["failure_reason", "unreachable_reason"]

_ERRNO = re.compile(r"\[Errno (\d+)\]")
# What a message may start with that names a class, not what happened: SQLAlchemy's "(module.Class) " and a
# wrapped "SomeError: ".
_CLASS_PREFIX = re.compile(r"^(?:\([\w.]+\)\s*|[A-Z]\w*(?:Error|Exception|Exit|Warning):\s*)+")


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc`, then what caused it, each once; an exception group's first member stands for the group."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        yield link
        if isinstance(link, BaseExceptionGroup) and link.exceptions:
            link = link.exceptions[0]
        else:
            link = link.__cause__ or link.__context__


def _unreachable(exc: BaseException) -> str | None:
    for found in _chain(exc):
        # aiohttp's connector error carries the OS error it met (its own errno is not always that one's).
        os_error = getattr(found, "os_error", None)
        link = os_error if isinstance(os_error, OSError) else found
        if isinstance(link, TimeoutError | httpx.TimeoutException):
            return "no answer in time"
        if isinstance(link, socket.gaierror):
            return "its host name does not resolve"
        if isinstance(link, ssl.SSLCertVerificationError):
            return f"its TLS certificate is not trusted: {link.verify_message}"
        if isinstance(link, ssl.SSLError):
            return f"TLS failed: {(link.reason or 'handshake failed').lower().replace('_', ' ')}"
        if isinstance(link, OSError):
            number = link.errno
            if not number:  # an error of several attempts gives each one's number in its text
                given = _ERRNO.search(str(link))
                number = int(given.group(1)) if given else None
            if number:
                return os.strerror(number).lower()
    return None


def unreachable_reason(exc: BaseException) -> str:
    """A short reason a request got no answer: the first timeout, TLS or OS error among its causes."""
    return _unreachable(exc) or "no answer"


def failure_reason(exc: BaseException) -> str:
    """Why `exc` happened, in words: `unreachable_reason`'s when one of its causes is a timeout, TLS or OS
    error; else the first line of the first message among it and its causes (a class named at its start
    left out), or, for a missing key, which one."""
    reason = _unreachable(exc)
    if reason is not None:
        return reason
    for link in _chain(exc):
        if isinstance(link, KeyError) and link.args:
            return f"{link.args[0]} is missing"
        lines = str(link).strip().splitlines()
        text = _CLASS_PREFIX.sub("", lines[0]).strip() if lines else ""
        if text:
            return text
    return "it failed without saying why"

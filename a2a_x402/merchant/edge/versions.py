"""A2A protocol version negotiation: the one place that decides which version a request is served in.

The rules (A2A §3.2.6, §3.6.2):

- the version travels in the `A2A-Version` header or, instead, in the `A2A-Version` query parameter; when
  both are present they must name the same `Major.Minor`, otherwise the request is refused (a client must
  never be served a version it did not unambiguously ask for);
- each of them is read in full: a header or query parameter repeated with values naming different versions
  (`?A2A-Version=1.0&A2A-Version=0.3`) is refused, never resolved by taking the first or the last;
- the value is `Major.Minor`; a patch part is tolerated and ignored, anything else (`1`, `v1.0`, `01.0`,
  `abc`) is malformed;
- an empty or missing value means `0.3`;
- a version this deployment does not serve (`1.7`, `2.0`, `0.2`, a malformed one) is answered with
  `VersionNotSupportedError` — unlike a2a-sdk 1.3, which compares only the major version and so would serve
  `1.7` as `1.0`.

`VersionNegotiator` applies the rules to a Starlette request once and remembers the outcome on the request,
so every route, the call-context builder and the card endpoint see the same answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import StrEnum

from a2a.utils.constants import VERSION_HEADER
from a2a.utils.errors import VersionNotSupportedError
from starlette.requests import Request

__all__ = ["ProtocolVersion", "VersionNegotiator", "negotiate_version"]

# No leading zeros: `01.0` is not a version a client can mean by accident. The patch part is ignored.
_VERSION = re.compile(r"(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})(?:\.(?:0|[1-9][0-9]{0,3}))?")
_DEFAULT = "0.3"
_STATE_KEY = "a2a_negotiated_version"


class ProtocolVersion(StrEnum):
    """An A2A protocol version (`Major.Minor`) the edge can serve."""

    V1_0 = "1.0"
    V0_3 = "0.3"


def _major_minor(text: str) -> str | None:
    match = _VERSION.fullmatch(text)
    return f"{int(match.group(1))}.{int(match.group(2))}" if match else None


def _one_value(values: list[str], where: str, supported: tuple[ProtocolVersion, ...]) -> str | None:
    """The single version named by every occurrence of `where`, or None when it is absent.

    Raises:
        VersionNotSupportedError: the occurrences name different versions.
    """
    texts = [value.strip() for value in values]
    if len({_major_minor(text) or text for text in texts}) > 1:
        raise VersionNotSupportedError(
            message=(
                f"the {VERSION_HEADER} {where} is repeated with different versions "
                f"({', '.join(map(repr, texts))}); send one"
            ),
            data={"requested": ",".join(texts), "supported": ",".join(supported)},
        )
    return texts[0] if texts else None


def negotiate_version(
    header: str | None, query: str | None, supported: Iterable[ProtocolVersion]
) -> ProtocolVersion:
    """The version to serve a request in, from its `A2A-Version` header and query parameter.

    Args:
        header: the `A2A-Version` header, or None when absent.
        query: the `A2A-Version` query parameter, or None when absent.
        supported: the versions this deployment serves.

    Returns:
        The negotiated version.

    Raises:
        VersionNotSupportedError: header and query disagree, the value is malformed, or the version is not
            served. Its `data` (the ErrorInfo metadata) names what was requested and what is supported.
    """
    served = tuple(supported)
    header_text, query_text = (header or "").strip(), (query or "").strip()
    listed = ",".join(served)
    if (
        header_text
        and query_text
        and (_major_minor(header_text) or header_text) != (_major_minor(query_text) or query_text)
    ):
        raise VersionNotSupportedError(
            message=(
                f"the {VERSION_HEADER} header ({header_text!r}) and query parameter ({query_text!r}) "
                "name different versions; send one"
            ),
            data={"requested": f"{header_text},{query_text}", "supported": listed},
        )
    requested = header_text or query_text or _DEFAULT
    major_minor = _major_minor(requested)
    if major_minor is None:
        raise VersionNotSupportedError(
            message=f"{VERSION_HEADER} {requested!r} is not a Major.Minor version; served: {listed}",
            data={"requested": requested, "supported": listed},
        )
    for version in served:
        if version.value == major_minor:
            return version
    raise VersionNotSupportedError(
        message=f"A2A version {requested!r} is not supported; this agent serves {listed}",
        data={"requested": requested, "supported": listed},
    )


class VersionNegotiator:
    """Negotiates the version of each request once, for every binding, route and the Agent Card."""

    def __init__(self, supported: Iterable[ProtocolVersion]) -> None:
        self.supported = tuple(supported)
        if not self.supported:
            raise ValueError("at least one protocol version must be served")

    @staticmethod
    def names_version(request: Request) -> bool:
        """Whether `request` names a version at all: a non-empty `A2A-Version` header or query parameter.

        A request that names none is served 0.3 like one naming `0.3`; only the Agent Card tells them apart
        (`_card_route`: such a request gets the card for clients of either version).
        """
        values = [*request.headers.getlist(VERSION_HEADER), *request.query_params.getlist(VERSION_HEADER)]
        return any(value.strip() for value in values)

    def version_of(self, request: Request) -> ProtocolVersion:
        """The version `request` is served in (remembered on the request).

        Raises:
            VersionNotSupportedError: the header or the query parameter is repeated with different values,
                or see `negotiate_version`; raised again on every call for the request.
        """
        outcome = request.scope.setdefault("state", {}).get(_STATE_KEY)
        if outcome is None:
            try:
                headers = request.headers.getlist(VERSION_HEADER)
                query = request.query_params.getlist(VERSION_HEADER)
                outcome = negotiate_version(
                    _one_value(headers, "header", self.supported),
                    _one_value(query, "query parameter", self.supported),
                    self.supported,
                )
            except VersionNotSupportedError as exc:
                outcome = exc
            request.scope["state"][_STATE_KEY] = outcome
        if isinstance(outcome, VersionNotSupportedError):
            raise outcome
        return ProtocolVersion(outcome)

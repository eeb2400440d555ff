"""What an A2A response says about how it was served: the version and the activated extensions.

Every response served in a negotiated version carries `A2A-Version: <Major.Minor>`. The extensions a
client asked for (`A2A-Extensions`; on A2A 0.3 also the legacy `X-A2A-Extensions`) are activated when the
Agent Card of that version declares them; exactly those are echoed in `A2A-Extensions` (and, for 0.3
clients, in `X-A2A-Extensions` too). A URI of another extension version is not activated and not echoed:
an agent must never fall back to a different version of an extension on its own (A2A §4.6).
"""

from __future__ import annotations

from collections.abc import Mapping

from a2a.extensions.common import HTTP_EXTENSION_HEADER, get_requested_extensions
from a2a.utils.constants import VERSION_HEADER
from starlette.requests import Request
from starlette.responses import Response

from .versions import ProtocolVersion

__all__ = ["LEGACY_EXTENSION_HEADER", "ProtocolEcho"]

LEGACY_EXTENSION_HEADER = f"X-{HTTP_EXTENSION_HEADER}"


class ProtocolEcho:
    """Stamps responses with the served version and the extensions activated for the request."""

    def __init__(self, declared: Mapping[ProtocolVersion, frozenset[str]]) -> None:
        self._declared = declared

    def activated(self, request: Request, version: ProtocolVersion) -> list[str]:
        """The extension URIs `request` asked for that the `version` card declares, sorted."""
        names = [HTTP_EXTENSION_HEADER]
        if version is ProtocolVersion.V0_3:
            names.append(LEGACY_EXTENSION_HEADER)
        requested = get_requested_extensions([v for name in names for v in request.headers.getlist(name)])
        return sorted(requested & self._declared.get(version, frozenset()))

    def stamp(self, response: Response, request: Request, version: ProtocolVersion) -> Response:
        """`response` with `A2A-Version` and the activated extensions set; returns it."""
        response.headers[VERSION_HEADER] = version.value
        activated = ",".join(self.activated(request, version))
        if activated:
            response.headers[HTTP_EXTENSION_HEADER] = activated
            if version is ProtocolVersion.V0_3:
                response.headers[LEGACY_EXTENSION_HEADER] = activated
        return response

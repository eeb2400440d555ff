"""Extension URIs and the choice of wire dialect.

Two dialects of the extension are spoken, one per A2A protocol version:

* ``Dialect.V03`` (extension v0.3, A2A 1.0): all extension data is one object under
  ``metadata[EXTENSION_URI]``; x402 values are x402 version 2.
* ``Dialect.V02`` (extension v0.2, A2A 0.3): flat ``x402.payment.*`` metadata keys; x402 values
  are x402 version 1 or 2.

The URI a client requests must match the protocol version it speaks. Following A2A's rule that
an agent must not fall back to another version of an extension on its own, a URI that does not
belong to the interface's protocol version is ignored, exactly like an unknown URI. The single
exception is the v0.1 URI: v0.1 and v0.2 share the flat-key wire form and the upstream Python
package still sends the v0.1 URI, so on an A2A 0.3 interface it selects ``Dialect.V02``. It is
never accepted on an A2A 1.0 interface, where flat keys are not spoken.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import StrEnum

__all__ = [
    "EXTENSION_URI",
    "EXTENSION_URI_V01",
    "EXTENSION_URI_V02",
    "Dialect",
    "negotiate_dialect",
]

EXTENSION_URI = "https://github.com/google-agentic-commerce/a2a-x402/blob/main/spec/v0.3"
"""Extension v0.3, for A2A 1.0 (proposed by this project)."""
EXTENSION_URI_V02 = "https://github.com/google-agentic-commerce/a2a-x402/blob/main/spec/v0.2"
"""Extension v0.2, the current upstream version, for A2A 0.3."""
EXTENSION_URI_V01 = "https://github.com/google-a2a/a2a-x402/v0.1"
"""Extension v0.1, still sent by the upstream Python package; read as v0.2 on A2A 0.3 only."""

# A2A sends Major.Minor; a patch part must not influence negotiation, so it is tolerated and ignored.
_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.\d+)?")
# A2A: "Servers MUST interpret an empty or missing value as 0.3".
_DEFAULT_PROTOCOL_VERSION = "0.3"


class Dialect(StrEnum):
    """The wire form of the extension, fixed by the A2A protocol version of the interface."""

    V03 = "v0.3"
    """Extension v0.3 on A2A 1.0: one object under ``metadata[EXTENSION_URI]``, x402 v2 values."""
    V02 = "v0.2"
    """Extension v0.2 on A2A 0.3: flat ``x402.payment.*`` keys, x402 v1 or v2 values."""

    @property
    def uri(self) -> str:
        """The URI to declare in the Agent Card and list in ``Message.extensions`` for this dialect."""
        return EXTENSION_URI if self is Dialect.V03 else EXTENSION_URI_V02

    @property
    def a2a_version(self) -> str:
        """The A2A protocol version (``Major.Minor``) this dialect is spoken on."""
        return "1.0" if self is Dialect.V03 else "0.3"


def negotiate_dialect(requested_extensions: Iterable[str], protocol_version: str | None) -> Dialect | None:
    """Return the dialect in use for a request, or ``None`` when the extension is not active.

    Args:
        requested_extensions: the URIs the client listed in ``A2A-Extensions`` (or
            ``X-A2A-Extensions``), e.g. ``RequestContext.requested_extensions``. URIs are compared
            exactly after trimming surrounding whitespace; unknown ones are ignored.
        protocol_version: the request's ``A2A-Version``; ``None`` or empty means ``0.3``, as A2A
            requires. Any ``1.x`` selects A2A 1.0 (only the major version is compared, as a2a-sdk
            does).

    Returns:
        ``Dialect.V03`` for an A2A 1.0 request that lists ``EXTENSION_URI``; ``Dialect.V02`` for an
        A2A 0.3 request that lists ``EXTENSION_URI_V02`` or ``EXTENSION_URI_V01``; otherwise
        ``None``. Protocol versions the extension has no dialect for (malformed, ``0.2``, ``2.0``)
        also give ``None``: rejecting an unsupported A2A version is the interface's job.
    """
    requested = frozenset(uri.strip() for uri in requested_extensions)
    match _protocol_family(protocol_version):
        case "1.0" if EXTENSION_URI in requested:
            return Dialect.V03
        case "0.3" if EXTENSION_URI_V02 in requested or EXTENSION_URI_V01 in requested:
            return Dialect.V02
        case _:
            return None


def _protocol_family(protocol_version: str | None) -> str | None:
    text = (protocol_version or "").strip() or _DEFAULT_PROTOCOL_VERSION
    match = _VERSION.fullmatch(text)
    if match is None:
        return None
    major, minor = int(match.group(1)), int(match.group(2))
    if major == 1:
        return "1.0"
    if (major, minor) == (0, 3):
        return "0.3"
    return None

"""The error family of the extension's wire contract.

Every problem found while reading or writing extension metadata is an
``ExtensionMetadataError``; nothing else escapes ``decode`` or ``encode``::

    ValueError
     └── ExtensionMetadataError   .code: MetadataErrorCode, .path: str

``code`` is stable and meant for tables that map it to a JSON-RPC or HTTP answer;
the message is for people and names the offending field by its path, e.g.
``metadata['x402.payment.payload'].accepted.network``.
"""

from __future__ import annotations

import re
from enum import StrEnum

__all__ = ["ExtensionMetadataError", "MetadataErrorCode"]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Keys longer than this are cut in paths so that an oversized key cannot make the error huge.
_MAX_KEY_IN_PATH = 80


class MetadataErrorCode(StrEnum):
    """Stable codes of ``ExtensionMetadataError``."""

    INVALID_TYPE = "invalid_type"
    """A value has the wrong JSON type (e.g. a string where an object is required)."""
    MISSING_FIELD = "missing_field"
    """A field the status requires is absent."""
    UNKNOWN_FIELD = "unknown_field"
    """A field that this extension version does not define."""
    UNEXPECTED_FIELD = "unexpected_field"
    """A defined field that the given status does not allow (e.g. ``payload`` on ``payment-required``)."""
    UNKNOWN_STATUS = "unknown_status"
    """``status`` is not one of the six payment statuses."""
    UNKNOWN_ERROR_CODE = "unknown_error_code"
    """``error`` is not one of the seven payment error codes."""
    DIALECT_MISMATCH = "dialect_mismatch"
    """Metadata written in the other extension version's form (flat v0.2 keys on A2A 1.0, or the reverse)."""
    X402_VERSION_MISMATCH = "x402_version_mismatch"
    """An x402 value whose ``x402Version`` this dialect does not carry."""
    INVALID_X402_VALUE = "invalid_x402_value"
    """An x402 value that does not validate against its x402 wire type."""
    INVALID_NUMBER = "invalid_number"
    """A fraction where an integer is needed, NaN or infinity, or an integral float of 2**53 or more."""
    TOO_LARGE = "too_large"
    """The extension data exceeds the size, depth or string-length limits."""
    INCONSISTENT_CONTENT = "inconsistent_content"
    """Well-formed fields that contradict the status (``payment-completed`` without a successful receipt)."""


class ExtensionMetadataError(ValueError):
    """Extension metadata that cannot be read or written.

    Attributes:
        code: the stable machine-readable reason.
        path: where in the metadata the problem is, empty when it concerns the whole value.
        detail: the human-readable reason without the path.
    """

    def __init__(self, code: MetadataErrorCode, detail: str, path: str = "") -> None:
        self.code = code
        self.path = path
        self.detail = detail
        super().__init__(f"{path}: {detail}" if path else detail)

    def __repr__(self) -> str:
        return f"ExtensionMetadataError(code={self.code.value!r}, path={self.path!r}, detail={self.detail!r})"


def child_path(path: str, key: str | int) -> str:
    """Return the path of ``key`` (an object key or a list index) below ``path``."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    if _IDENTIFIER.fullmatch(key) and len(key) <= _MAX_KEY_IN_PATH:
        return f"{path}.{key}" if path else key
    shown = key if len(key) <= _MAX_KEY_IN_PATH else key[:_MAX_KEY_IN_PATH] + "…"
    return f"{path}[{shown!r}]"

"""Reading the user's open AP2 mandates and the merchant's JWTs without the SDK: the payer's own view of
its user's tokens (the signatures are the merchant's to check), used to check their constraints and to
present only the disclosures a payment needs."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from a2a_x402.extension import ap2_digest

from ._errors import MandateConstraintError

__all__ = ["OpenToken", "jwt_claims"]


@dataclass(frozen=True, slots=True)
class OpenToken:
    """An open mandate as issued: its token, its claims (disclosures resolved) and its disclosures."""

    token: str
    kind: str
    claims: Mapping[str, Any]
    disclosures: tuple[str, ...]
    # For each disclosure of an element of a constraint's array: the constraint's type and the value.
    elements: Mapping[str, tuple[str, Any]]

    @classmethod
    def read(cls, token: str, vct: str, kind: str) -> OpenToken:
        """The payer reads its own user's mandate: the signature is the merchant's to check."""
        if not token.isascii():
            raise MandateConstraintError("form", f"the open {kind} mandate is not an SD-JWT")
        jwt, *rest = token.split("~")
        disclosures = tuple(part for part in rest if part)
        values: dict[str, Any] = {}
        for disclosure in disclosures:
            decoded = _b64_json(disclosure, f"a disclosure of the open {kind} mandate")
            if not isinstance(decoded, list) or len(decoded) not in (2, 3):
                raise MandateConstraintError(kind, f"the open {kind} mandate has a malformed disclosure")
            values[ap2_digest(disclosure)] = decoded
        payload = jwt_claims(jwt, f"the open {kind} mandate")
        items = _resolve(payload.get("delegate_payload"), values)
        mandates = [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []
        if len(mandates) != 1 or mandates[0].get("vct") != vct:
            raise MandateConstraintError(kind, f"the open {kind} mandate is not a {vct}")
        elements: dict[str, tuple[str, Any]] = {}
        # The mandate as disclosed, its arrays' elements still digests: which disclosure is which element.
        raw_mandate = next(
            (d[-1] for d in values.values() if isinstance(d[-1], dict) and d[-1].get("vct") == vct), {}
        )
        for constraint in raw_mandate.get("constraints", ()):
            if not isinstance(constraint, dict):
                continue
            for array in constraint.values():
                for digest in _placeholders(array):
                    if digest in values:
                        elements[digest] = (str(constraint.get("type")), values[digest][-1])
        by_digest = {ap2_digest(disclosure): disclosure for disclosure in disclosures}
        return cls(token, kind, mandates[0], disclosures, {by_digest[d]: v for d, v in elements.items()})

    def trimmed(self, keep: Callable[[str, Any], bool]) -> str:
        """The token with only the disclosures of constraint elements ``keep(type, value)`` wants."""
        kept = [
            disclosure
            for disclosure in self.disclosures
            if disclosure not in self.elements or keep(*self.elements[disclosure])
        ]
        return self.token.split("~", 1)[0] + "~" + "".join(part + "~" for part in kept)


def _placeholders(value: Any) -> list[str]:
    """The digests of the selectively disclosed elements anywhere under ``value``."""
    if isinstance(value, dict):
        if set(value) == {"..."} and isinstance(value["..."], str):
            return [value["..."]]
        return [digest for item in value.values() for digest in _placeholders(item)]
    if isinstance(value, list):
        return [digest for item in value for digest in _placeholders(item)]
    return []


def _resolve(value: Any, values: Mapping[str, list[Any]]) -> Any:
    """``value`` with its disclosed elements and members in place and undisclosed ones left out."""
    if isinstance(value, list):
        resolved = []
        for item in value:
            if isinstance(item, dict) and set(item) == {"..."}:
                if item["..."] in values:
                    resolved.append(_resolve(values[item["..."]][-1], values))
                continue
            resolved.append(_resolve(item, values))
        return resolved
    if isinstance(value, dict):
        members = {
            key: _resolve(item, values) for key, item in value.items() if key not in ("_sd", "_sd_alg")
        }
        for digest in value.get("_sd", ()):
            decoded = values.get(digest)
            if decoded is not None and len(decoded) == 3:
                members[decoded[1]] = _resolve(decoded[2], values)
        return members
    return value


def jwt_claims(jwt: str, what: str) -> dict[str, Any]:
    """The claims of the compact JWS ``jwt``, not verified; a ``MandateConstraintError`` about ``what``."""
    parts = jwt.split(".")
    if len(parts) != 3:
        raise MandateConstraintError("form", f"{what} is not a compact JWS")
    claims = _b64_json(parts[1], what)
    if not isinstance(claims, dict):
        raise MandateConstraintError("form", f"{what} has no claims object")
    return claims


def _b64_json(segment: str, what: str) -> Any:
    try:
        return json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    except (binascii.Error, ValueError, RecursionError):
        raise MandateConstraintError("form", f"{what} is not base64url JSON") from None

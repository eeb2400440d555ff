"""What a client must present, on the Agent Card: `securitySchemes` and `securityRequirements` (A2A 1.0
§4.5; the 0.3 card's `securitySchemes` and `security` are converted from them by the SDK).

Both schemes are HTTP bearer (RFC 6750), told apart by `bearerFormat`: `apiKey` is a key the merchant
issued (`x402-merchant callers create`), `bearerJwt` a JWT of an issuer trusted at the tenant. Each scheme
is one alternative requirement; when the tenants the card speaks for serve callers without credentials,
the empty requirement `{}` is one more (no credential needed), and only then.
"""

from __future__ import annotations

from collections.abc import Sequence

from a2a.types import AgentCard, HTTPAuthSecurityScheme, SecurityScheme

from a2a_x402.merchant.callers import API_KEY_SCHEME, JWT_SCHEME

__all__ = ["declare_security"]

_SCHEMES = {
    API_KEY_SCHEME: HTTPAuthSecurityScheme(
        scheme="Bearer",
        bearer_format="x402k",
        description=(
            "An API key issued to the client by the merchant's operator (x402-merchant callers create), "
            "sent as Authorization: Bearer <key>; valid at the tenant it was issued at. A caller sees only "
            "its own tasks."
        ),
    ),
    JWT_SCHEME: HTTPAuthSecurityScheme(
        scheme="Bearer",
        bearer_format="JWT",
        description=(
            "An access token (OAuth 2.0 client credentials or OpenID Connect) of an issuer trusted at this "
            "tenant (the root card: at one of the tenants), for its audience, sent as Authorization: Bearer "
            "<jwt>. The caller is the "
            "token's iss and sub, and sees only its own tasks."
        ),
    ),
}
_ANONYMOUS = (
    " Without credentials a caller reaches a task only by its id and lists only within a contextId it names."
)


def declare_security(card: AgentCard, schemes: Sequence[str], *, anonymous: bool) -> None:
    """Declare `schemes` (names of `callers` schemes) on `card`, plus the empty requirement if `anonymous`.

    Raises:
        ValueError: a scheme name is not one the merchant knows.
    """
    for name in schemes:
        if name not in _SCHEMES:
            raise ValueError(f"unknown security scheme {name!r}")
        declared = HTTPAuthSecurityScheme()
        declared.CopyFrom(_SCHEMES[name])
        if anonymous:
            declared.description += _ANONYMOUS
        card.security_schemes[name].CopyFrom(SecurityScheme(http_auth_security_scheme=declared))
        card.security_requirements.add().schemes[name].SetInParent()
    if schemes and anonymous:
        card.security_requirements.add()

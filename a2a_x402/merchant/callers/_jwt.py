"""Bearer JWTs of an issuer the merchant trusts (OAuth 2.0 client credentials, OpenID Connect).

A token is accepted when it is a compact JWS signed with an asymmetric algorithm of `ALLOWED_ALGORITHMS`
(never `none`, never an HMAC: the issuer's key is public, so an HMAC over it would be anyone's) by a key of
the issuer's JWK Set named by the header's `kid`, and its claims say: `iss` is the issuer, `aud` contains
the audience, `exp` is in the future and `nbf`/`iat` are not (each with `leeway_s`), and `sub` is set. The
principal is `jwt:<iss>#<sub>`, so two issuers' subjects never share tasks.

Keys come from `agentcard.JwksCache`: fetched with a timeout and a size limit, cached for a TTL, fetched
again for an unknown `kid` at most once per `min_refetch_interval_s`. Every refusal is `CredentialRefused`
whose message is for the log: it names the reason, never the token.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwt import JWTClaimsRegistry

from a2a_x402.agentcard import AgentCardError, JwksCache

from ._caller import Caller, CredentialRefused

__all__ = ["ALLOWED_ALGORITHMS", "JWT_SCHEME", "JwtIssuer", "JwtVerifier", "unverified_issuer"]

ALLOWED_ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
"""The signature algorithms a bearer JWT may use: public-key ones only."""
JWT_SCHEME = "bearerJwt"
"""The name of the JWT security scheme on the Agent Card."""

_MAX_TOKEN_CHARS = 8192


@dataclass(frozen=True, slots=True)
class JwtIssuer:
    """An issuer whose tokens are accepted.

    Attributes:
        issuer: the exact `iss` its tokens carry.
        audience: the `aud` a token must contain to be meant for this merchant.
        jwks_url: where its JWK Set is published (https, or http on loopback in development).
        tenants: the tenants its callers may use, or None for every tenant.
        leeway_s: clock skew allowed on `exp`, `nbf` and `iat`.
    """

    issuer: str
    audience: str
    jwks_url: str
    tenants: frozenset[str] | None = None
    leeway_s: int = 30


def _segments(token: str) -> list[str]:
    segments = token.split(".")
    if len(token) > _MAX_TOKEN_CHARS or len(segments) != 3:
        raise CredentialRefused("not a compact JWS")
    return segments


def _json_segment(segment: str) -> dict[str, object]:
    try:
        decoded = json.loads(base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4)))
    except (ValueError, UnicodeDecodeError) as exc:
        raise CredentialRefused("a JWT segment is not base64url JSON") from exc
    if not isinstance(decoded, dict):
        raise CredentialRefused("a JWT segment is not a JSON object")
    return decoded


def unverified_issuer(token: str) -> str | None:
    """The `iss` a token claims, read before any verification, to pick the issuer that must verify it."""
    issuer = _json_segment(_segments(token)[1]).get("iss")
    return issuer if isinstance(issuer, str) else None


class JwtVerifier:
    """Verifies the bearer JWTs of one issuer (see the module)."""

    def __init__(self, issuer: JwtIssuer, keys: JwksCache) -> None:
        self.issuer = issuer
        self._keys = keys

    async def verify(self, token: str) -> Caller:
        """The caller `token` authenticates.

        Raises:
            CredentialRefused: anything about the token or its key is wrong (the reason, without the token).
        """
        header = _json_segment(_segments(token)[0])
        alg, kid = header.get("alg"), header.get("kid")
        if not isinstance(alg, str) or alg not in ALLOWED_ALGORITHMS:
            raise CredentialRefused(f"JWT algorithm {str(alg)[:20]!r} is not accepted")
        if not isinstance(kid, str) or not kid:
            raise CredentialRefused("the JWT names no key (kid)")
        try:
            key = await self._keys.get_key(self.issuer.jwks_url, kid)
        except AgentCardError as exc:
            reason = f"no usable key {kid[:64]!r} of issuer {self.issuer.issuer}: {exc}"
            raise CredentialRefused(reason) from None
        if key.alg is not None and key.alg != alg:
            raise CredentialRefused(f"key {kid[:64]!r} is for {key.alg}, not {alg}")
        try:
            decoded = jwt.decode(token, key.key, algorithms=[alg])
            registry = JWTClaimsRegistry(
                leeway=self.issuer.leeway_s,
                iss={"essential": True, "value": self.issuer.issuer},
                aud={"essential": True, "value": self.issuer.audience},
                exp={"essential": True},
                sub={"essential": True},
            )
            registry.validate(decoded.claims)
        except (JoseError, ValueError) as exc:
            reason = f"JWT of issuer {self.issuer.issuer} refused: {type(exc).__name__}"
            raise CredentialRefused(reason) from None
        subject = decoded.claims["sub"]
        if not isinstance(subject, str) or not subject:
            raise CredentialRefused("the JWT's sub is not a string")
        return Caller(
            principal=f"jwt:{self.issuer.issuer}#{subject}",
            scheme=JWT_SCHEME,
            tenants=self.issuer.tenants,
        )

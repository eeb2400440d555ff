"""From a request's `Authorization` to its caller: an API key, a bearer JWT of a trusted issuer, or nobody.

Both are presented as `Authorization: Bearer <token>` (RFC 6750). A token beginning with `x402k_` is an
API key (`CallerKeys`); any other is read as a JWT and verified by the issuer it names (`JwtVerifier`). No
header means an anonymous caller. Anything else presented (another scheme, an unknown, revoked or expired
token, an issuer not trusted) is `CredentialRefused`: a caller that meant to authenticate is never served
as anonymous instead.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ._caller import Caller, CredentialRefused
from ._jwt import JWT_SCHEME, JwtVerifier, unverified_issuer
from ._keys import API_KEY_PREFIX, API_KEY_SCHEME, CallerKeys

__all__ = ["Authenticator"]

logger = logging.getLogger(__name__)

_BEARER = "bearer"
_MAX_HEADER_CHARS = 8192


class Authenticator:
    """Authenticates callers with the API keys in `keys` and the JWTs of `issuers` (see the module)."""

    def __init__(self, keys: CallerKeys | None, issuers: Sequence[JwtVerifier] = ()) -> None:
        self._keys = keys
        self._issuers = {verifier.issuer.issuer: verifier for verifier in issuers}

    @property
    def accepts_api_keys(self) -> bool:
        """Whether API keys are accepted."""
        return self._keys is not None

    @property
    def schemes(self) -> tuple[str, ...]:
        """The names of the security schemes accepted (`API_KEY_SCHEME`, `JWT_SCHEME`), for the card."""
        return (API_KEY_SCHEME,) * (self._keys is not None) + (JWT_SCHEME,) * bool(self._issuers)

    @property
    def issuers(self) -> tuple[JwtVerifier, ...]:
        """The JWT issuers trusted."""
        return tuple(self._issuers.values())

    async def authenticate(self, authorization: str | None) -> Caller | None:
        """The caller an `Authorization` header value authenticates; None when there is none (anonymous).

        Raises:
            CredentialRefused: a credential is presented and authenticates nobody.
        """
        if authorization is None:
            return None
        try:
            return await self._authenticate(authorization)
        except CredentialRefused as exc:
            logger.info("credential refused: %s", exc)
            raise

    async def _authenticate(self, authorization: str) -> Caller:
        if len(authorization) > _MAX_HEADER_CHARS:
            raise CredentialRefused("the Authorization header is too long")
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != _BEARER or not token:
            raise CredentialRefused("the Authorization header is not a Bearer credential")
        if token.startswith(API_KEY_PREFIX):
            caller = await self._keys.authenticate(token) if self._keys is not None else None
            if caller is None:
                raise CredentialRefused("unknown or revoked API key")
            return caller
        issuer = unverified_issuer(token)
        verifier = self._issuers.get(issuer) if issuer is not None else None
        if verifier is None:
            raise CredentialRefused(f"JWT of an issuer not trusted: {str(issuer)[:100]!r}")
        return await verifier.verify(token)

"""From a request's `Authorization` to its caller: an API key, a bearer JWT of a trusted issuer, or nobody.

Both are presented as `Authorization: Bearer <token>` (RFC 6750). A token beginning with `x402k_` is an
API key (`CallerKeys`); any other is read as a JWT and verified by the issuer it names (`JwtVerifier`). No
header means an anonymous caller. Anything else presented (another scheme, an unknown, revoked or expired
token, an issuer not trusted) is `CredentialRefused`: a caller that meant to authenticate is never served
as anonymous instead.

One `iss` may be trusted more than once (the merchant-wide issuer and a tenant's own, or two tenants'
with different audiences or key sets): the token is checked by each, and the caller's credential is valid
at the tenants of every one that accepts it (`Caller.tenants`), so a tenant's own issuer opens no other
tenant.

A request's refused credentials are counted per client network (`observability.FailureThrottle`, one count
for every binding): past its limit a wrong one is `CredentialThrottled` (the edge answers 429 or
RESOURCE_EXHAUSTED), while a right one is still accepted from there.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from a2a_x402.observability import FailureThrottle

from ._caller import Caller, CredentialRefused, CredentialThrottled
from ._jwt import JWT_SCHEME, JwtVerifier, unverified_issuer
from ._keys import API_KEY_PREFIX, API_KEY_SCHEME, CallerKeys

__all__ = ["Authenticator"]

logger = logging.getLogger(__name__)

_BEARER = "bearer"
_MAX_HEADER_CHARS = 8192
# The throttle's key: a caller's credential names no tenant before it is read, so one count per client.
_CALLERS = "a2a-callers"


class Authenticator:
    """Authenticates callers with the API keys in `keys` and the JWTs of `issuers` (see the module)."""

    def __init__(
        self,
        keys: CallerKeys | None,
        issuers: Sequence[JwtVerifier] = (),
        *,
        throttle: FailureThrottle | None = None,
    ) -> None:
        self._keys = keys
        self._throttle = FailureThrottle() if throttle is None else throttle
        self._issuers: dict[str, list[JwtVerifier]] = {}
        for verifier in issuers:
            self._issuers.setdefault(verifier.issuer.issuer, []).append(verifier)

    @property
    def accepts_api_keys(self) -> bool:
        """Whether API keys are accepted."""
        return self._keys is not None

    @property
    def schemes(self) -> tuple[str, ...]:
        """The names of the security schemes accepted (`API_KEY_SCHEME`, `JWT_SCHEME`), for the card."""
        return (API_KEY_SCHEME,) * (self._keys is not None) + (JWT_SCHEME,) * bool(self._issuers)

    def schemes_at(self, tenant: str) -> tuple[str, ...]:
        """The security schemes a caller can authenticate with at `tenant`, for that tenant's card: API
        keys (issued per tenant) and bearer JWTs when an issuer trusted there exists."""
        jwt_here = any(
            verifier.issuer.tenants is None or tenant in verifier.issuer.tenants
            for verifiers in self._issuers.values()
            for verifier in verifiers
        )
        return (API_KEY_SCHEME,) * (self._keys is not None) + (JWT_SCHEME,) * jwt_here

    @property
    def issuers(self) -> tuple[JwtVerifier, ...]:
        """The JWT issuers trusted."""
        return tuple(verifier for verifiers in self._issuers.values() for verifier in verifiers)

    async def authenticate_request(self, values: Sequence[str], *, address: str) -> Caller | None:
        """The caller a request's `Authorization` values (HTTP headers, or gRPC metadata) authenticate;
        None when there are none (anonymous). Each refusal is counted for the client `address`.

        Raises:
            CredentialThrottled: the credential is refused, and `address` presented too many lately.
            CredentialRefused: the credential authenticates nobody, or more than one was sent.
        """
        if not values:
            return None
        try:
            if len(values) > 1:
                raise CredentialRefused("more than one Authorization value")
            if not values[0].isascii():
                raise CredentialRefused("the Authorization value is not ASCII")
            return await self.authenticate(values[0])
        except CredentialRefused as exc:
            seconds = self._throttle.failed(_CALLERS, address)
            if seconds is not None:
                raise CredentialThrottled(seconds) from exc
            raise

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
        verifiers = self._issuers.get(issuer, []) if issuer is not None else []
        if not verifiers:
            raise CredentialRefused(f"JWT of an issuer not trusted: {str(issuer)[:100]!r}")
        return await _verify_by_all(verifiers, token)


async def _verify_by_all(verifiers: Sequence[JwtVerifier], token: str) -> Caller:
    """The caller every verifier of one `iss` that accepts `token` agrees on, valid at all their tenants."""
    accepted: list[Caller] = []
    first_refusal: CredentialRefused | None = None
    for verifier in verifiers:
        try:
            accepted.append(await verifier.verify(token))
        except CredentialRefused as exc:
            first_refusal = first_refusal or exc
    if not accepted:
        raise first_refusal or CredentialRefused("no issuer to verify the JWT")
    if any(caller.tenants is None for caller in accepted):
        tenants = None
    else:
        tenants = frozenset().union(*(caller.tenants or () for caller in accepted))
    return Caller(principal=accepted[0].principal, scheme=accepted[0].scheme, tenants=tenants)

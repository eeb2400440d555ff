"""Who calls the merchant: API keys issued per client and bearer JWTs of trusted issuers.

- `Authenticator`: an `Authorization` header to a `Caller` (or None: anonymous), or `CredentialRefused`.
- `CallerKeys`: the API keys (table `callers`, migration m0011): created (shown once), listed, revoked.
- `JwtIssuer` / `JwtVerifier`: an issuer's tokens checked against its JWK Set (signature, iss, aud, exp).
- `merge_issuers`: the merchant-wide issuer and the tenants' own, one entry per issuer and audience.
- `Caller`: the authenticated principal, as the a2a-sdk `User` of a call context.
"""

from __future__ import annotations

from ._authenticator import Authenticator
from ._caller import Caller, CredentialRefused, caller_of, valid_at
from ._issuers import merge_issuers
from ._jwt import ALLOWED_ALGORITHMS, JWT_SCHEME, JwtIssuer, JwtVerifier
from ._keys import API_KEY_PREFIX, API_KEY_SCHEME, CallerKey, CallerKeyError, CallerKeys, token_digest

__all__ = [
    "ALLOWED_ALGORITHMS",
    "API_KEY_PREFIX",
    "API_KEY_SCHEME",
    "JWT_SCHEME",
    "Authenticator",
    "Caller",
    "CallerKey",
    "CallerKeyError",
    "CallerKeys",
    "CredentialRefused",
    "JwtIssuer",
    "JwtVerifier",
    "caller_of",
    "merge_issuers",
    "token_digest",
    "valid_at",
]

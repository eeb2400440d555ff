"""Who calls the merchant: API keys issued per client and bearer JWTs of trusted issuers.

- `Authenticator`: an `Authorization` header to a `Caller` (or None: anonymous), or `CredentialRefused`
  (`CredentialThrottled` for a client that presented too many wrong ones lately).
- `CallerKeys`: the API keys (table `callers`, migration m0011): created (shown once), listed, revoked.
- `JwtIssuer` / `JwtVerifier`: an issuer's tokens checked against its JWK Set (signature, iss, aud, exp).
- `merge_issuers`: the merchant-wide issuer and the tenants' own, one entry per issuer and audience.
- `Caller`: the authenticated principal, as the a2a-sdk `User` of a call context.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import lazy_loader

# Each name is imported from its module on first use (PEP 562), so that a command (or a package)
# importing one of them does not start the others' dependencies.
if TYPE_CHECKING:
    from ._authenticator import Authenticator
    from ._caller import Caller, CredentialRefused, CredentialThrottled, caller_of, valid_at
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
    "CredentialThrottled",
    "JwtIssuer",
    "JwtVerifier",
    "caller_of",
    "merge_issuers",
    "token_digest",
    "valid_at",
]

_EXPORTS = {
    "_authenticator": ("Authenticator",),
    "_caller": ("Caller", "CredentialRefused", "CredentialThrottled", "caller_of", "valid_at"),
    "_issuers": ("merge_issuers",),
    "_jwt": ("ALLOWED_ALGORITHMS", "JWT_SCHEME", "JwtIssuer", "JwtVerifier"),
    "_keys": (
        "API_KEY_PREFIX",
        "API_KEY_SCHEME",
        "CallerKey",
        "CallerKeyError",
        "CallerKeys",
        "token_digest",
    ),
}
if not TYPE_CHECKING:  # type checkers read the imports above, and so still refuse a name not exported
    __getattr__, __dir__, _ = lazy_loader.attach(__name__, submod_attrs=_EXPORTS)

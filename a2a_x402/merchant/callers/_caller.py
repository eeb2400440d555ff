"""Who made a request: an authenticated caller (its principal), or nobody (anonymous).

A `Caller` is both an a2a-sdk `User` (the call context's `user`, whose `user_name` the task store's owner
key is made of) and a Starlette `BaseUser` (what the authentication middleware puts on the request scope,
where the SDK's context builder takes it from). Its `principal` names the client and never holds a secret:
`key:<name>` for an API key, `jwt:<iss>#<sub>` for a bearer JWT.
"""

from __future__ import annotations

from dataclasses import dataclass

from a2a.auth.user import User
from starlette.authentication import BaseUser

__all__ = ["Caller", "CredentialRefused", "CredentialThrottled", "caller_of", "valid_at"]


class CredentialRefused(Exception):
    """The request presented a credential that authenticates nobody (unknown, revoked, expired, malformed,
    wrong issuer or audience). Its message is for the server log and never holds the credential; the
    client is told only that the credential is refused, whichever the reason (no oracle)."""


class CredentialThrottled(CredentialRefused):
    """A refused credential from a client that presented too many lately: answered 429 (gRPC:
    RESOURCE_EXHAUSTED), to retry after `retry_after_s` seconds. A right one is never throttled."""

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(f"too many refused credentials from this address: try again in {retry_after_s} s")
        self.retry_after_s = retry_after_s


@dataclass(frozen=True, slots=True)
class Caller(User, BaseUser):
    """An authenticated caller.

    Attributes:
        principal: the name its tasks belong to within a tenant (no secret in it).
        scheme: the security scheme it authenticated with (a name the Agent Card declares).
        tenants: the tenants its credential is valid at (an API key's: the one it was issued at), or None
            for every tenant.
    """

    principal: str
    scheme: str
    tenants: frozenset[str] | None = None

    @property
    def is_authenticated(self) -> bool:
        """Always True."""
        return True

    @property
    def user_name(self) -> str:
        """The principal (a2a-sdk `User`)."""
        return self.principal

    @property
    def display_name(self) -> str:
        """The principal (Starlette `BaseUser`)."""
        return self.principal

    @property
    def identity(self) -> str:
        """The principal (Starlette `BaseUser`)."""
        return self.principal


def caller_of(user: object) -> Caller | None:
    """The authenticated caller `user` is, or None for an anonymous one."""
    return user if isinstance(user, Caller) else None


def valid_at(caller: Caller, tenant: str) -> bool:
    """Whether `caller`'s credential is valid at `tenant`."""
    return caller.tenants is None or tenant in caller.tenants

"""The call context every A2A request is handled with, carrying the version the edge negotiated.

The SDK's handlers validate `A2A-Version` from the headers the builder copies into
`ServerCallContext.state["headers"]`, comparing only the major version; the payment layer reads
`state[NEGOTIATED_VERSION_KEY]`. This builder writes the negotiated `Major.Minor` into both, so a version
that came as a query parameter, or with a patch part, reaches them exactly as negotiated. The routes refuse
a request whose version cannot be negotiated before a context is ever built. The A2A error the handlers raise
for the call can be read back from the request (`_failures`). On a tenant's own URLs (`tenant_from_path`)
the URL's `tenant` path parameter is the request's tenant (`_tenancy.URL_TENANT_KEY`). The user is the
`callers.Caller` the authentication middleware found (`_authn`), or anonymous.
"""

from __future__ import annotations

from a2a.auth.user import UnauthenticatedUser, User
from a2a.server.context import ServerCallContext
from a2a.server.routes import DefaultServerCallContextBuilder
from a2a.utils.constants import VERSION_HEADER
from starlette.requests import Request

from a2a_x402.merchant.callers import caller_of
from a2a_x402.merchant.payments import CLIENT_ADDRESS_KEY, NEGOTIATED_VERSION_KEY

from ._failures import open_failure_slot
from ._tenancy import URL_TENANT_KEY
from .versions import VersionNegotiator

__all__ = ["EdgeCallContextBuilder"]

_HEADERS_VERSION_KEY = VERSION_HEADER.lower()  # Starlette header keys are lowercase
_SECRET_HEADERS = ("authorization", "cookie", "proxy-authorization")


class EdgeCallContextBuilder(DefaultServerCallContextBuilder):
    """The SDK's default context (user, headers, requested extensions) with the negotiated version."""

    def __init__(self, negotiator: VersionNegotiator, *, tenant_from_path: bool = False) -> None:
        self._negotiator = negotiator
        self._tenant_from_path = tenant_from_path

    def build(self, request: Request) -> ServerCallContext:
        """Build the call context for `request`; the tenant is filled in afterwards by the SDK dispatchers,
        or with `tenant_from_path` taken from the URL here (and kept by the tenant gate).

        Raises:
            VersionNotSupportedError: the request's version cannot be negotiated.
        """
        version = self._negotiator.version_of(request)
        context = super().build(request)
        # The SDK logs the call context (its headers included) at DEBUG: the credential must not be there.
        # It has been authenticated already (`_authn`); the caller is the context's user.
        for name in _SECRET_HEADERS:
            context.state["headers"].pop(name, None)
        context.state["headers"][_HEADERS_VERSION_KEY] = version.value
        context.state[NEGOTIATED_VERSION_KEY] = version.value
        if request.client is not None:
            # Whom an anonymous caller's unpaid work counts against (`merchant.payments.caller_of`).
            context.state[CLIENT_ADDRESS_KEY] = request.client.host
        open_failure_slot(request, context)
        if self._tenant_from_path:
            context.tenant = context.state[URL_TENANT_KEY] = str(request.path_params["tenant"])
        return context

    def build_user(self, request: Request) -> User:
        """The caller `_authn.AuthenticationGate` put on the request, or an anonymous one."""
        caller = caller_of(request.scope.get("user"))
        return caller if caller is not None else UnauthenticatedUser()

"""The gRPC binding of A2A 1.0: the a2a-sdk's gRPC servicer on the same request handler as the HTTP bindings.

Same functionality, results, errors and rules as JSON-RPC and HTTP+JSON (A2A §5.1): the servicer is the SDK's
`GrpcHandler` on the very handler the HTTP routes call (tenant gate, payment layer, the SDK's handler), so
the tenant comes from the request's `tenant` field and an unknown one is refused as on the other bindings.
What the SDK's servicer leaves out is added around it, in the order the HTTP routes apply it:

- Version. gRPC serves A2A 1.0 only (the card lists its interface at `protocolVersion` 1.0). The version is
  the `a2a-version` metadata, read in full: repeated with values naming different versions, malformed, or
  naming a version other than 1.0 is refused with VersionNotSupported, and so is a call without it, since
  a missing or empty value means 0.3 (A2A §3.2.6) and 0.3 is not served over gRPC. The SDK's servicer
  ignores the version; here it is negotiated before the servicer sees the call, by the same rules as on
  HTTP (`versions.negotiate_version`), and handed on in the call context like on HTTP.
- Echo. A call served in a version gets initial metadata `a2a-version: 1.0` and, when the client asked
  for extensions (`a2a-extensions`) that the 1.0 card declares, `a2a-extensions` naming exactly those.
  A refused version gets neither: no version was served.
- Caller. The `authorization` metadata is authenticated like the HTTP header (`_authn`): a refused
  credential ends the call UNAUTHENTICATED with the same words whatever the reason (RESOURCE_EXHAUSTED with
  a `retry-after` trailer from a client that presented too many lately); the caller (or nobody) is the call
  context's user.
- Bounds. The request message must arrive within `body_timeout_s` of the call's start, else the call ends
  DEADLINE_EXCEEDED: grpc reads a unary method's request before its handler runs, with no deadline, so a
  client sending half a message would hold its call for ever; here every method is served as
  client-streaming (the same bytes on the wire) and the route reads the one message itself. Its size and
  shape are bounded as on HTTP (`_limits`), the connections under the calls by `_grpc_options`.
- Errors. Every A2A error is a `google.rpc.Status` with ErrorInfo (`_grpc_status`). A request whose bytes
  are not the method's message is InvalidRequest (INVALID_ARGUMENT) instead of the UNKNOWN the protobuf
  decoder's exception would give; one holding a number JSON cannot carry (NaN, Infinity: `_finite`) is
  InvalidParams instead of an internal error when the task is stored; and an unexpected exception is
  INTERNAL "Internal error" with its text in the server log only, instead of UNKNOWN with its text.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

import grpc
import grpc.aio
from a2a.auth.user import UnauthenticatedUser, User
from a2a.extensions.common import HTTP_EXTENSION_HEADER, get_requested_extensions
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import GrpcHandler, RequestHandler
from a2a.server.request_handlers.grpc_handler import DefaultGrpcServerCallContextBuilder
from a2a.types import a2a_pb2_grpc
from a2a.utils.constants import VERSION_HEADER
from a2a.utils.errors import (
    A2AError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
    VersionNotSupportedError,
)
from google.protobuf.message import DecodeError

from a2a_x402.merchant.callers import Authenticator, Caller, CredentialRefused, CredentialThrottled
from a2a_x402.merchant.payments import CLIENT_ADDRESS_KEY, NEGOTIATED_VERSION_KEY

from ._authn import REFUSED_MESSAGE, authenticate_grpc
from ._finite import non_finite_number
from ._grpc_listen import GrpcListenError
from ._grpc_options import server_options
from ._grpc_status import INTERNAL_MESSAGE, abort_with
from ._limits import RequestLimits, proto_shape_problem
from .versions import ProtocolVersion, _one_value, negotiate_version

__all__ = [
    "VERSION_METADATA_KEY",
    "GrpcEdge",
    "GrpcListenError",
    "grpc_listen_address",
    "negotiate_grpc_version",
]

logger = logging.getLogger(__name__)

VERSION_METADATA_KEY = VERSION_HEADER.lower()
"""`a2a-version`: gRPC metadata keys are lowercase."""
EXTENSIONS_METADATA_KEY = HTTP_EXTENSION_HEADER.lower()
AUTHORIZATION_KEY = "authorization"
RETRY_AFTER_KEY = "retry-after"
"""The trailer of a call refused for too many refused credentials: the seconds to wait."""
_SERVED = (ProtocolVersion.V1_0,)
_DEFAULT_GRACE_S = 5.0


# What `_request` reads when the client ends its side of the call without a message.
_NO_REQUEST = object()

Metadata = Iterable[tuple[str, str | bytes]]
# Generic in the type stubs only.
Servicer: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"
MethodHandler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"


def _values(metadata: Metadata, key: str) -> list[str]:
    return [value for name, value in metadata if name.lower() == key and isinstance(value, str)]


def negotiate_grpc_version(metadata: Metadata) -> ProtocolVersion:
    """The version a gRPC call is served in, from its `a2a-version` metadata (see the module).

    Raises:
        VersionNotSupportedError: the version is missing, repeated with different values, malformed or not
            served over gRPC; its `data` names what was requested and what is supported.
    """
    requested = _one_value(_values(metadata, VERSION_METADATA_KEY), "metadata", _SERVED)
    if not (requested or "").strip():
        raise VersionNotSupportedError(
            message=(
                f"the call has no {VERSION_METADATA_KEY} metadata, which means A2A 0.3; "
                f"gRPC serves A2A 1.0 only: send {VERSION_METADATA_KEY}: 1.0"
            ),
            data={"requested": "0.3", "supported": ",".join(_SERVED)},
        )
    return negotiate_version(requested, None, _SERVED)


class _EdgeGrpcContextBuilder(DefaultGrpcServerCallContextBuilder):
    """The SDK's gRPC call context (requested extensions) with the negotiated version and the caller the
    route authenticated (`callers`: the route's, keyed by the call's servicer context)."""

    def __init__(self, callers: dict[int, Caller]) -> None:
        self._callers = callers

    def build_user(self, context: Servicer) -> User:
        """The caller the route authenticated, or an anonymous one."""
        caller = self._callers.get(id(context))
        return caller if caller is not None else UnauthenticatedUser()

    def build(self, context: Servicer) -> ServerCallContext:
        """Build the call context; the SDK's servicer sets the tenant from the request afterwards.

        Raises:
            VersionNotSupportedError: the call's version cannot be negotiated (the route refused it already).
        """
        version = negotiate_grpc_version(context.invocation_metadata() or ())
        call_context = super().build(context)
        call_context.state[NEGOTIATED_VERSION_KEY] = version.value
        call_context.state[CLIENT_ADDRESS_KEY] = _peer_host(context.peer() or "")
        return call_context


class _EdgeGrpcServicer(GrpcHandler):
    """The SDK's servicer answering A2A errors in the form `_grpc_status` gives them."""

    async def abort_context(self, error: A2AError, context: Servicer) -> None:
        """End the call with `error` as a `google.rpc.Status` with ErrorInfo."""
        await abort_with(context, error)


@dataclass(frozen=True, slots=True)
class _Undecodable:
    """What a request's bytes decoded to when they are not the method's message."""

    reason: str


def _tolerant(deserialize: Callable[[bytes], Any] | None) -> Callable[[bytes], Any]:
    def read(raw: bytes) -> Any:
        if deserialize is None:
            return raw
        try:
            return deserialize(raw)
        except DecodeError as exc:
            return _Undecodable(str(exc))

    return read


if TYPE_CHECKING:
    _Interceptor: TypeAlias = grpc.aio.ServerInterceptor[Any, Any]
else:  # not subscriptable at run time; generic only in the stubs
    _Interceptor = grpc.aio.ServerInterceptor


class _GrpcRoute(_Interceptor):
    """Admits each call (decodable, version negotiated, echo sent, caller authenticated) before the
    servicer; see the module. The caller of a call in flight is in `callers` under `id()` of its servicer
    context, for the context builder."""

    def __init__(
        self, declared_extensions: frozenset[str], limits: RequestLimits, authenticator: Authenticator | None
    ) -> None:
        self._declared = declared_extensions
        self._limits = limits
        self._authenticator = authenticator
        self.callers: dict[int, Caller] = {}

    # The stubs omit the None that grpc's continuation gives for an unknown method.
    async def intercept_service(  # type: ignore[override]
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[MethodHandler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> MethodHandler | None:
        """The method's handler, guarded; an unknown method stays unknown (UNIMPLEMENTED)."""
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        deserializer = _tolerant(handler.request_deserializer)
        # Served as client-streaming (the bytes on the wire are the same): grpc reads a unary method's
        # request before the handler runs, with no deadline; here the handler reads it, within one.
        if handler.unary_unary is not None:
            return grpc.stream_unary_rpc_method_handler(
                self._unary(handler.unary_unary),
                request_deserializer=deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            return grpc.stream_stream_rpc_method_handler(
                self._streaming(handler.unary_stream),
                request_deserializer=deserializer,
                response_serializer=handler.response_serializer,
            )
        # A2A has no client-streaming methods; a newer SDK adding one must be looked at, not served unguarded.
        raise RuntimeError(f"unexpected client-streaming gRPC method {handler_call_details.method}")

    async def _request(self, requests: AsyncIterator[Any], context: Servicer) -> Any:
        """The call's one request message, which must arrive within `body_timeout_s` of the call's start.

        Raises:
            InvalidRequestError: the client ended its side of the call without sending a message.
        """
        timeout_s = self._limits.body_timeout_s
        try:
            async with asyncio.timeout(timeout_s):
                request = await anext(aiter(requests), _NO_REQUEST)
        except TimeoutError:
            message = f"the request message was not received within {timeout_s:g} s"
            await context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, message)
        if request is _NO_REQUEST:
            raise InvalidRequestError(message="the call carried no request message")
        return request

    async def _admit(self, request: Any, context: Servicer) -> None:
        """Negotiate the version, send the echo, and refuse a request that could not be decoded.

        Raises:
            VersionNotSupportedError: see `negotiate_grpc_version`.
            InvalidRequestError: the request's bytes are not the method's message.
            InvalidParamsError: the request holds a NaN or infinite number (`_finite`).
            InvalidRequestError: the request has more parts or larger metadata than `_limits` allows.
        """
        metadata = tuple(context.invocation_metadata() or ())
        version = negotiate_grpc_version(metadata)
        echo: list[tuple[str, str]] = [(VERSION_METADATA_KEY, version.value)]
        requested = get_requested_extensions(_values(metadata, EXTENSIONS_METADATA_KEY))
        activated = ",".join(sorted(requested & self._declared))
        if activated:
            echo.append((EXTENSIONS_METADATA_KEY, activated))
        await context.send_initial_metadata(echo)
        if self._authenticator is not None:
            try:
                caller = await authenticate_grpc(
                    self._authenticator,
                    _values(metadata, AUTHORIZATION_KEY),
                    _peer_host(context.peer() or ""),
                )
            except CredentialThrottled as exc:
                context.set_trailing_metadata(((RETRY_AFTER_KEY, str(exc.retry_after_s)),))
                await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc))
            except CredentialRefused:
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, REFUSED_MESSAGE)
            if caller is not None:
                self.callers[id(context)] = caller
        if isinstance(request, _Undecodable):
            raise InvalidRequestError(message=f"the request is not a valid message: {request.reason}")
        problem = proto_shape_problem(request, self._limits)
        if problem is not None:
            raise InvalidRequestError(message=problem)
        where = non_finite_number(request)
        if where is not None:
            raise InvalidParamsError(message=f"{where}: numbers must be finite (JSON has no NaN or Infinity)")

    def _unary(self, behavior: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
        async def call(requests: AsyncIterator[Any], context: Servicer) -> Any:
            try:
                request = await self._request(requests, context)
                await self._admit(request, context)
                return await behavior(request, context)
            except grpc.aio.AbortError:
                raise
            except A2AError as exc:
                await abort_with(context, exc)
            except Exception:
                logger.exception("unexpected failure of a gRPC call")
                await abort_with(context, InternalError(message=INTERNAL_MESSAGE))
            finally:
                self.callers.pop(id(context), None)

        return call

    def _streaming(self, behavior: Callable[..., Any]) -> Callable[..., AsyncIterator[Any]]:
        async def stream(requests: AsyncIterator[Any], context: Servicer) -> AsyncIterator[Any]:
            try:
                request = await self._request(requests, context)
                await self._admit(request, context)
                async for response in behavior(request, context):
                    yield response
            except grpc.aio.AbortError:
                raise
            except A2AError as exc:
                await abort_with(context, exc)
            except Exception:
                logger.exception("unexpected failure of a gRPC stream")
                await abort_with(context, InternalError(message=INTERNAL_MESSAGE))
            finally:
                self.callers.pop(id(context), None)

        return stream


def _peer_host(peer: str) -> str:
    """The host of a gRPC peer (`ipv4:1.2.3.4:5`, `ipv6:[::1]:5`), without its port."""
    _, _, address = peer.partition(":")
    host, _, _port = address.rpartition(":")
    return (host or address).strip("[]")


def grpc_listen_address(host: str, port: int) -> str:
    """`host:port` as gRPC takes it (an IPv6 host in brackets)."""
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{host}:{port}"


class GrpcEdge:
    """The gRPC server of the A2A 1.0 binding, started and stopped by the app's lifespan.

    Args:
        handler: the request handler the HTTP bindings use (tenant gate outermost).
        listen: where to listen, `host:port` (`grpc_listen_address`).
        declared_extensions: the extension URIs the 1.0 card declares (those a call can activate).
        authenticator: authenticates each call's `authorization` metadata; None serves every call anonymous.
        grace_s: how long `stop` lets calls in flight finish before cancelling them.
        limits: the bounds of one request: its message size (RESOURCE_EXHAUSTED beyond), metadata size,
            parts and metadata (InvalidRequest beyond).
    """

    def __init__(
        self,
        handler: RequestHandler,
        *,
        listen: str,
        declared_extensions: frozenset[str],
        authenticator: Authenticator | None = None,
        grace_s: float = _DEFAULT_GRACE_S,
        limits: RequestLimits | None = None,
    ) -> None:
        self._handler = handler
        self._limits = limits if limits is not None else RequestLimits()
        self._authenticator = authenticator
        self._listen = listen
        self._declared = declared_extensions
        self._grace_s = grace_s
        self._server: grpc.aio.Server | None = None

    async def start(self) -> None:
        """Bind `listen` and start serving.

        Raises:
            GrpcListenError: the address cannot be bound (in use, say).
            RuntimeError: the server already runs.
        """
        if self._server is not None:
            raise RuntimeError("the gRPC server is already running")
        route = _GrpcRoute(self._declared, self._limits, self._authenticator)
        server = grpc.aio.server(interceptors=[route], options=server_options(self._limits))
        servicer = _EdgeGrpcServicer(self._handler, context_builder=_EdgeGrpcContextBuilder(route.callers))
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]
        try:
            server.add_insecure_port(self._listen)
        except RuntimeError as exc:  # grpc's "Failed to bind to address ...", the reason only in its log
            raise GrpcListenError(f"cannot listen for gRPC at {self._listen} (is the port in use?)") from exc
        await server.start()
        self._server = server

    async def stop(self) -> None:
        """Stop serving: new calls are refused, calls in flight get `grace_s` to finish."""
        server, self._server = self._server, None
        if server is not None:
            await server.stop(self._grace_s)

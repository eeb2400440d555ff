"""The gRPC server's refusal to listen, apart from the server: `x402-merchant` answers it as its user's
mistake (`X402_GRPC_PORT`), and naming it must not cost every command the gRPC and A2A imports."""

from __future__ import annotations

__all__ = ["GrpcListenError"]


class GrpcListenError(RuntimeError):
    """The gRPC server cannot listen at its address (in use, or not this machine's)."""

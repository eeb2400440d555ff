"""The reference facilitator: the x402 Python SDK 2.x facilitator in a minimal FastAPI app.

Written the way the SDK's own facilitator example does it: an async ``x402Facilitator`` with the exact
EVM scheme (EIP-3009 and Permit2 payloads) and the upto EVM scheme registered on a
``FacilitatorWeb3Signer``, and ``async def`` routes that ``await
facilitator.verify/settle``. The SDK's EVM scheme makes blocking web3 calls inside those coroutines, so
this app blocks its event loop during every verify and settle, exactly as a user following the example
would deploy it; the benchmark measures it as is and does not move the calls to a thread pool.

Run with ``uvicorn --factory bench._x402_reference_app:create_app``. Settings come from the environment:
``BENCH_REF_RPC_URL``, ``BENCH_REF_PRIVATE_KEY`` and ``BENCH_REF_NETWORK`` (CAIP-2, e.g. eip155:84532).
"""

from __future__ import annotations

import os
from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel
from x402 import x402Facilitator
from x402.mechanisms.evm import FacilitatorWeb3Signer
from x402.mechanisms.evm.exact import register_exact_evm_facilitator
from x402.mechanisms.evm.upto import UptoEvmFacilitatorScheme
from x402.schemas import parse_payment_payload, parse_payment_requirements

__all__ = ["FacilitatorRequest", "create_app"]


class FacilitatorRequest(BaseModel):
    """The body of POST /verify and POST /settle in the x402 facilitator API."""

    x402Version: int  # noqa: N815 - the wire name
    paymentPayload: dict[str, Any]  # noqa: N815 - the wire name
    paymentRequirements: dict[str, Any]  # noqa: N815 - the wire name


def create_app() -> FastAPI:
    """Build the app from the ``BENCH_REF_*`` environment variables (one signer per process)."""
    signer = FacilitatorWeb3Signer(
        private_key=os.environ["BENCH_REF_PRIVATE_KEY"], rpc_url=os.environ["BENCH_REF_RPC_URL"]
    )
    facilitator = x402Facilitator()
    network = os.environ["BENCH_REF_NETWORK"]
    register_exact_evm_facilitator(facilitator, signer, networks=network)
    # The SDK has no register helper for upto: its facilitator scheme is registered by hand.
    facilitator.register([network], UptoEvmFacilitatorScheme(signer))
    app = FastAPI(title="x402 SDK reference facilitator")

    @app.post("/verify")
    async def verify(request: FacilitatorRequest) -> dict[str, Any]:
        payload = parse_payment_payload(request.paymentPayload)
        requirements = parse_payment_requirements(payload.x402_version, request.paymentRequirements)
        response = await facilitator.verify(payload, requirements)
        return response.model_dump(by_alias=True, exclude_none=True)

    @app.post("/settle")
    async def settle(request: FacilitatorRequest) -> dict[str, Any]:
        payload = parse_payment_payload(request.paymentPayload)
        requirements = parse_payment_requirements(payload.x402_version, request.paymentRequirements)
        response = await facilitator.settle(payload, requirements)
        return response.model_dump(by_alias=True, exclude_none=True)

    @app.get("/supported")
    async def supported() -> dict[str, Any]:
        response = facilitator.get_supported()
        return {
            "kinds": [kind.model_dump(by_alias=True, exclude_none=True) for kind in response.kinds],
            "extensions": response.extensions,
            "signers": response.signers,
        }

    return app

"""`HttpFacilitatorClient` against the real HTTP service: the same answers as the in-process facilitator."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator import ChainUnavailableError, HttpFacilitatorClient, IdempotencyConflictError
from a2a_x402.facilitator.wire import Reason
from a2a_x402.payer import sign_payment
from tests.facilitator.permit2_chain import funded_payer, parsed, permit2_requirements, sdk_sign
from tests.fixtures.facilitator import make_requirements
from tests.fixtures.servers import base_url_of, bind_loopback

from .conftest import StartService


async def test_the_http_client_verifies_settles_and_reports_status(
    chain: DevChain, start_service: StartService, new_payer: Callable[..., str], sqlite_url: str
) -> None:
    client = HttpFacilitatorClient(start_service(sqlite_url))
    requirements = make_requirements(chain)
    key = new_payer()
    payload = sign_payment(key, requirements)
    try:
        unknown = await client.settlement_status(payload, requirements)
        verified = await client.verify(payload, requirements)
        settled = await client.settle(payload, requirements, idempotency_key="client-1")
        again = await client.settle(payload, requirements, idempotency_key="client-1")
        status = await client.settlement_status(payload, requirements)
        supported = await client.supported()
        with pytest.raises(IdempotencyConflictError):
            await client.settle(sign_payment(key, requirements), requirements, idempotency_key="client-1")
    finally:
        await client.aclose()

    assert unknown is None
    assert verified.is_valid
    assert settled.success and again == settled and status == settled
    assert supported.kinds[0].network == chain.network


async def test_the_http_client_verifies_and_settles_a_permit2_payment(
    chain: DevChain, start_service: StartService, sqlite_url: str
) -> None:
    client = HttpFacilitatorClient(start_service(sqlite_url))
    requirements = permit2_requirements(chain, "exact", chain.plain_asset)
    payload = parsed(sdk_sign(chain, funded_payer(chain, chain.plain_asset), requirements))
    try:
        verified = await client.verify(payload, requirements)
        settled = await client.settle(payload, requirements)
        status = await client.settlement_status(payload, requirements)
    finally:
        await client.aclose()

    assert verified.is_valid, verified
    assert settled.success and settled.transaction, settled
    assert status == settled


async def test_the_http_client_reports_a_refused_payment_as_an_answer(
    chain: DevChain, start_service: StartService, new_payer: Callable[..., str], sqlite_url: str
) -> None:
    client = HttpFacilitatorClient(start_service(sqlite_url))
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements, valid_after=2**40)
    try:
        settled = await client.settle(payload, requirements)
    finally:
        await client.aclose()

    assert (settled.success, settled.error_reason) == (
        False,
        Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALID_AFTER,
    )


async def test_an_unreachable_facilitator_is_a_chain_unavailable_error(
    chain: DevChain, new_payer: Callable[..., str]
) -> None:
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)
    with bind_loopback() as sock:
        url = base_url_of(sock)  # bound but never listening: connections are refused
    client = HttpFacilitatorClient(url, timeout_s=2)
    try:
        with pytest.raises(ChainUnavailableError) as supported:
            await client.supported()
        with pytest.raises(ChainUnavailableError) as verified:
            await client.verify(payload, requirements)
    finally:
        await client.aclose()
    # In words, never an exception's name ("ConnectError: All connection attempts failed").
    assert [str(failure.value) for failure in (supported, verified)] == [
        "facilitator unreachable: connection refused"
    ] * 2

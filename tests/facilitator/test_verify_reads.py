"""What verification asks the node: a token seen before is judged on its simulation alone when the
transfer would go through; a payment refused there is read in full, so its refusal keeps its reason. A
Permit2 payment is read in full and simulated in one batch."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator import Facilitator
from a2a_x402.facilitator.wire import Reason
from a2a_x402.payer import sign_payment
from tests.fixtures.facilitator import make_requirements

from .payments import sign_exact, submit_directly
from .permit2_chain import funded_payer, parsed, permit2_requirements, sdk_sign

_AUTHORIZATION_STATE = "0xe94a0102"  # authorizationState(address,bytes32)


# The relayer's fee caps, read at most once a second and shared by its sends and every simulation.
_FEE_READ = ["eth_getBlockByNumber", "eth_maxPriorityFeePerGas"]


def _record_batches(monkeypatch: pytest.MonkeyPatch, service: Facilitator) -> list[list[str]]:
    """Each batch the facilitator sends the node, as its methods (a token read as its selector), but the
    relayer's fee reads."""
    batches: list[list[str]] = []
    rpc = service._rpc  # noqa: SLF001 - the one client every chain read goes through
    sent = rpc.batch

    async def recording(calls: Sequence[Any]) -> list[Any]:
        methods = [
            call.params[0]["data"][:10] if call.method == "eth_call" else call.method for call in calls
        ]
        if methods != _FEE_READ:
            batches.append(methods)
        return await sent(calls)

    monkeypatch.setattr(rpc, "batch", recording)
    return batches


async def test_a_known_token_is_not_read_again_for_a_payment_that_goes_through(
    chain: DevChain,
    facilitator: Facilitator,
    new_payer: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    batches = _record_batches(monkeypatch, facilitator)
    requirements = make_requirements(chain)
    first, second = (sign_payment(new_payer(), requirements) for _ in range(2))

    assert (await facilitator.verify(first, requirements)).is_valid
    assert (await facilitator.verify(second, requirements)).is_valid
    settled = await facilitator.settle(second, requirements)

    assert settled.success, settled
    token_reads = [batch.count(_AUTHORIZATION_STATE) for batch in batches]
    # The first payment reads the token (and learns its domain); after that, only the simulation.
    assert token_reads[0] == 1 and token_reads[1:] == [0] * (len(batches) - 1), batches
    assert len(batches[1]) == 3  # the simulation, the payer's code, the head


async def test_a_payment_refused_by_the_simulation_is_read_in_full_for_its_reason(
    chain: DevChain,
    facilitator: Facilitator,
    new_payer: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    requirements = make_requirements(chain)
    assert (await facilitator.verify(sign_payment(new_payer(), requirements), requirements)).is_valid
    key = new_payer()
    spent = sign_exact(key, requirements)
    submit_directly(chain, spent)
    batches = _record_batches(monkeypatch, facilitator)

    verified = await facilitator.verify(spent, requirements)

    assert (verified.is_valid, verified.invalid_reason) == (
        False,
        Reason.INVALID_EXACT_EVM_NONCE_ALREADY_USED,
    )
    assert [batch.count(_AUTHORIZATION_STATE) for batch in batches] == [0, 1], batches


@pytest.mark.parametrize("scheme", ["exact", "upto"])
async def test_a_permit2_payment_is_verified_in_one_batch(
    scheme: str, chain: DevChain, facilitator: Facilitator, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked = permit2_requirements(chain, scheme, chain.plain_asset)
    first, second = (sdk_sign(chain, funded_payer(chain, asked.asset), asked) for _ in range(2))
    assert (await facilitator.verify(parsed(first), asked)).is_valid
    batches = _record_batches(monkeypatch, facilitator)

    assert (await facilitator.verify(parsed(second), asked)).is_valid

    # The codes, the payer's balance, allowance and nonce word, the head and the simulation: one round trip.
    assert [len(batch) for batch in batches] == [9], batches

"""The HTTP service as the facilitator of the official x402 TypeScript SDK (`@x402/core` 2.27, `@x402/evm`)
for Permit2 payments, end to end: `js/ts_permit2_flow.cjs` runs the SDK's resource server, which builds
its `exact` (by Permit2) or `upto` requirements from our `/supported` (an `upto` offer names the relayer
our `/supported` gives), the SDK's client pays them, on the plain ERC-20 with a Permit2 approval or on
the EIP-2612 token with its own `eip2612GasSponsoring` permit instead, and the resource server verifies
and settles the payment through our `/verify` and `/settle` (an `upto` one below its maximum); the
tokens move once by exactly the settled amount, and a replay is refused as a duplicate. An `upto` payment
whose work used nothing settles with no transaction, as x402 says, and one settled for more than its
maximum is refused with the SDK's own reason; a payer who never approved Permit2 and sends no EIP-2612
permit is refused, told to approve Permit2, even when the SDK's client offers an ERC-20 approval
transaction for the facilitator to send (an extension ours does not offer, and never sends); none of
them moves anything.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from eth_account import Account

from a2a_x402.devchain import PERMIT2_ADDRESS, DevChain
from a2a_x402.facilitator.wire import Reason
from tests.fixtures.node import NodeScript

from .conftest import StartService
from .payments import claim_rows, relayer_address
from .permit2_chain import AMOUNT
from .permit2_flows import (
    CASES,
    EIP2612_DECLARED,
    OVER_THE_MAXIMUM,
    UNUSED,
    Before,
    Case,
    check_nothing_moved,
    check_settled_once,
    offer_of,
    payer_for,
)

_FLOW = Path(__file__).resolve().parent / "js" / "ts_permit2_flow.cjs"


async def _flow(
    case: Case,
    chain: DevChain,
    base_url: str,
    node_script: NodeScript,
    *,
    declared: dict[str, Any] | None = None,
    approved: bool | None = None,
) -> tuple[str, Before, dict[str, Any]]:
    """(the payer, the state before, what `js/ts_permit2_flow.cjs` printed) for a fresh payer of `case`
    (`approved`: see `payer_for`); the PaymentRequired declares `declared`, by default the EIP-2612
    extension where the case pays with it."""
    key = payer_for(chain, case, approved=approved)
    payer = Account.from_key(key).address
    before = Before.read(chain, case, payer)
    out = await node_script.run(
        _FLOW,
        {
            "facilitatorUrl": base_url,
            "rpcUrl": chain.rpc_url,
            "privateKey": key,
            "offer": offer_of(chain, case),
            "declared": EIP2612_DECLARED if declared is None and case.sponsored else declared,
            "charge": None if case.used is None else str(case.used),
        },
    )
    return payer, before, out


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
async def test_the_typescript_sdk_pays_and_settles_a_permit2_payment_through_our_facilitator(
    case: Case, chain: DevChain, start_service: StartService, node_script: NodeScript, sqlite_url: str
) -> None:
    offer = offer_of(chain, case)

    payer, before, out = await _flow(case, chain, start_service(sqlite_url), node_script)

    [requirements] = out["paymentRequired"]["accepts"]
    expected_extra = offer["extra"] | (
        {"facilitatorAddress": relayer_address(chain)} if case.scheme == "upto" else {}
    )
    assert (requirements["scheme"], requirements["amount"], requirements["extra"]) == (
        case.scheme,
        str(AMOUNT),
        expected_extra,
    )
    payment = out["paymentPayload"]
    assert payment["accepted"] == requirements
    assert payment["payload"]["permit2Authorization"]["from"] == payer
    permit = (payment.get("extensions") or {}).get("eip2612GasSponsoring", {}).get("info", {})
    if case.sponsored:
        assert (permit["from"], permit["spender"], permit["amount"]) == (payer, PERMIT2_ADDRESS, str(AMOUNT))
    else:
        assert "signature" not in permit
    assert out["verified"] == {"isValid": True, "payer": payer}
    settled = out["settled"]
    assert (settled["success"], settled["payer"], settled["network"], settled["amount"]) == (
        True,
        payer,
        chain.network,
        str(case.settled),
    ), settled
    replayed = out["replayed"]
    assert (replayed["success"], replayed["errorReason"]) == (False, Reason.DUPLICATE_SETTLEMENT.value)
    check_settled_once(chain, case, payer, before, settled["transaction"])
    assert [row["state"] for row in await claim_rows(sqlite_url)] == ["succeeded"]


async def test_an_upto_payment_the_typescript_sdk_settles_for_nothing_sends_nothing(
    chain: DevChain, start_service: StartService, node_script: NodeScript, sqlite_url: str
) -> None:
    payer, before, out = await _flow(UNUSED, chain, start_service(sqlite_url), node_script)

    assert out["verified"] == {"isValid": True, "payer": payer}
    assert out["settled"] == {
        "success": True,
        "payer": payer,
        "transaction": "",
        "network": chain.network,
        "amount": "0",
    }
    # Settled for good: the maximum can never be charged with it afterwards.
    assert (out["replayed"]["success"], out["replayed"]["errorReason"]) == (
        False,
        Reason.DUPLICATE_SETTLEMENT.value,
    )
    nonce = int(out["paymentPayload"]["payload"]["permit2Authorization"]["nonce"])
    check_nothing_moved(chain, UNUSED, payer, before, nonce)
    [row] = await claim_rows(sqlite_url)
    assert (row["state"], int(row["amount"]), row["tx_hash"]) == ("succeeded", 0, None)


async def test_an_upto_settlement_the_typescript_sdk_asks_above_the_maximum_is_refused(
    chain: DevChain, start_service: StartService, node_script: NodeScript, sqlite_url: str
) -> None:
    payer, before, out = await _flow(OVER_THE_MAXIMUM, chain, start_service(sqlite_url), node_script)

    exceeds = Reason.INVALID_UPTO_EVM_PAYLOAD_SETTLEMENT_EXCEEDS_AMOUNT.value
    assert out["verified"] == {"isValid": True, "payer": payer}
    # The SDK's resource server hands back our refusal as the settlement's answer, not as an error.
    assert (out["settled"]["success"], out["settled"]["errorReason"]) == (False, exceeds), out["settled"]
    assert (out["replayed"]["success"], out["replayed"]["errorReason"]) == (False, exceeds)
    nonce = int(out["paymentPayload"]["payload"]["permit2Authorization"]["nonce"])
    check_nothing_moved(chain, OVER_THE_MAXIMUM, payer, before, nonce)
    assert await claim_rows(sqlite_url) == []


_ERC20_APPROVAL_DECLARED = {
    "erc20ApprovalGasSponsoring": {
        "info": {"description": "a signed approval of Permit2 is sent first", "version": "1"},
        "schema": {"type": "object"},
    }
}
UNAPPROVED = {
    f"{scheme}, {label}": (Case(scheme, "plain_asset"), declared)
    for scheme in ("exact", "upto")
    for label, declared in (
        ("nothing declared", None),
        ("ERC-20 approval sponsoring declared", _ERC20_APPROVAL_DECLARED),
    )
}


@pytest.mark.parametrize(("case", "declared"), UNAPPROVED.values(), ids=UNAPPROVED.keys())
async def test_a_payer_without_a_permit2_allowance_is_told_to_approve_and_nothing_is_sent(
    case: Case,
    declared: dict[str, Any] | None,
    chain: DevChain,
    start_service: StartService,
    node_script: NodeScript,
    sqlite_url: str,
) -> None:
    base_url = start_service(sqlite_url)

    payer, before, out = await _flow(case, chain, base_url, node_script, declared=declared, approved=False)

    offered = (out["paymentPayload"].get("extensions") or {}).get("erc20ApprovalGasSponsoring", {})
    # The SDK's client did sign an approval for the facilitator to send when it was offered one.
    assert ("signedTransaction" in offered.get("info", {})) == (declared is not None)
    required = Reason.PERMIT2_ALLOWANCE_REQUIRED.value
    verified, settled, replayed = out["verified"], out["settled"], out["replayed"]
    assert (verified["isValid"], verified["invalidReason"], verified["payer"]) == (False, required, payer)
    assert "approve Permit2" in verified["invalidMessage"]
    assert [(a["success"], a["errorReason"], a["transaction"]) for a in (settled, replayed)] == [
        (False, required, "")
    ] * 2
    nonce = int(out["paymentPayload"]["payload"]["permit2Authorization"]["nonce"])
    check_nothing_moved(chain, case, payer, before, nonce)
    # The approval the payer signed was never sent.
    assert int(chain.rpc.call("eth_getTransactionCount", [payer, "latest"]), 16) == 0
    assert await claim_rows(sqlite_url) == []

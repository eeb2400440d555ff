"""The HTTP service as the facilitator of the official x402 TypeScript SDK (`@x402/core` 2.27, `@x402/evm`)
for Permit2 payments, end to end: `js/ts_permit2_flow.cjs` runs the SDK's resource server, which builds
its `exact` (by Permit2) or `upto` requirements from our `/supported` (an `upto` offer names the relayer
our `/supported` gives), the SDK's client pays them, on the plain ERC-20 with a Permit2 approval or on
the EIP-2612 token with its own `eip2612GasSponsoring` permit instead, and the resource server verifies
and settles the payment through our `/verify` and `/settle` (an `upto` one below its maximum); the
tokens move once by exactly the settled amount, and a replay is refused as a duplicate.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from eth_account import Account

from a2a_x402.devchain import PERMIT2_ADDRESS, DevChain
from a2a_x402.facilitator.wire import Reason
from tests.fixtures.node import NodeScript

from .conftest import StartService
from .payments import claim_rows, relayer_address
from .permit2_chain import AMOUNT
from .permit2_flows import CASES, Before, Case, check_settled_once, offer_of, payer_for

_FLOW = Path(__file__).resolve().parent / "js" / "ts_permit2_flow.cjs"


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
async def test_the_typescript_sdk_pays_and_settles_a_permit2_payment_through_our_facilitator(
    case: Case, chain: DevChain, start_service: StartService, node_script: NodeScript, sqlite_url: str
) -> None:
    base_url = start_service(sqlite_url)
    key = payer_for(chain, case)
    payer = Account.from_key(key).address
    offer = offer_of(chain, case)
    before = Before.read(chain, case, payer)

    out = await node_script.run(
        _FLOW,
        {
            "facilitatorUrl": base_url,
            "rpcUrl": chain.rpc_url,
            "privateKey": key,
            "offer": offer,
            "sponsored": case.sponsored,
            "charge": None if case.used is None else str(case.used),
        },
    )

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

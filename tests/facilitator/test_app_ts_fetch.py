"""`@x402/fetch` 2.27 pays an x402 HTTP resource settled through our facilitator's HTTP service, by Permit2.

`js/ts_fetch_flow.cjs` serves one paid route with the x402 TypeScript SDK's HTTP resource server, our
facilitator behind its HTTPFacilitatorClient, priced `exact` by Permit2 or `upto` (whose work reports a
usage below the maximum in the SDK's `Settlement-Overrides` header). The buyer is `wrapFetchWithPayment`
with @x402/evm's exact and upto client schemes: it meets the 402, pays, and gets the report with a
PAYMENT-RESPONSE naming our transaction. The tokens move once, by exactly the settled amount, from the
payer (who approved Permit2, or sent an EIP-2612 permit of it beside the payment) to the payee; the same
PAYMENT-SIGNATURE sent again is answered 402 and moves nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from eth_account import Account

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator.wire import Reason
from tests.fixtures.node import NodeScript

from .conftest import StartService
from .payments import claim_rows, relayer_address
from .permit2_chain import AMOUNT
from .permit2_flows import CASES, EIP2612_DECLARED, Before, Case, check_settled_once, offer_of, payer_for

_FLOW = Path(__file__).resolve().parent / "js" / "ts_fetch_flow.cjs"


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
async def test_x402_fetch_pays_a_resource_settled_through_our_facilitator(
    case: Case, chain: DevChain, start_service: StartService, node_script: NodeScript, sqlite_url: str
) -> None:
    key = payer_for(chain, case)
    payer = Account.from_key(key).address
    before = Before.read(chain, case, payer)
    offer = offer_of(chain, case)

    out = await node_script.run(
        _FLOW,
        {
            "facilitatorUrl": start_service(sqlite_url),
            "rpcUrl": chain.rpc_url,
            "privateKey": key,
            "offer": offer,
            "declared": EIP2612_DECLARED if case.sponsored else None,
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
    assert (out["status"], out["body"]) == (200, "the report")
    settled = out["paymentResponse"]
    assert (settled["success"], settled["payer"], settled["network"], settled["amount"]) == (
        True,
        payer,
        chain.network,
        str(case.settled),
    ), settled
    # The replay is refused at our /verify, before any work: 402 again, naming the spent nonce.
    assert out["replay"] == {"status": 402, "error": Reason.PERMIT2_INVALID_NONCE.value}
    assert out["requests"] == 3  # unpaid, paid, replayed: the wrapper paid once
    check_settled_once(chain, case, payer, before, settled["transaction"])
    assert [row["state"] for row in await claim_rows(sqlite_url)] == ["succeeded"]

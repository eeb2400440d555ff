"""The HTTP service paid by the official x402 TypeScript SDK's client (`@x402/core` 2.27, `@x402/evm`).

`js/ts_client.cjs` makes the payment for our x402 v2 `PaymentRequired` with the SDK's `x402Client` and its
exact EVM scheme on a viem account, and sends it with the SDK's `HTTPFacilitatorClient` to our /verify and
/settle: the payment verifies, settles on chain once, and a replay is refused as a duplicate that the SDK
reads as a failed settlement naming our reason; on DevUSDC and on Circle's FiatToken v2.2.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from eth_account import Account

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator.wire import Reason
from tests.fixtures.facilitator import PAY_TO, make_requirements
from tests.fixtures.fiat_token import ASSETS
from tests.fixtures.node import NodeScript

from .conftest import StartService
from .payments import claim_rows, relayer_nonce, transfer_logs_of

_CLIENT = Path(__file__).resolve().parent / "js" / "ts_client.cjs"


@pytest.mark.parametrize("chain", ASSETS, indirect=True)
async def test_the_typescript_sdk_client_pays_through_our_facilitator_once(
    chain: DevChain, start_service: StartService, node_script: NodeScript, sqlite_url: str
) -> None:
    base_url = start_service(sqlite_url)
    requirements = make_requirements(chain)
    key = chain.new_payer()
    payer = Account.from_key(key).address
    payment_required = {
        "x402Version": 2,
        "resource": {
            "url": "https://merchant.example/report",
            "description": "a report",
            "mimeType": "text/plain",
        },
        "accepts": [requirements.to_json_dict()],
    }
    payer_before, payee_before, nonce_before = (
        chain.balance_of(payer),
        chain.balance_of(PAY_TO),
        relayer_nonce(chain),
    )

    out = await node_script.run(
        _CLIENT, {"facilitatorUrl": base_url, "privateKey": key, "paymentRequired": payment_required}
    )

    payment, verified, settled, replayed = (
        out["paymentPayload"],
        out["verified"],
        out["settled"],
        out["replayed"],
    )
    assert (payment["x402Version"], payment["accepted"]) == (2, requirements.to_json_dict())
    assert payment["payload"]["authorization"]["from"] == payer
    assert verified == {"isValid": True, "payer": payer}
    assert (settled["success"], settled["payer"], settled["network"]) == (
        True,
        payer,
        chain.network,
    ), settled
    assert transfer_logs_of(chain, settled["transaction"]) == [
        (chain.asset.lower(), payer.lower(), PAY_TO.lower(), requirements.amount)
    ]
    assert (replayed["success"], replayed["errorReason"]) == (False, Reason.DUPLICATE_SETTLEMENT.value), (
        replayed
    )
    assert (chain.balance_of(payer), chain.balance_of(PAY_TO), relayer_nonce(chain)) == (
        payer_before - requirements.amount,
        payee_before + requirements.amount,
        nonce_before + 1,
    )
    assert len(await claim_rows(sqlite_url)) == 1

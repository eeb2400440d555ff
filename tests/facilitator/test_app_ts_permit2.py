"""The HTTP service as the facilitator of the official x402 TypeScript SDK (`@x402/core` 2.27, `@x402/evm`)
for Permit2 payments, end to end: `js/ts_permit2_flow.cjs` runs the SDK's resource server, which builds
its `exact` (by Permit2) or `upto` requirements from our `/supported` (an `upto` offer names the relayer
our `/supported` gives), the SDK's client pays them, on the plain ERC-20 with a Permit2 approval or on
the EIP-2612 token with its own `eip2612GasSponsoring` permit instead, and the resource server verifies
and settles the payment through our `/verify` and `/settle` (an `upto` one below its maximum); the
tokens move once by exactly the settled amount, and a replay is refused as a duplicate.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from eth_abi.abi import decode
from eth_account import Account

from a2a_x402.devchain import PERMIT2_ADDRESS, DevChain, encode_call
from a2a_x402.facilitator.wire import Reason
from tests.fixtures.facilitator import PAY_TO
from tests.fixtures.node import NodeScript

from .conftest import StartService
from .payments import claim_rows, relayer_address, relayer_nonce, transfer_logs_of
from .permit2_chain import AMOUNT, funded_payer, permit2_requirements

_FLOW = Path(__file__).resolve().parent / "js" / "ts_permit2_flow.cjs"


@dataclass(frozen=True)
class Case:
    """One payment: its scheme, the token (a `DevChain` field), and what the work used (None: `exact`)."""

    scheme: str
    asset_field: str
    used: int | None = None

    @property
    def sponsored(self) -> bool:
        """Paid with an EIP-2612 permit of Permit2 instead of an approval made beforehand."""
        return self.asset_field == "permit_asset"

    @property
    def settled(self) -> int:
        return AMOUNT if self.used is None else self.used


CASES = {
    "exact, plain ERC-20, approved": Case("exact", "plain_asset"),
    "exact, EIP-2612 token, sponsored": Case("exact", "permit_asset"),
    "upto, plain ERC-20, approved, a third used": Case("upto", "plain_asset", AMOUNT // 3),
    "upto, EIP-2612 token, sponsored, a quarter used": Case("upto", "permit_asset", AMOUNT // 4),
}


def _permit2_allowance(chain: DevChain, owner: str, asset: str) -> int:
    data = encode_call("allowance(address,address)", [owner, PERMIT2_ADDRESS])
    (allowance,) = decode(["uint256"], chain.rpc.eth_call(asset, data))
    return int(allowance)


def _offer(chain: DevChain, case: Case) -> dict[str, Any]:
    """The price the resource server is configured with: the SDK's server adds the rest (for `upto`, the
    facilitator's address from our `/supported`)."""
    asked = permit2_requirements(chain, case.scheme, getattr(chain, case.asset_field)).to_json_dict()
    extra = {name: value for name, value in asked["extra"].items() if name != "facilitatorAddress"}
    return {key: asked[key] for key in ("scheme", "network", "asset", "amount", "payTo")} | {"extra": extra}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
async def test_the_typescript_sdk_pays_and_settles_a_permit2_payment_through_our_facilitator(
    case: Case, chain: DevChain, start_service: StartService, node_script: NodeScript, sqlite_url: str
) -> None:
    base_url = start_service(sqlite_url)
    asset = getattr(chain, case.asset_field)
    key = funded_payer(chain, asset, approved=not case.sponsored)
    payer = Account.from_key(key).address
    offer = _offer(chain, case)
    payer_before, payee_before = chain.balance_of(payer, asset=asset), chain.balance_of(PAY_TO, asset=asset)
    nonce_before = relayer_nonce(chain)

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
    proxy = chain.exact_permit2_proxy if case.scheme == "exact" else chain.upto_permit2_proxy
    sent = chain.rpc.call("eth_getTransactionByHash", [settled["transaction"]])
    assert (sent["from"].lower(), sent["to"].lower()) == (relayer_address(chain).lower(), proxy.lower())
    assert transfer_logs_of(chain, settled["transaction"]) == [
        (asset.lower(), payer.lower(), PAY_TO.lower(), case.settled)
    ]
    replayed = out["replayed"]
    assert (replayed["success"], replayed["errorReason"]) == (False, Reason.DUPLICATE_SETTLEMENT.value)
    assert (
        chain.balance_of(payer, asset=asset),
        chain.balance_of(PAY_TO, asset=asset),
        relayer_nonce(chain),
    ) == (payer_before - case.settled, payee_before + case.settled, nonce_before + 1)
    if case.sponsored:
        # The permit approved Permit2 for the maximum; the transfer used what was settled of it.
        assert _permit2_allowance(chain, payer, asset) == AMOUNT - case.settled
    assert [row["state"] for row in await claim_rows(sqlite_url)] == ["succeeded"]

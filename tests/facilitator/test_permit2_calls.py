"""Which permit a mined transaction's calldata settled: the calldata settlement sends (a proxy's `settle` or
`settleWithPermit`, called directly or through Multicall3's `aggregate3`) reads back as its owner, nonce and
token; calldata of anything else reads as nothing. No chain: calldata only."""

from __future__ import annotations

import pytest

from a2a_x402.facilitator._erc6492 import MULTICALL3_ADDRESS, Call3, encode_aggregate3
from a2a_x402.facilitator._permit2 import EXACT_PERMIT2_PROXY, UPTO_PERMIT2_PROXY
from a2a_x402.facilitator._permit2_calls import Eip2612Approval, SettledPermit, encode_settle, settled_permits
from a2a_x402.facilitator.wire import parse_permit2_payment_payload
from tests.facilitator.permit2_payments import AMOUNT, ASSET, requirements, sdk_payment

_PROXY = {"exact": EXACT_PERMIT2_PROXY, "upto": UPTO_PERMIT2_PROXY}
_APPROVAL = Eip2612Approval(value=AMOUNT, deadline=2**40, signature=bytes(range(64)) + b"\x1b")


def _settle_calldata(scheme: str, *, approval: Eip2612Approval | None = None) -> tuple[str, SettledPermit]:
    payment = parse_permit2_payment_payload(sdk_payment(requirements(scheme)))
    authorization = payment.payload.permit2_authorization
    signature = bytes.fromhex(payment.payload.signature[2:])
    calldata = encode_settle(authorization, AMOUNT // 2, signature, approval)
    return calldata, SettledPermit(owner=authorization.from_address, nonce=authorization.nonce, token=ASSET)


@pytest.mark.parametrize("scheme", ["exact", "upto"])
@pytest.mark.parametrize("approval", [None, _APPROVAL], ids=["settle", "settleWithPermit"])
def test_a_proxy_call_reads_back_as_its_permit(scheme: str, approval: Eip2612Approval | None) -> None:
    calldata, permit = _settle_calldata(scheme, approval=approval)

    assert settled_permits(_PROXY[scheme], calldata) == [permit]


def test_a_proxy_call_through_multicall3_reads_back_as_its_permit() -> None:
    calldata, permit = _settle_calldata("exact")
    factory = Call3("0x1111111111111111111111111111111111111111", False, b"\x01\x02")
    batch = encode_aggregate3([factory, Call3(EXACT_PERMIT2_PROXY, False, bytes.fromhex(calldata[2:]))])

    assert settled_permits(MULTICALL3_ADDRESS, batch) == [permit]


@pytest.mark.parametrize(
    ("to", "calldata"),
    [
        # The right calldata sent elsewhere: not a proxy's settlement.
        ("0x2222222222222222222222222222222222222222", "proxy"),
        # A proxy's selector with arguments that do not decode.
        (EXACT_PERMIT2_PROXY, "truncated"),
        (EXACT_PERMIT2_PROXY, "0x"),
        (MULTICALL3_ADDRESS, "0x82ad56cb00"),
        (EXACT_PERMIT2_PROXY, "0xnothex"),
    ],
)
def test_anything_else_reads_as_no_permit(to: str, calldata: str) -> None:
    settle, _ = _settle_calldata("exact")
    data = {"proxy": settle, "truncated": settle[:200]}.get(calldata, calldata)

    assert settled_permits(to, data) == []

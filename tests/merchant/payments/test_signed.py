"""`_signed`: a stored payment read back by its shape, its deadline, and its nonce's state on chain."""

from __future__ import annotations

from eth_account import Account

from a2a_x402.devchain import PERMIT2_ADDRESS, DevChain, encode_call
from a2a_x402.facilitator import RpcClient
from a2a_x402.facilitator.wire import (
    ExactPermit2PaymentPayload,
    PaymentPayload,
    UptoPaymentPayload,
    signer_of,
)
from a2a_x402.merchant.payments import nonce_used, payment_from_wire, valid_before
from tests.extension import documents as doc
from tests.fixtures.deadlines import HANG_S


def test_a_stored_payment_is_read_back_as_the_kind_it_is() -> None:
    eip3009 = payment_from_wire(doc.payload_v2())
    exact = payment_from_wire(doc.permit2_payload())
    upto = payment_from_wire(doc.permit2_payload("upto"))
    assert (type(eip3009), type(exact), type(upto)) == (
        PaymentPayload,
        ExactPermit2PaymentPayload,
        UptoPaymentPayload,
    )
    # Both documents end at 1796015019: EIP-3009 refuses a block at its validBefore, Permit2 takes a block
    # at its deadline and refuses the next second (DevPermit2.sol, as Permit2: `block.timestamp > deadline`).
    assert valid_before(eip3009) == 1796015019
    assert valid_before(exact) == valid_before(upto) == 1796015019 + 1


def _invalidate(chain: DevChain, owner: str, nonce: int) -> None:
    """`owner` cancels its Permit2 `nonce` (`invalidateUnorderedNonces`), sent by anvil's impersonation."""
    chain.rpc.call("anvil_setBalance", [owner, hex(10**18)])
    chain.rpc.call("anvil_impersonateAccount", [owner])
    try:
        data = encode_call("invalidateUnorderedNonces(uint256,uint256)", [nonce >> 8, 1 << (nonce & 0xFF)])
        sent = chain.rpc.call(
            "eth_sendTransaction", [{"from": owner, "to": PERMIT2_ADDRESS, "data": "0x" + data.hex()}]
        )
        assert chain.rpc.wait_for_receipt(sent, timeout_s=HANG_S)["status"] == "0x1"
    finally:
        chain.rpc.call("anvil_stopImpersonatingAccount", [owner])


async def test_a_permit2_nonce_is_read_at_permit2_and_an_eip3009_one_at_its_token(chain: DevChain) -> None:
    owner = Account.create().address
    nonce = 2**200 + 77
    wire = doc.permit2_payload()
    wire["payload"]["permit2Authorization"].update({"from": owner, "nonce": str(nonce)})
    permit2 = signer_of(payment_from_wire(wire))
    eip3009_nonce = "0x" + f"{nonce:064x}"  # the same number, as an EIP-3009 nonce of the token
    rpc = RpcClient(chain.rpc_url)
    try:
        before = await nonce_used(rpc, chain.plain_asset, owner, permit2.nonce)
        _invalidate(chain, owner, nonce)
        after = await nonce_used(rpc, chain.plain_asset, owner, permit2.nonce)
        token_side = await nonce_used(rpc, chain.asset, owner, eip3009_nonce)
    finally:
        await rpc.aclose()

    assert (before, after, token_side) == (False, True, False)

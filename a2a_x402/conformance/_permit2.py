"""The kit's Permit2 payments: which kind an offered entry is, signing its witness transfer, the allowance.

An entry is paid one of three ways (spec §6.1): ``exact`` by EIP-3009 (the default), ``exact`` by Permit2
(``extra.assetTransferMethod: "permit2"``) or ``upto`` (always Permit2). The kit signs Permit2's
``PermitWitnessTransferFrom`` itself under Permit2's EIP-712 domain (name, chain id, verifying contract; no
version), to the x402 proxy of the scheme at its canonical address: the spender is never read from the
terms. An ``upto`` witness names the facilitator of ``extra.facilitatorAddress``, which the kit takes only
when it is an address and none of the payment's own contracts. Permit2 moves tokens only within an ERC-20
allowance of the payer's; the kit approves Permit2 itself only when the operator let it
(``KitSettings.approve_permit2``), since that costs the payer gas.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

from eth_utils.address import is_hex_address, to_checksum_address

from ._chain import PERMIT2_ADDRESS, ChainError
from ._context import NotApplicable, Probe
from ._signer import Signed, Signer, UnsafeTerms

__all__ = [
    "EXACT_PROXY",
    "KIND_WORDS",
    "UPTO_PROXY",
    "payment_kind",
    "permit2_allowance",
    "sign_permit2",
]

JSON = Any
EXACT_PROXY = "0x402085c248EeA27D92E8b30b2C58ed07f9E20001"
UPTO_PROXY = "0x4020A4f3b7b90ccA423B9fabCc0CE57C6C240002"
"""The x402 Permit2 proxies of ``exact`` and ``upto``, the same on every chain (spec §6.2)."""
KIND_WORDS = {
    "eip3009": "exact entry by EIP-3009",
    "permit2": 'exact entry by Permit2 (extra.assetTransferMethod "permit2")',
    "upto": "upto entry",
}
"""How reports name each kind of entry."""

_MAX_UINT256 = 2**256 - 1
_APPROVE = "0x095ea7b3"  # approve(address,uint256)
_POLL_S = 0.25
_TOKEN_PERMISSIONS = [{"name": "token", "type": "address"}, {"name": "amount", "type": "uint256"}]
_PERMIT = [
    {"name": "permitted", "type": "TokenPermissions"},
    {"name": "spender", "type": "address"},
    {"name": "nonce", "type": "uint256"},
    {"name": "deadline", "type": "uint256"},
    {"name": "witness", "type": "Witness"},
]
_WITNESS = {
    "permit2": [{"name": "to", "type": "address"}, {"name": "validAfter", "type": "uint256"}],
    "upto": [
        {"name": "to", "type": "address"},
        {"name": "facilitator", "type": "address"},
        {"name": "validAfter", "type": "uint256"},
    ],
}


def payment_kind(entry: JSON) -> str:
    """``"eip3009"``, ``"permit2"`` or ``"upto"``: how ``entry`` is paid (``""``: no way the kit knows)."""
    if not isinstance(entry, dict):
        return ""
    extra = entry.get("extra")
    method = extra.get("assetTransferMethod") if isinstance(extra, dict) else None
    if entry.get("scheme") == "upto":
        return "upto"
    if entry.get("scheme") != "exact":
        return ""
    if method is None or method == "eip3009":
        return "eip3009"
    return "permit2" if method == "permit2" else ""


def _facilitator(entry: JSON, asset: str, pay_to: str) -> str:
    """The ``upto`` entry's ``extra.facilitatorAddress``, checksummed.

    Raises:
        UnsafeTerms: it is no address, or one of the payment's own contracts (nobody could settle).
    """
    address = (entry.get("extra") or {}).get("facilitatorAddress")
    if not isinstance(address, str) or not is_hex_address(address):
        raise UnsafeTerms("the upto entry's extra.facilitatorAddress is not an address")
    address = to_checksum_address(address)
    if int(address, 16) == 0 or address in (PERMIT2_ADDRESS, EXACT_PROXY, UPTO_PROXY, asset, pay_to):
        raise UnsafeTerms(f"the upto entry names {address} as its facilitator: no facilitator can be that")
    return address


def sign_permit2(signer: Signer, entry: JSON, *, tenant: str, network: str, amount: int) -> Signed:
    """A Permit2 witness transfer of ``amount`` (for ``upto``: the maximum) paying ``entry``.

    Raises:
        UnsafeTerms: the entry is not paid by Permit2, is outside the card, is over the cap, or its
            facilitator is unusable.
    """
    kind = payment_kind(entry)
    if kind not in _WITNESS:
        raise UnsafeTerms(
            "the entry is not paid by Permit2 (upto, or exact with assetTransferMethod permit2)"
        )
    guarded = signer.guard(entry, tenant=tenant, network=network, amount=amount)
    now = int(time.time())
    nonce = int.from_bytes(os.urandom(32), "big")
    deadline, after = now + guarded.window_s, now - 60
    witness: dict[str, Any] = {"to": guarded.pay_to}
    if kind == "upto":
        witness["facilitator"] = _facilitator(entry, guarded.asset, guarded.pay_to)
    witness["validAfter"] = after
    spender = UPTO_PROXY if kind == "upto" else EXACT_PROXY
    permitted = {"token": guarded.asset, "amount": guarded.value}
    message = {
        "permitted": permitted,
        "spender": spender,
        "nonce": nonce,
        "deadline": deadline,
        "witness": witness,
    }
    types = {
        "PermitWitnessTransferFrom": _PERMIT,
        "TokenPermissions": _TOKEN_PERMISSIONS,
        "Witness": _WITNESS[kind],
    }
    domain = {"name": "Permit2", "chainId": guarded.chain_id, "verifyingContract": PERMIT2_ADDRESS}
    signature = signer.sign_typed(domain, types, message)
    authorization = {
        "from": signer.address,
        "permitted": {"token": guarded.asset, "amount": str(guarded.value)},
        "spender": spender,
        "nonce": str(nonce),
        "deadline": str(deadline),
        "witness": {key: str(value) if key == "validAfter" else value for key, value in witness.items()},
    }
    return Signed(
        authorization,
        "0x" + signature.hex(),
        signer.address,
        "0x" + nonce.to_bytes(32, "big").hex(),
        guarded.asset,
        guarded.value,
        guarded.pay_to,
        permit2=True,
    )


async def permit2_allowance(probe: Probe, asset: str, amount: int) -> None:
    """Make sure Permit2 may move ``amount`` of the payer's ``asset``: it may already, or the kit approves it.

    Raises:
        NotApplicable: it may not, and the operator did not let the kit approve it, or the approval failed
            (the payer's setup, not the merchant's fault).
    """
    run = probe.run
    payer = run.signer.address
    async with run.approving:  # one approval per asset, whichever check needs it first
        allowance = await run.chain.allowance(asset, payer, PERMIT2_ADDRESS)
        if allowance >= amount:
            return
        if not run.approve_permit2:
            raise NotApplicable(
                f"the payer {payer} has not approved Permit2 ({PERMIT2_ADDRESS}) to move {asset} "
                f"(allowance {allowance}, the payment needs {amount}): approve it once, or let the kit "
                "approve it (--approve-permit2)"
            )
        try:
            await _approve(probe, asset)
        except (ChainError, ValueError, TypeError) as error:
            raise NotApplicable(f"the kit could not approve Permit2 to move {asset}: {error}") from None


async def _approve(probe: Probe, asset: str) -> None:
    """Send the payer's ``approve(Permit2, 2**256 - 1)`` on ``asset`` and wait until it is mined."""
    run, chain = probe.run, probe.run.chain
    payer = run.signer.address
    data = _APPROVE + PERMIT2_ADDRESS[2:].lower().rjust(64, "0") + hex(_MAX_UINT256)[2:]
    call = {"from": payer, "to": asset, "data": data}
    gas = int(await chain.call("eth_estimateGas", [call]), 16)
    transaction = {
        "chainId": await chain.chain_id(),
        "nonce": int(await chain.call("eth_getTransactionCount", [payer, "pending"]), 16),
        "gasPrice": int(await chain.call("eth_gasPrice", []), 16),
        "gas": gas + gas // 4,  # headroom: the estimate is made against the state before it
        "to": asset,
        "data": data,
        "value": 0,
    }
    sent = await chain.call("eth_sendRawTransaction", [run.signer.sign_transaction(transaction)])
    deadline = asyncio.get_running_loop().time() + run.timeout_s * 2
    while asyncio.get_running_loop().time() < deadline:
        receipt = await chain.call("eth_getTransactionReceipt", [sent])
        if isinstance(receipt, dict):
            if receipt.get("status") != "0x1":
                raise ChainError(f"the approval {sent} reverted")
            return
        await asyncio.sleep(_POLL_S)
    raise ChainError(f"the approval {sent} was not mined within {run.timeout_s * 2:g} s")

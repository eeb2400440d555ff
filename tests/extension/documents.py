"""x402 documents for the extension tests, in the wire types' field order (so dumps compare exactly).

Each function returns a fresh dict, so a test may mutate what it gets.
"""

from __future__ import annotations

from typing import Any

USDC = "0x036CbD53842c5426634e7929541eC2318f3dCF7e"
PAYER = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
MERCHANT = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
NONCE = "0x" + "5a" * 32
TX_HASH = "0x" + "ab12" * 16
OTHER_TX_HASH = "0x" + "cd34" * 16
SIGNATURE = "0x" + "11" * 32 + "22" * 32 + "1b"


def resource() -> dict[str, Any]:
    return {"url": "https://merchant.example/a2a/skills/image", "description": "An image"}


def requirements_v2() -> dict[str, Any]:
    return {
        "scheme": "exact",
        "network": "eip155:84532",
        "asset": USDC,
        "amount": "10000",
        "payTo": MERCHANT,
        "maxTimeoutSeconds": 60,
        "extra": {"name": "USDC", "version": "2"},
    }


def required_v2() -> dict[str, Any]:
    return {"x402Version": 2, "resource": resource(), "accepts": [requirements_v2()]}


def exact_payload() -> dict[str, Any]:
    return {
        "authorization": {
            "from": PAYER,
            "to": MERCHANT,
            "value": "10000",
            "validAfter": "0",
            "validBefore": "1796015019",
            "nonce": NONCE,
        },
        "signature": SIGNATURE,
    }


def payload_v2() -> dict[str, Any]:
    return {"x402Version": 2, "payload": exact_payload(), "accepted": requirements_v2()}


def receipt_v2(*, success: bool = True, reason: str | None = None, tx: str = TX_HASH) -> dict[str, Any]:
    receipt: dict[str, Any] = {"success": success}
    if reason is not None:
        receipt["errorReason"] = reason
    receipt.update({"payer": PAYER, "transaction": tx, "network": "eip155:84532"})
    return receipt


def pending_v2(tx: str = TX_HASH) -> dict[str, Any]:
    return receipt_v2(success=False, reason="settlement_pending", tx=tx)


def failed_v2() -> dict[str, Any]:
    return receipt_v2(success=False, reason="transaction_failed", tx="")


def requirements_v1() -> dict[str, Any]:
    return {
        "scheme": "exact",
        "network": "base-sepolia",
        "maxAmountRequired": "10000",
        "resource": "https://merchant.example/a2a/skills/image",
        "description": "An image",
        "mimeType": "application/json",
        "payTo": MERCHANT,
        "maxTimeoutSeconds": 600,
        "asset": USDC,
        "extra": {"name": "USDC", "version": "2"},
    }


def required_v1() -> dict[str, Any]:
    return {"x402Version": 1, "error": "Payment required", "accepts": [requirements_v1()]}


def payload_v1() -> dict[str, Any]:
    return {"x402Version": 1, "scheme": "exact", "network": "base-sepolia", "payload": exact_payload()}


def receipt_v1() -> dict[str, Any]:
    return {"success": True, "payer": PAYER, "transaction": TX_HASH, "network": "base-sepolia"}


FACILITATOR = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"
EXACT_PROXY = "0x402085c248EeA27D92E8b30b2C58ed07f9E20001"
UPTO_PROXY = "0x4020A4f3b7b90ccA423B9fabCc0CE57C6C240002"
PERMIT2_NONCE = "115792089237316195423570985008687907853269984665640564039457584007913129639935"


def permit2_requirements(scheme: str = "exact") -> dict[str, Any]:
    """Terms of a Permit2 payment: `exact` by Permit2, or `upto` (its `amount` the maximum)."""
    extra: dict[str, Any] = {"assetTransferMethod": "permit2"} if scheme == "exact" else {}
    if scheme == "upto":
        extra["facilitatorAddress"] = FACILITATOR
    return {**requirements_v2(), "scheme": scheme, "amount": "50000", "extra": extra}


def required_permit2(scheme: str = "exact") -> dict[str, Any]:
    return {"x402Version": 2, "resource": resource(), "accepts": [permit2_requirements(scheme)]}


def permit2_payload(scheme: str = "exact") -> dict[str, Any]:
    """A v2 payment by a Permit2 witness transfer, in the wire types' field order."""
    witness: dict[str, Any] = {"to": MERCHANT, "validAfter": "0"}
    if scheme == "upto":
        witness = {"to": MERCHANT, "facilitator": FACILITATOR, "validAfter": "0"}
    authorization = {
        "from": PAYER,
        "permitted": {"token": USDC, "amount": "50000"},
        "spender": UPTO_PROXY if scheme == "upto" else EXACT_PROXY,
        "nonce": PERMIT2_NONCE,
        "deadline": "1796015019",
        "witness": witness,
    }
    return {
        "x402Version": 2,
        "payload": {"permit2Authorization": authorization, "signature": SIGNATURE},
        "accepted": permit2_requirements(scheme),
    }


def settled_v2(amount: str) -> dict[str, Any]:
    """A successful `upto` receipt naming the amount it settled."""
    return {
        "success": True,
        "payer": PAYER,
        "amount": amount,
        "transaction": TX_HASH,
        "network": "eip155:84532",
    }


def usage() -> dict[str, Any]:
    return {
        "maximum": "50000",
        "settled": "1300",
        "items": [
            {"name": "tokens", "quantity": "1200", "unitPrice": "1", "amount": "1200"},
            {"name": "images", "quantity": "2", "unitPrice": "50", "amount": "100"},
        ],
    }

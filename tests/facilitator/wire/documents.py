"""Realistic x402 documents for the wire tests, as fresh dicts in the x402 Python SDK's key order.

Each function returns a new object, so a test may mutate what it gets.
"""

from __future__ import annotations

from typing import Any

USDC_BASE_SEPOLIA = "0x036CbD53842c5426634e7929541eC2318f3dCF7e"
USDC_BASE = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913"
PAYER = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266"
MERCHANT = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
RELAYER = "0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC"
NONCE = "0x" + "5a" * 32
TX_HASH = "0x" + "ab12" * 16
# 65 bytes: r (32) || s (32) || v (1).
EOA_SIGNATURE = "0x" + "11" * 32 + "22" * 32 + "1b"


def requirements_v2() -> dict[str, Any]:
    return {
        "scheme": "exact",
        "network": "eip155:84532",
        "asset": USDC_BASE_SEPOLIA,
        "amount": "10000",
        "payTo": MERCHANT,
        "maxTimeoutSeconds": 60,
        "extra": {"name": "USDC", "version": "2"},
    }


def resource() -> dict[str, Any]:
    return {
        "url": "https://merchant.example/a2a/tasks/generate-image",
        "description": "Generate an image",
        "mimeType": "application/json",
    }


def payment_required_v2() -> dict[str, Any]:
    return {
        "x402Version": 2,
        "error": "Payment required",
        "resource": resource(),
        "accepts": [requirements_v2()],
        "extensions": {"payment-identifier": {"info": {"required": False}, "schema": {"type": "object"}}},
    }


def authorization() -> dict[str, Any]:
    return {
        "from": PAYER,
        "to": MERCHANT,
        "value": "10000",
        "validAfter": "0",
        "validBefore": "1796015019",
        "nonce": NONCE,
    }


def exact_payload() -> dict[str, Any]:
    return {"authorization": authorization(), "signature": EOA_SIGNATURE}


def payment_payload_v2() -> dict[str, Any]:
    return {
        "x402Version": 2,
        "payload": exact_payload(),
        "accepted": requirements_v2(),
        "resource": resource(),
    }


def verify_request_v2() -> dict[str, Any]:
    return {
        "x402Version": 2,
        "paymentPayload": payment_payload_v2(),
        "paymentRequirements": requirements_v2(),
    }


def requirements_v1() -> dict[str, Any]:
    return {
        "scheme": "exact",
        "network": "base-sepolia",
        "maxAmountRequired": "10000",
        "resource": "https://merchant.example/a2a/tasks/generate-image",
        "description": "Generate an image",
        "mimeType": "application/json",
        "payTo": MERCHANT,
        "maxTimeoutSeconds": 600,
        "asset": USDC_BASE_SEPOLIA,
        "outputSchema": {"type": "object", "properties": {"url": {"type": "string"}}},
        "extra": {"name": "USDC", "version": "2"},
    }


def payment_required_v1() -> dict[str, Any]:
    return {"x402Version": 1, "error": "Payment required", "accepts": [requirements_v1()]}


def payment_payload_v1() -> dict[str, Any]:
    return {"x402Version": 1, "scheme": "exact", "network": "base-sepolia", "payload": exact_payload()}


def verify_request_v1() -> dict[str, Any]:
    return {
        "x402Version": 1,
        "paymentPayload": payment_payload_v1(),
        "paymentRequirements": requirements_v1(),
    }


def settle_success_v2() -> dict[str, Any]:
    return {"success": True, "payer": PAYER, "transaction": TX_HASH, "network": "eip155:84532"}


def supported_v2() -> dict[str, Any]:
    return {
        "kinds": [
            {"x402Version": 2, "scheme": "exact", "network": "eip155:84532"},
            {"x402Version": 1, "scheme": "exact", "network": "base-sepolia"},
        ],
        "extensions": ["payment-identifier"],
        "signers": {"eip155:*": [RELAYER]},
    }

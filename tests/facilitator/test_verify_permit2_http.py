"""Permit2 payments over HTTP: `POST /verify` verifies the x402 Python and TypeScript SDK clients' `exact`
(Permit2) and `upto` payments, refuses bad ones with their reason and malformed ones as a clear 200 refusal,
claiming nothing; `POST /settle` settles them (an `upto` one for what its requirements charge); `/supported`
lists the kinds the chain has the contracts for."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import httpx
import pytest
from eth_account import Account

from a2a_x402.devchain import PERMIT2_ADDRESS, DevChain, encode_call
from a2a_x402.facilitator._supported import supported_response
from a2a_x402.facilitator.wire import Reason
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.facilitator import PAY_TO
from tests.fixtures.node import NodeScript

from .conftest import StartService
from .payments import claim_rows, relayer_address
from .permit2_chain import AMOUNT, funded_payer, permit2_requirements, sdk_sign, verify_body

_TS_CLIENT = Path(__file__).resolve().parent / "js" / "ts_permit2.cjs"
SCHEMES = ("exact", "upto")


async def _post(base_url: str, path: str, body: object) -> httpx.Response:
    async with httpx.AsyncClient(base_url=base_url, timeout=HANG_S) as client:
        return await client.post(path, json=body)


@pytest.mark.parametrize("scheme", SCHEMES)
async def test_the_python_sdk_clients_payments_verify_over_http(
    scheme: str, chain: DevChain, start_service: StartService, sqlite_url: str
) -> None:
    base_url = start_service(sqlite_url)
    asked = permit2_requirements(chain, scheme, chain.plain_asset)
    key = funded_payer(chain, asked.asset)

    answer = await _post(base_url, "/verify", verify_body(sdk_sign(chain, key, asked), asked))

    assert (answer.status_code, answer.json()) == (
        200,
        {"isValid": True, "payer": Account.from_key(key).address},
    )
    assert await claim_rows(sqlite_url) == []


async def test_the_typescript_sdk_clients_payments_verify_and_settle_over_http(
    chain: DevChain, start_service: StartService, node_script: NodeScript, sqlite_url: str
) -> None:
    base_url = start_service(sqlite_url)
    offers = [permit2_requirements(chain, scheme, chain.plain_asset) for scheme in SCHEMES]
    key = funded_payer(chain, chain.plain_asset)
    required = {
        "x402Version": 2,
        "resource": {
            "url": "https://merchant.example/report",
            "description": "a report",
            "mimeType": "text/plain",
        },
        "accepts": [offer.to_json_dict() for offer in offers],
    }

    payments = await node_script.run(_TS_CLIENT, {"privateKey": key, "paymentRequired": required})
    answers = [
        await _post(base_url, "/verify", verify_body(p, o)) for p, o in zip(payments, offers, strict=True)
    ]

    assert [p["accepted"]["scheme"] for p in payments] == list(SCHEMES)
    payer = Account.from_key(key).address
    assert [(a.status_code, a.json()) for a in answers] == [(200, {"isValid": True, "payer": payer})] * 2
    assert await claim_rows(sqlite_url) == []
    # Settled: the `exact` price, and what the `upto` work used.
    charges = [offers[0], offers[1].model_copy(update={"amount": AMOUNT // 3})]
    payee_before = chain.balance_of(PAY_TO, asset=chain.plain_asset)
    settled = [
        (await _post(base_url, "/settle", verify_body(p, c))).json()
        for p, c in zip(payments, charges, strict=True)
    ]
    assert [(s["success"], s["payer"], s["amount"]) for s in settled] == [
        (True, payer, str(AMOUNT)),
        (True, payer, str(AMOUNT // 3)),
    ]
    assert chain.balance_of(PAY_TO, asset=chain.plain_asset) == payee_before + AMOUNT + AMOUNT // 3


@pytest.mark.parametrize("scheme", SCHEMES)
async def test_a_refused_payment_is_a_200_with_its_reason_over_http(
    scheme: str, chain: DevChain, start_service: StartService, sqlite_url: str
) -> None:
    base_url = start_service(sqlite_url)
    asked = permit2_requirements(chain, scheme, chain.plain_asset)
    unapproved = sdk_sign(chain, funded_payer(chain, asked.asset, approved=False), asked)
    key = funded_payer(chain, asked.asset)
    invalidated = sdk_sign(chain, key, asked)
    nonce = int(invalidated["payload"]["permit2Authorization"]["nonce"])
    data = encode_call("invalidateUnorderedNonces(uint256,uint256)", [nonce >> 8, 1 << (nonce & 0xFF)])
    chain.rpc.transact(key, to=PERMIT2_ADDRESS, data=data)

    refusals = [await _post(base_url, "/verify", verify_body(p, asked)) for p in (unapproved, invalidated)]

    assert [(r.status_code, r.json()["isValid"], r.json()["invalidReason"]) for r in refusals] == [
        (200, False, Reason.PERMIT2_ALLOWANCE_REQUIRED.value),
        (200, False, Reason.PERMIT2_INVALID_NONCE.value),
    ]
    assert "approve Permit2" in refusals[0].json()["invalidMessage"]
    assert await claim_rows(sqlite_url) == []


def _changed(document: dict[str, Any], path: str, value: object) -> dict[str, Any]:
    """A copy of `document` with the dotted `path` set to `value` (None: removed)."""
    changed = copy.deepcopy(document)
    *parents, last = path.split(".")
    target = changed
    for name in parents:
        target = target[name]
    if value is None:
        del target[last]
    else:
        target[last] = value
    return changed


_AUTHORIZATION = "paymentPayload.payload.permit2Authorization"
MALFORMED = {
    "a nonce that is no number": (f"{_AUTHORIZATION}.nonce", "0xab", Reason.INVALID_PAYLOAD),
    "a deadline missing": (f"{_AUTHORIZATION}.deadline", None, Reason.INVALID_PAYLOAD),
    "a witness of unknown fields": (f"{_AUTHORIZATION}.witness.extra", "1", Reason.INVALID_PAYLOAD),
    "a signature that is no hex": ("paymentPayload.payload.signature", "0xzz", Reason.INVALID_PAYLOAD),
    "an amount beyond uint256": (f"{_AUTHORIZATION}.permitted.amount", str(2**256), Reason.INVALID_PAYLOAD),
    "an unknown scheme": ("paymentPayload.accepted.scheme", "later", Reason.INVALID_PAYLOAD),
    "requirements of another chain": ("paymentRequirements.network", "eip155:1", Reason.INVALID_NETWORK),
    "requirements of another transfer method": (
        "paymentRequirements.extra.assetTransferMethod",
        "eip3009",
        Reason.INVALID_PAYLOAD,
    ),
    "an extension info that is not an object": (
        "paymentPayload.extensions",
        {"eip2612GasSponsoring": {"info": "approve"}},
        Reason.INVALID_EIP2612_EXTENSION_FORMAT,
    ),
}


@pytest.mark.parametrize(("path", "value", "reason"), MALFORMED.values(), ids=MALFORMED.keys())
async def test_a_malformed_permit2_body_is_a_clear_refusal(
    path: str, value: object, reason: Reason, chain: DevChain, start_service: StartService, sqlite_url: str
) -> None:
    base_url = start_service(sqlite_url)
    asked = permit2_requirements(chain, "upto", chain.plain_asset)
    # Unapproved, so a malformed EIP-2612 extension is the one thing that could have paid.
    key = funded_payer(chain, asked.asset, approved=False)
    body = _changed(verify_body(sdk_sign(chain, key, asked), asked), path, value)

    answer = await _post(base_url, "/verify", body)

    assert answer.status_code == 200
    assert (answer.json()["isValid"], answer.json()["invalidReason"]) == (False, reason.value), answer.json()
    assert answer.json()["invalidMessage"]
    assert answer.json().get("payer") == Account.from_key(key).address
    assert await claim_rows(sqlite_url) == []


@pytest.mark.parametrize("scheme", SCHEMES)
async def test_the_python_sdk_clients_payments_settle_over_http(
    scheme: str, chain: DevChain, start_service: StartService, sqlite_url: str
) -> None:
    base_url = start_service(sqlite_url)
    asked = permit2_requirements(chain, scheme, chain.plain_asset)
    key = funded_payer(chain, asked.asset)
    payment = sdk_sign(chain, key, asked)
    # An `upto` merchant settles what the work used; an `exact` one the price.
    charged = asked.model_copy(update={"amount": AMOUNT // 4}) if scheme == "upto" else asked
    payee_before = chain.balance_of(PAY_TO, asset=asked.asset)

    answer = await _post(base_url, "/settle", verify_body(payment, charged))
    status = await _post(base_url, "/settle/status", verify_body(payment, charged))

    assert answer.status_code == 200
    body = answer.json()
    assert (body["success"], body["payer"], body["amount"]) == (
        True,
        Account.from_key(key).address,
        str(charged.amount),
    )
    assert (status.status_code, status.json()) == (200, body)
    assert chain.balance_of(PAY_TO, asset=asked.asset) == payee_before + charged.amount
    assert [row["state"] for row in await claim_rows(sqlite_url)] == ["succeeded"]


def test_supported_would_list_upto_and_permit2_for_a_chain_with_them() -> None:
    relayer = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
    supported = supported_response("eip155:84532", 84532, [relayer], ("exact", "upto")).to_json_dict()

    assert supported["kinds"] == [
        {
            "x402Version": 2,
            "scheme": "exact",
            "network": "eip155:84532",
            "extra": {"assetTransferMethods": ["eip3009", "permit2"]},
        },
        {
            "x402Version": 2,
            "scheme": "upto",
            "network": "eip155:84532",
            "extra": {"facilitatorAddress": relayer},
        },
        {"x402Version": 1, "scheme": "exact", "network": "base-sepolia"},
    ]
    assert supported["extensions"] == ["payment-identifier", "eip2612GasSponsoring"]


async def test_supported_lists_the_permit2_kinds_of_a_chain_with_their_contracts(
    chain: DevChain, start_service: StartService, sqlite_url: str
) -> None:
    async with httpx.AsyncClient(timeout=HANG_S, base_url=start_service(sqlite_url)) as client:
        supported = (await client.get("/supported")).json()

    assert supported["kinds"] == [
        {
            "x402Version": 2,
            "scheme": "exact",
            "network": chain.network,
            "extra": {"assetTransferMethods": ["eip3009", "permit2"]},
        },
        {
            "x402Version": 2,
            "scheme": "upto",
            "network": chain.network,
            "extra": {"facilitatorAddress": relayer_address(chain)},
        },
        {"x402Version": 1, "scheme": "exact", "network": "base-sepolia"},
    ]
    assert supported["extensions"] == ["payment-identifier", "eip2612GasSponsoring"]
    assert supported["signers"] == {"eip155:*": [relayer_address(chain)]}


async def test_supported_lists_neither_on_a_chain_without_permit2(
    chain: DevChain, start_service: StartService, sqlite_url: str
) -> None:
    chain.rpc.call("anvil_setCode", [PERMIT2_ADDRESS, "0x"])

    async with httpx.AsyncClient(timeout=HANG_S, base_url=start_service(sqlite_url)) as client:
        supported = (await client.get("/supported")).json()

    assert supported["kinds"] == [
        {"x402Version": 2, "scheme": "exact", "network": chain.network},
        {"x402Version": 1, "scheme": "exact", "network": "base-sepolia"},
    ]
    assert supported["extensions"] == ["payment-identifier"]

"""A payment with its AP2 mandates, served for real (§20.5, §20.6): the mandates are verified before
anything of the payment is recorded, and their use is counted with its presentation and confirmed with
the round's settlement. Refused mandates change nothing (no presentation, no settlement, no ledger row,
the payer's balance and the task as they were, the terms still valid) and are answered with
`InvalidParamsError` carrying the `ap2Error` and the merchant's error receipts; a tenant that requires
mandates refuses a payment without them the same way, without receipts. The completed round carries the
success receipts, each verified with the tenant's published keys and answering the mandates sent.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from eth_account import Account

from a2a_x402.devchain import DevChain
from a2a_x402.extension import Ap2ErrorCode, PaymentCompletedData
from a2a_x402.merchant.edge import JSONRPC_PATH
from a2a_x402.payer import present_mandates, sign_payment
from tests.agentcard.conftest import KeyServer
from tests.fixtures.ap2 import MERCHANT, OpenTerms, issue_open_mandates, new_key, public_jwks
from tests.fixtures.merchant import (
    MerchantStarter,
    MerchantWire,
    RunningMerchant,
    ledger_entries,
    offered_terms,
    payment_data,
    payment_message,
    user_message,
)
from tests.merchant.ap2.shop import ACME, JSON, rows, status_receipts, verified_receipts, with_mandates
from tests.merchant.ap2.support import write_key
from tests.merchant.ap2.test_offer import checkout_of

pytest.importorskip(
    "ap2.sdk.mandate",
    reason="the AP2 SDK is not installed (scripts/setup installs it from ../shared/peers/ap2)",
)


async def refused(http: httpx.AsyncClient, tenant: str, message: JSON) -> tuple[str, str, JSON]:
    """Send `message` over JSON-RPC, expecting `InvalidParamsError`: the `ap2Error` its ErrorInfo carries,
    its message and the ErrorInfo's whole metadata."""
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"tenant": tenant, "message": message},
    }
    answer = (await http.post(JSONRPC_PATH, json=request)).json()
    assert "error" in answer, answer
    assert answer["error"]["code"] == -32602
    [info] = [d for d in answer["error"]["data"] if d["@type"].endswith("google.rpc.ErrorInfo")]
    code: str = info["metadata"]["ap2Error"]
    assert code in answer["error"]["message"]
    return code, answer["error"]["message"], info["metadata"]


async def test_refused_mandates_change_nothing_and_good_ones_pay(
    shop: RunningMerchant, chain: DevChain, user_key: Any
) -> None:
    now = int(time.time())
    payer_key = chain.new_payer()
    payer = Account.from_key(payer_key).address
    before = chain.balance_of(payer)
    async with shop.http() as http:
        wire = MerchantWire(http, "jsonrpc", "acme")
        task = (await wire.send(user_message()))["task"]
        checkout = checkout_of(task)
        [entry] = offered_terms(task).accepts
        assert checkout is not None and entry.extra is not None
        offer_id = entry.extra["offerId"]
        opened = issue_open_mandates(user_key, new_key(), OpenTerms(), now=now)

        # Mandates for one payment, presented with another of the same terms: its payload_hash differs.
        paid = sign_payment(payer_key, entry).to_json_dict()
        other = sign_payment(payer_key, entry).to_json_dict()
        mandates = present_mandates(opened, checkout, other, MERCHANT.id, offer_id, now=now)
        swapped = with_mandates(payment_message(task["id"], paid), mandates)
        code, says, metadata = await refused(http, "acme", swapped)
        assert code == Ap2ErrorCode.INVALID_MANDATE and "payload_hash" in says
        # Error receipts, signed by the tenant, answering the mandates sent: they were not used.
        checkout_receipt, payment_receipt = await verified_receipts(
            http, "acme", metadata["ap2CheckoutReceipt"], metadata["ap2PaymentReceipt"], mandates
        )
        assert checkout_receipt["status"] == payment_receipt["status"] == "Error"
        assert checkout_receipt["error"] == payment_receipt["error"] == "invalid_mandate"
        assert payment_receipt["payment_id"] == offer_id

        # Mandates a surface the tenant does not trust issued.
        stranger = issue_open_mandates(new_key("stranger"), new_key(), OpenTerms(), now=now)
        untrusted = present_mandates(stranger, checkout, paid, MERCHANT.id, offer_id, now=now)
        message = with_mandates(payment_message(task["id"], paid), untrusted)
        code, says, metadata = await refused(http, "acme", message)
        assert code == Ap2ErrorCode.INVALID_CREDENTIAL, says
        _, payment_receipt = await verified_receipts(
            http, "acme", metadata["ap2CheckoutReceipt"], metadata["ap2PaymentReceipt"], untrusted
        )
        assert payment_receipt["error"] == "invalid_credential"

        # Nothing changed: the task awaits its payment, nothing presented, counted, settled or booked.
        assert (await wire.get_task(task["id"]))["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        for table in ("payment_presentations", "ap2_mandate_uses"):
            assert await rows(shop.database_url, table) == []
        assert await ledger_entries(shop.database_url, tenant="acme") == []
        assert chain.balance_of(payer) == before

        # The same payment with its own mandates pays the same terms, and its use is counted.
        good = present_mandates(opened, checkout, paid, MERCHANT.id, offer_id, now=now)
        done = (await wire.send(with_mandates(payment_message(task["id"], paid), good)))["task"]
        assert done["status"]["state"] == "TASK_STATE_COMPLETED"
        completed = payment_data(done)
        assert isinstance(completed, PaymentCompletedData)
        receipts = status_receipts(done)
        assert receipts is not None
        checkout_receipt, payment_receipt = await verified_receipts(http, "acme", *receipts, good)
        # The stored task carries them too: they are part of the status, not of this answer only.
        assert status_receipts(await wire.get_task(task["id"])) == receipts
    [x402_receipt] = completed.receipts
    transaction = x402_receipt.transaction
    assert (checkout_receipt["status"], checkout_receipt["order_id"]) == ("Success", task["id"])
    assert (payment_receipt["status"], payment_receipt["payment_id"]) == ("Success", offer_id)
    assert payment_receipt["psp_confirmation_id"] == transaction
    assert payment_receipt["network_confirmation_id"] == f"{entry.network}:{transaction}"
    # Settled: its use counts for good.
    [use] = await rows(shop.database_url, "ap2_mandate_uses")
    assert (use.tenant, use.task_id, use.amount, use.state) == ("acme", task["id"], 10, "confirmed")
    assert len(await ledger_entries(shop.database_url, tenant="acme")) == 1
    assert chain.balance_of(payer) == before - entry.amount


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_a_tenant_that_requires_mandates_refuses_a_payment_without_them(
    shop: RunningMerchant, chain: DevChain
) -> None:
    payer_key = chain.new_payer()
    async with shop.http() as http:
        wire = MerchantWire(http, "jsonrpc", "strict")
        task = (await wire.send(user_message()))["task"]
        [entry] = offered_terms(task).accepts
        message = payment_message(task["id"], sign_payment(payer_key, entry))
        code, says, metadata = await refused(http, "strict", message)
        assert code == Ap2ErrorCode.INVALID_MANDATE and "only with AP2 mandates" in says
        assert metadata == {"ap2Error": "invalid_mandate"}  # no mandates: nothing for receipts to answer
        assert (await wire.get_task(task["id"]))["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert await rows(shop.database_url, "payment_presentations") == []
    assert await ledger_entries(shop.database_url, tenant="strict") == []


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_mandates_of_an_issuer_whose_keys_are_fetched_over_https_pay(
    start_merchant: MerchantStarter,
    database_url: str,
    tmp_path: Path,
    chain: DevChain,
    tls_key_server: KeyServer,
    tls_ca_file: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """acme trusts only an agent provider's JWK Set at an https URL, which the merchant fetches over TLS
    (trusting the test server's certificate alone): its mandates pay, a stranger's are refused, and the
    stranger's unknown kid does not make the merchant ask the provider again."""
    monkeypatch.setenv("SSL_CERT_FILE", str(tls_ca_file))
    provider = new_key("agent-provider-1")
    tls_key_server.jwks = public_jwks(provider)
    write_key(tmp_path / "acme.pem")
    (tmp_path / "tenants.toml").write_text(
        f'[tenants.acme]\npay_to = "{ACME[0]}"\nprice = {ACME[1]}\n\n'
        f'[tenants.acme.ap2]\nmerchant = {{ id = "{MERCHANT.id}", name = "{MERCHANT.name}" }}\n'
        f'checkout_keys = ["acme.pem"]\nissuers = ["{tls_key_server.jwks_url}"]\n'
    )
    shop = start_merchant(database_url, tenants_file=tmp_path / "tenants.toml")
    now = int(time.time())
    payer_key = chain.new_payer()
    async with shop.http() as http:
        wire = MerchantWire(http, "jsonrpc", "acme")
        task = (await wire.send(user_message()))["task"]
        checkout = checkout_of(task)
        [entry] = offered_terms(task).accepts
        assert checkout is not None and entry.extra is not None
        offer_id = entry.extra["offerId"]
        paid = sign_payment(payer_key, entry).to_json_dict()

        stranger = issue_open_mandates(new_key("stranger-1"), new_key(), OpenTerms(), now=now)
        untrusted = present_mandates(stranger, checkout, paid, MERCHANT.id, offer_id, now=now)
        code, says, _ = await refused(
            http, "acme", with_mandates(payment_message(task["id"], paid), untrusted)
        )
        assert code == Ap2ErrorCode.INVALID_CREDENTIAL and "stranger-1" in says

        opened = issue_open_mandates(provider, new_key(), OpenTerms(), now=now)
        good = present_mandates(opened, checkout, paid, MERCHANT.id, offer_id, now=now)
        done = (await wire.send(with_mandates(payment_message(task["id"], paid), good)))["task"]
        assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert tls_key_server.hits["/.well-known/jwks.json"] == 1
    [use] = await rows(shop.database_url, "ap2_mandate_uses")
    assert (use.tenant, use.task_id, use.state) == ("acme", task["id"], "confirmed")

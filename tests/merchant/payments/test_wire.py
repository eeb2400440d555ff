"""The v0.2 terms (`_wire.terms_for`) as x402 v1-era clients read them, from the reference merchant.

A 0.3 client is offered x402 v1 terms in `x402.payment.required`. The a2a-x402 Python client parses them
with the x402 0.2 package's pydantic models, which require every field the x402 v1 specification lists and
`mimeType` besides; terms missing one parse to nothing there, and the client sees no terms at all. So the
x402 0.2 package itself (in `.venv-compat`, run as a subprocess) reads the terms a real merchant sends over
both 0.3 bindings, picks the option to pay and signs it, and the merchant takes that payment.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from a2a.types import Message, Role
from eth_account import Account
from google.protobuf.json_format import MessageToDict

from a2a_x402.devchain import DevChain
from a2a_x402.extension import EXTENSION_URI, EXTENSION_URI_V02, Dialect, PaymentSubmittedData, encode
from a2a_x402.facilitator.wire import (
    PaymentPayload,
    PaymentRequired,
    PaymentRequiredV1,
    parse_permit2_payment_payload,
)
from a2a_x402.merchant.payments._wire import match_offer, strip_signature, terms_for
from tests.extension import documents as doc
from tests.fixtures.compat import CompatPython
from tests.fixtures.merchant import DEFAULT_PAY_TO, DEFAULT_PRICE, RunningMerchant, ledger_entries

from .flows import V03Client, state_of

JSON = dict[str, Any]
TEXT = "The quick brown fox. The dog sleeps."

# The x402 v1 fields of the a2a-x402 v0.2 extension's x402PaymentRequiredResponse and its
# PaymentRequirements, as its Python package (x402 0.2 models) requires them; `outputSchema` is optional.
V1_REQUIRED_FIELDS = frozenset({"x402Version", "accepts", "error"})
V1_REQUIREMENTS_FIELDS = frozenset(
    {
        "scheme",
        "network",
        "maxAmountRequired",
        "resource",
        "description",
        "mimeType",
        "payTo",
        "maxTimeoutSeconds",
        "asset",
        "extra",
    }
)

# Run in .venv-compat: parse the terms as the a2a-x402 client does (`x402PaymentRequiredResponse`), choose
# an option with x402's own client and sign an EIP-3009 authorization for it, as an x402 v1 payload.
X402_V1_CLIENT = """
import json, sys
from eth_account import Account
from x402.clients.base import x402Client
from x402.exact import decode_payment
from x402.types import x402PaymentRequiredResponse

given = json.load(sys.stdin)
required = x402PaymentRequiredResponse.model_validate(given["required"])
client = x402Client(Account.from_key(given["key"]))
chosen = client.select_payment_requirements(required.accepts)
payload = decode_payment(client.create_payment_header(chosen, required.x402_version))
print(json.dumps({
    "required": required.model_dump(mode="json", by_alias=True),
    "chosen": chosen.model_dump(mode="json", by_alias=True),
    "payload": payload,
}))
"""


@pytest.mark.parametrize("binding", ["jsonrpc", "rest"])
async def test_x402_0_2_parses_the_v1_terms_and_its_payment_is_taken(
    sqlite_merchant: RunningMerchant,
    chain: DevChain,
    payer_key: str,
    compat_python: CompatPython,
    binding: str,
) -> None:
    headers = {"X-A2A-Extensions": EXTENSION_URI_V02}
    async with httpx.AsyncClient(base_url=sqlite_merchant.base_url, headers=headers, timeout=30) as http:
        client = V03Client(http, binding)
        task = await client.send(TEXT)
        assert state_of(task) == "input-required"
        metadata = task["status"]["message"]["metadata"]
        assert metadata["x402.payment.status"] == "payment-required"
        terms = metadata["x402.payment.required"]

        # Every field of the upstream v0.2 field list is on the wire, and nothing else.
        assert set(terms) == V1_REQUIRED_FIELDS
        [offered] = terms["accepts"]
        assert set(offered) == V1_REQUIREMENTS_FIELDS

        read = await compat_python.run(X402_V1_CLIENT, {"required": terms, "key": payer_key})

        parsed = read["required"]
        assert parsed["x402Version"] == 1
        assert parsed["error"].startswith("Payment required: 0.25 USDC to ")
        [requirements] = parsed["accepts"]
        assert read["chosen"] == requirements
        assert requirements["scheme"] == "exact"
        assert requirements["network"] == "base-sepolia"
        assert requirements["maxAmountRequired"] == str(DEFAULT_PRICE)
        assert requirements["payTo"] == DEFAULT_PAY_TO
        assert requirements["asset"] == chain.asset
        assert requirements["resource"] == f"{sqlite_merchant.settings.base_url}/skills/text-stats"
        assert requirements["description"] == "text-stats for 0.25 USDC"
        assert requirements["mimeType"] == "application/json"
        assert requirements["maxTimeoutSeconds"] == 300
        assert requirements["extra"]["name"] == chain.asset_name
        assert requirements["extra"]["version"] == chain.asset_version

        payload = read["payload"]
        assert (payload["x402Version"], payload["network"]) == (1, "base-sepolia")
        submission = {"x402.payment.status": "payment-submitted", "x402.payment.payload": payload}
        done = await client.send("Here is the payment.", task_id=task["id"], metadata=submission)

    assert state_of(done) == "completed", done
    final = done["status"]["message"]["metadata"]
    assert final["x402.payment.status"] == "payment-completed"
    [receipt] = final["x402.payment.receipts"]
    assert (receipt["success"], receipt["network"]) == (True, "base-sepolia")
    assert receipt["payer"] == Account.from_key(payer_key).address
    assert done["artifacts"]
    [booked] = await ledger_entries(sqlite_merchant.database_url)
    assert booked.amount == DEFAULT_PRICE


def v2_terms(**resource: str) -> PaymentRequired:
    """One-option x402 v2 terms on Base Sepolia, with `resource` members added to its url."""
    return PaymentRequired.from_wire(
        {
            "x402Version": 2,
            "resource": {"url": "https://merchant.example/skills/text-stats", **resource},
            "accepts": [
                {
                    "scheme": "exact",
                    "network": "eip155:84532",
                    "asset": "0x036CbD53842c5426634e7929541eC2318f3dCF7e",
                    "amount": "250000",
                    "payTo": DEFAULT_PAY_TO,
                    "maxTimeoutSeconds": 300,
                    "extra": {"name": "USDC", "version": "2"},
                }
            ],
        }
    )


def test_v0_3_terms_are_the_v2_terms_unchanged() -> None:
    required = v2_terms()
    assert terms_for(required, Dialect.V03, mime_type="text/plain", reason="why") is required


def test_v0_2_terms_take_the_mime_type_and_reason_given() -> None:
    v1 = terms_for(v2_terms(), Dialect.V02, mime_type="image/png", reason="Payment required: 0.25 USDC.")
    assert isinstance(v1, PaymentRequiredV1)
    wire = v1.to_json_dict()
    assert set(wire) == V1_REQUIRED_FIELDS and set(wire["accepts"][0]) == V1_REQUIREMENTS_FIELDS
    assert (wire["error"], wire["accepts"][0]["mimeType"]) == ("Payment required: 0.25 USDC.", "image/png")
    # Nothing to say is still said: the fields are present, empty.
    empty = terms_for(v2_terms(), Dialect.V02, mime_type="", reason="").to_json_dict()
    [option] = empty["accepts"]
    assert (empty["error"], option["mimeType"], option["description"]) == ("", "", "")


def test_v0_2_terms_keep_what_the_v2_terms_already_say() -> None:
    required = v2_terms(mimeType="text/csv", description="a table").model_copy(update={"error": "own"})
    wire = terms_for(required, Dialect.V02, mime_type="image/png", reason="other").to_json_dict()
    [accepted] = wire["accepts"]
    assert (wire["error"], accepted["mimeType"], accepted["description"]) == ("own", "text/csv", "a table")


def test_v0_2_terms_paid_through_permit2_stay_x402_v2() -> None:
    # x402 v1 knows no Permit2 payment: a 0.3 client is offered the v2 terms, as it would pay them.
    for scheme, extra in (("exact", {"assetTransferMethod": "permit2"}), ("upto", {})):
        required = PaymentRequired.from_wire(
            {**v2_terms().to_json_dict(), "accepts": [{**doc.permit2_requirements(scheme), "extra": extra}]}
        )
        assert terms_for(required, Dialect.V02, mime_type="text/plain", reason="why") is required


@pytest.mark.parametrize("dialect", list(Dialect))
def test_the_stored_message_keeps_no_signature_of_a_permit2_payment(dialect: Dialect) -> None:
    payment = doc.permit2_payload()
    permit = {"from": doc.PAYER, "asset": doc.USDC, "signature": doc.SIGNATURE}
    payment["extensions"] = {"eip2612GasSponsoring": {"info": permit}}
    data = PaymentSubmittedData(parse_permit2_payment_payload(payment))
    message = Message(message_id="m", role=Role.ROLE_USER)
    message.metadata.update(encode(data, dialect))

    strip_signature(message, dialect)

    kept = MessageToDict(message)["metadata"]
    value = kept[EXTENSION_URI]["payload"] if dialect is Dialect.V03 else kept["x402.payment.payload"]
    assert "signature" not in value["payload"]
    assert value["payload"]["permit2Authorization"] == payment["payload"]["permit2Authorization"]
    assert value["extensions"]["eip2612GasSponsoring"]["info"] == {"from": doc.PAYER, "asset": doc.USDC}
    assert doc.SIGNATURE not in str(kept)


def test_a_payment_of_the_other_transfer_method_pays_no_terms() -> None:
    eip3009 = PaymentPayload.from_wire(doc.payload_v2())
    permit2 = parse_permit2_payment_payload(doc.permit2_payload())
    eip3009_terms = PaymentRequired.from_wire(doc.required_v2())
    permit2_terms = PaymentRequired.from_wire(doc.required_permit2())
    assert match_offer(eip3009, eip3009_terms) == (eip3009, eip3009_terms.accepts[0])
    assert match_offer(permit2, permit2_terms) == (permit2, permit2_terms.accepts[0])
    # The same terms but for the method, as a payer might sign them by mistake.
    assert (
        match_offer(eip3009.model_copy(update={"accepted": permit2_terms.accepts[0]}), permit2_terms) is None
    )
    assert (
        match_offer(permit2.model_copy(update={"accepted": eip3009_terms.accepts[0]}), eip3009_terms) is None
    )
    # A Permit2 transfer of another token, or to another payee, pays nothing either.
    for changed in (
        {"permitted": {"token": doc.MERCHANT, "amount": "50000"}},
        {"witness": {"to": doc.PAYER, "validAfter": "0"}},
    ):
        wire = doc.permit2_payload()
        wire["payload"]["permit2Authorization"].update(changed)
        assert match_offer(parse_permit2_payment_payload(wire), permit2_terms) is None

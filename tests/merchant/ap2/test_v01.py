"""The embedded flow's v0.2 form on A2A 0.3 (§20.7), served for real to a 0.3 client using the AP2 SDK's
v0.1 models: a tenant whose `ap2` entry is required offers an AP2 v0.1 `CartMandate` instead of
`x402.payment.required`, and takes the x402 payment inside a `PaymentMandate`. The payment is then taken
as a standalone one (booked, receipts in `x402.payment.receipts`); every refused mandate changes nothing.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from eth_account import Account
from joserfc import jws
from joserfc.jwk import KeySet

from a2a_x402.devchain import DevChain
from a2a_x402.extension import EXTENSION_URI_V02, JsonValue
from a2a_x402.facilitator.wire import PaymentRequired
from a2a_x402.merchant.ap2 import build_cart, cart_digest, load_checkout_keys
from a2a_x402.merchant.edge import JSONRPC_PATH, tenant_root
from a2a_x402.payer import sign_payment
from a2a_x402.storage import create_engine
from tests.agentcard.conftest import KeyServer
from tests.fixtures.a2a_errors import A2ACallError
from tests.fixtures.ap2 import MERCHANT, new_key, public_jwks
from tests.fixtures.ap2_v01 import Shopper, cart_of, digest, mandate_message, x402_terms
from tests.fixtures.merchant import (
    DEFAULT_PAY_TO,
    MerchantStarter,
    MerchantWire,
    RunningMerchant,
    ledger_entries,
    payment_message,
)
from tests.fixtures.wire_v0_3 import BINDINGS_V0_3, WireV0_3, message_v0_3, state_of
from tests.merchant.ap2.support import write_key
from tests.merchant.edge.test_paid_versions import v1_payload

pytest.importorskip(
    "ap2.models.mandate",
    reason="the AP2 SDK is not installed (scripts/setup installs it from ../shared/peers/ap2)",
)

STRICT = ("0x14dC79964da2C08b23698B3D3cc7Ca32193d9955", 100_000)  # 10 cents, mandates required
ACME = ("0x976EA74026E726554dB657fA54763abd0C3a0aa9", 100_000)  # in the embedded flow, not required
JSON = dict[str, Any]


@pytest.fixture
def user_key() -> Any:
    return new_key("trusted-surface")


@pytest.fixture
def shop(
    start_merchant: MerchantStarter, database_url: str, tmp_path: Path, user_key: Any
) -> RunningMerchant:
    (tmp_path / "surface.jwks.json").write_text(json.dumps(public_jwks(user_key)))
    write_key(tmp_path / "strict.pem")
    write_key(tmp_path / "acme.pem")
    (tmp_path / "tenants.toml").write_text(
        f'[default]\npay_to = "{DEFAULT_PAY_TO}"\nprice = 250000\n\n'
        f'[tenants.strict]\npay_to = "{STRICT[0]}"\nprice = {STRICT[1]}\n\n'
        f'[tenants.strict.ap2]\nmerchant = {{ id = "{MERCHANT.id}", name = "{MERCHANT.name}", '
        f'website = "{MERCHANT.website}" }}\n'
        'checkout_keys = ["strict.pem"]\nissuers = ["surface.jwks.json"]\nrequired = true\n\n'
        f'[tenants.acme]\npay_to = "{ACME[0]}"\nprice = {ACME[1]}\n\n'
        '[tenants.acme.ap2]\nmerchant = { id = "acme.example", name = "Acme" }\n'
        'checkout_keys = ["acme.pem"]\nissuers = ["surface.jwks.json"]\n'
    )
    return start_merchant(database_url, tenants_file=tmp_path / "tenants.toml")


async def rows(database_url: str, table: str) -> list[Any]:
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            return list((await connection.execute(sa.text(f"SELECT * FROM {table}"))).all())  # noqa: S608
    finally:
        await engine.dispose()


async def refused(wire: WireV0_3, message: JSON) -> str:
    """Send `message`, expecting `InvalidParamsError`; its message."""
    with pytest.raises(A2ACallError) as caught:
        await wire.send(message)
    assert caught.value.reason == "INVALID_PARAMS", caught.value
    return str(caught.value)


def status_metadata(task: JSON) -> JSON:
    metadata: JSON = task["status"]["message"].get("metadata", {})
    return metadata


@pytest.mark.parametrize("binding_v0_3", BINDINGS_V0_3)
async def test_a_0_3_shopper_pays_through_the_cart(
    shop: RunningMerchant, chain: DevChain, user_key: Any, binding_v0_3: str
) -> None:
    now = int(time.time())
    shopper = Shopper(user_key, new_key())
    payer_key = chain.new_payer()
    payer = Account.from_key(payer_key).address
    before = chain.balance_of(payer)
    async with WireV0_3.client(shop.base_url) as http:
        jwks = (await http.get("/.well-known/ap2/strict/jwks.json")).json()
        wire = WireV0_3(http, binding_v0_3, "strict")
        task = await wire.send(message_v0_3("The quick brown fox."))
        assert state_of(task) == "input-required", task
        # §20.7: the terms are in the cart only; x402.payment.required is not sent.
        assert status_metadata(task) == {"x402.payment.status": "payment-required"}
        cart = cart_of(task)
        assert cart is not None
        terms = x402_terms(cart)
        [entry] = terms["accepts"]
        assert cart.contents.id == entry["extra"]["offerId"]
        assert cart.contents.merchant_name == MERCHANT.name
        total = cart.contents.payment_request.details.total.amount
        assert (total.currency, total.value) == ("USD", 0.10)
        signed = jws.deserialize_compact(cart.merchant_authorization, KeySet.import_key_set(jwks))
        claims = json.loads(signed.payload)
        assert claims["cart_hash"] == digest(cart.contents.model_dump(mode="json"))
        assert claims["jti"] == cart.contents.id

        payment = v1_payload(payer_key, terms)
        mandate = shopper.pay(cart, payment, merchant_id=MERCHANT.id, now=now)
        done = await wire.send(mandate_message(task["id"], mandate))
        assert state_of(done) == "completed", done
        metadata = status_metadata(done)
        assert metadata["x402.payment.status"] == "payment-completed"
        [receipt] = metadata["x402.payment.receipts"]
        assert receipt["success"] is True
        assert not any(key.startswith("ap2.") for key in json.dumps(metadata).split('"'))
        # The stored history keeps neither the payment's signature nor the user's authorization.
        stored = json.dumps(await wire.get_task(task["id"]))
        assert payment["payload"]["signature"] not in stored
        assert str(mandate["user_authorization"]) not in stored
    [booked] = await ledger_entries(shop.database_url, tenant="strict")
    assert booked.amount == STRICT[1]
    assert chain.balance_of(payer) == before - STRICT[1]


async def test_refused_mandates_change_nothing_then_the_good_one_pays(
    shop: RunningMerchant, chain: DevChain, user_key: Any, new_payer: Callable[..., str]
) -> None:
    now = int(time.time())
    shopper = Shopper(user_key, new_key())
    payer_key = new_payer()
    payer = Account.from_key(payer_key).address
    before = chain.balance_of(payer)
    async with WireV0_3.client(shop.base_url) as http:
        wire = WireV0_3(http, "jsonrpc", "strict")
        task = await wire.send(message_v0_3("The quick brown fox."))
        other = await wire.send(message_v0_3("Another request."))
        cart, other_cart = cart_of(task), cart_of(other)
        terms = x402_terms(cart)
        paid = v1_payload(payer_key, terms)
        swap = v1_payload(payer_key, terms)

        def pay(**changes: Any) -> JSON:
            return mandate_message(
                task["id"], shopper.pay(cart, paid, merchant_id=MERCHANT.id, now=now, **changes)
            )

        # The user signed one payment, the mandate carries another of the same terms.
        says = await refused(wire, pay(signed_payment=swap))
        assert "invalid_mandate" in says and "payment_mandate_contents" in says
        # The user signed a tampered cart: another price.
        tampered = cart.model_copy(deep=True)
        tampered.contents.payment_request.details.total.amount.value = 0.01
        says = await refused(wire, pay(signed_cart=tampered))
        assert "invalid_mandate" in says and "CartMandate" in says
        # The user signed another offer's cart.
        says = await refused(wire, pay(signed_cart=other_cart))
        assert "invalid_mandate" in says and "CartMandate" in says
        # The mandate names another offer.
        says = await refused(wire, pay(request_id=other_cart.contents.id))
        assert "invalid_mandate" in says and "request_id" in says
        # A user_authorization of an issuer the tenant does not trust, and one the agent did not sign.
        stranger = Shopper(new_key("stranger"), shopper.agent_key)
        message = mandate_message(task["id"], stranger.pay(cart, paid, merchant_id=MERCHANT.id, now=now))
        assert "invalid_credential" in await refused(wire, message)
        forged = shopper.pay(cart, paid, merchant_id=MERCHANT.id, now=now)
        contents_hashes = (digest(cart.model_dump(mode="json")), digest(forged["payment_mandate_contents"]))
        forged["user_authorization"] = shopper.authorize(
            contents_hashes, aud=MERCHANT.id, nonce=cart.contents.id, now=now, signer=new_key()
        )
        assert "invalid_credential" in await refused(wire, mandate_message(task["id"], forged))
        # Addressed to another merchant.
        message = mandate_message(task["id"], shopper.pay(cart, paid, merchant_id="other.example", now=now))
        assert "invalid_credential" in await refused(wire, message)
        # The payment in x402.payment.payload beside the mandate (§20.7: MUST NOT be sent).
        good = shopper.pay(cart, paid, merchant_id=MERCHANT.id, now=now)
        beside = {"x402.payment.status": "payment-submitted", "x402.payment.payload": paid}
        assert "no x402.payment.payload" in await refused(
            wire, mandate_message(task["id"], good, metadata=beside)
        )
        # A replay: this mandate on the other task, whose terms its payment does not pay.
        await refused(wire, mandate_message(other["id"], good))
        # A standalone payment for the required tenant.
        plain = message_v0_3("pay", task_id=task["id"], metadata=beside)
        assert "only with a PaymentMandate" in await refused(wire, plain)
        # The round's cart paid on A2A 1.0, with the stored terms and a 1.0 mandates part.
        offers = await rows(shop.database_url, "payment_offers")
        [required] = [row.required for row in offers if row.task_id == task["id"]]
        required = json.loads(required) if isinstance(required, str) else required  # SQLite: text
        [entry] = PaymentRequired.from_wire(required).accepts
        on_1_0 = payment_message(task["id"], sign_payment(payer_key, entry))
        on_1_0["parts"].append({"data": {"ap2.checkout_mandate": "a~b~", "ap2.payment_mandate": "c~d~"}})
        async with shop.http() as http_1_0:
            with pytest.raises(A2ACallError) as caught:
                await MerchantWire(http_1_0, "jsonrpc", "strict").send(on_1_0)
        assert "invalid_mandate" in str(caught.value) and "only with a PaymentMandate" in str(caught.value)

        # Nothing changed: both tasks await payment, nothing presented, booked or moved.
        for waiting in (task, other):
            assert state_of(await wire.get_task(waiting["id"])) == "input-required"
        assert await rows(shop.database_url, "payment_presentations") == []
        assert await ledger_entries(shop.database_url, tenant="strict") == []
        assert chain.balance_of(payer) == before

        done = await wire.send(mandate_message(task["id"], good))
        assert state_of(done) == "completed", done
        # Replayed after it was taken: the task has ended, nothing more is taken.
        with pytest.raises(A2ACallError):
            await wire.send(mandate_message(task["id"], good))
    assert len(await ledger_entries(shop.database_url, tenant="strict")) == 1
    assert chain.balance_of(payer) == before - STRICT[1]


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_other_tenants_keep_the_standalone_flow_on_0_3(
    shop: RunningMerchant, user_key: Any, new_payer: Callable[..., str]
) -> None:
    async with WireV0_3.client(shop.base_url) as http:
        wire = WireV0_3(http, "jsonrpc", "acme")
        task = await wire.send(message_v0_3("The quick brown fox."))
        assert "x402.payment.required" in status_metadata(task)
        assert cart_of(task) is None
        card = (await http.get("/t/acme/.well-known/agent-card.json")).json()
        strict_card = (await http.get("/t/strict/.well-known/agent-card.json")).json()
        # A PaymentMandate for a tenant not offered the v0.2 form is refused, not ignored.
        terms = status_metadata(task)["x402.payment.required"]
        mandate = {
            "payment_mandate_contents": {"payment_response": {"details": v1_payload(new_payer(), terms)}}
        }
        assert "mandates_not_supported" in await refused(wire, mandate_message(task["id"], mandate))
    assert await rows(shop.database_url, "payment_presentations") == []

    def ap2_of(served: JSON) -> Any:
        # The v0.2 declaration only: the card for both versions also has the v0.3 one (§20.2).
        extensions = served["capabilities"]["extensions"]
        return [e.get("params", {}).get("ap2") for e in extensions if e["uri"] == EXTENSION_URI_V02]

    assert not any(ap2_of(card))
    [strict_entry] = [entry for entries in ap2_of(strict_card) if entries for entry in entries]
    assert strict_entry["merchant"]["id"] == MERCHANT.id and strict_entry["required"] is True


def test_the_shopper_hashes_what_the_merchant_signed(tmp_path: Path) -> None:
    """The cart a v0.1 model reads dumps back to the same JSON, so both sides hash the same bytes."""
    from ap2.models.mandate import CartMandate

    write_key(tmp_path / "key.pem")
    terms: dict[str, JsonValue] = {
        "x402Version": 1,
        "error": "",
        "accepts": [{"scheme": "exact", "maxTimeoutSeconds": 300}],
    }
    cart = build_cart(
        terms,
        offer_id="offer-1",
        merchant=MERCHANT,
        keys=load_checkout_keys([tmp_path / "key.pem"]),
        title="Text statistics",
        total=25,
        currency="USD",
        now=1_777_889_070,
        lifetime_s=300,
    )
    read = CartMandate.model_validate(json.loads(json.dumps(cart)))
    assert read.model_dump(mode="json") == cart
    assert cart_digest(cart) == digest(read.model_dump(mode="json"))
    assert read.contents.payment_request.details.total.amount.value == 0.25
    assert read.contents.cart_expiry == "2026-05-04T10:09:30+00:00"


async def test_one_mandate_sent_twice_at_once_pays_once_and_no_secret_is_told(
    shop: RunningMerchant, chain: DevChain, user_key: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    now = int(time.time())
    shopper = Shopper(user_key, new_key())
    payer_key = chain.new_payer()
    payer = Account.from_key(payer_key).address
    before = chain.balance_of(payer)
    async with WireV0_3.client(shop.base_url) as http:
        wire = WireV0_3(http, "jsonrpc", "strict")
        task = await wire.send(message_v0_3("The quick brown fox."))
        cart = cart_of(task)
        paid = v1_payload(payer_key, x402_terms(cart))
        mandate = shopper.pay(cart, paid, merchant_id=MERCHANT.id, now=now)
        answers = await asyncio.gather(
            wire.send(mandate_message(task["id"], mandate)),
            wire.send(mandate_message(task["id"], mandate)),
            return_exceptions=True,
        )
        read = await wire.get_task(task["id"])
        # Oversized: a mandate beyond the request bound is refused before anything is read.
        padded = dict(mandate, padding="x" * (64 * 1024))
        request = {"jsonrpc": "2.0", "id": 9, "method": "message/send"}
        request["params"] = {"message": mandate_message(task["id"], padded)}
        too_big = await http.post(tenant_root("strict") + JSONRPC_PATH, json=request)
        assert too_big.status_code == 413 and "over the limit" in too_big.json()["error"]["message"]
    assert state_of(read) == "completed", (answers, read)
    assert len(await ledger_entries(shop.database_url, tenant="strict")) == 1
    assert chain.balance_of(payer) == before - STRICT[1]
    signature = paid["payload"]["signature"].removeprefix("0x").lower()
    authorization = str(mandate["user_authorization"])
    secrets = (signature, signature[:16], authorization, authorization.rsplit("~", 1)[1])
    told = json.dumps([repr(a) if isinstance(a, BaseException) else a for a in answers]) + json.dumps(read)
    logged = "\n".join(record.getMessage() for record in caplog.records)
    for secret in secrets:
        assert secret not in told.lower() and secret not in logged.lower()


async def test_a_user_authorization_of_an_issuer_fetched_over_https_pays_on_0_3(
    start_merchant: MerchantStarter,
    database_url: str,
    tmp_path: Path,
    chain: DevChain,
    tls_key_server: KeyServer,
    tls_ca_file: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """strict trusts only an agent provider's JWK Set at an https URL (as on A2A 1.0, `TrustedIssuers`):
    its user_authorization pays the cart, a stranger's is refused, and the stranger's unknown kid does
    not make the merchant ask the provider again."""
    monkeypatch.setenv("SSL_CERT_FILE", str(tls_ca_file))
    provider = new_key("agent-provider-1")
    tls_key_server.jwks = public_jwks(provider)
    write_key(tmp_path / "strict.pem")
    (tmp_path / "tenants.toml").write_text(
        f'[tenants.strict]\npay_to = "{STRICT[0]}"\nprice = {STRICT[1]}\n\n'
        f'[tenants.strict.ap2]\nmerchant = {{ id = "{MERCHANT.id}", name = "{MERCHANT.name}" }}\n'
        f'checkout_keys = ["strict.pem"]\nissuers = ["{tls_key_server.jwks_url}"]\nrequired = true\n'
    )
    shop = start_merchant(database_url, tenants_file=tmp_path / "tenants.toml")
    now = int(time.time())
    payer_key = chain.new_payer()
    agent = new_key()
    async with WireV0_3.client(shop.base_url) as http:
        wire = WireV0_3(http, "jsonrpc", "strict")
        task = await wire.send(message_v0_3("The quick brown fox."))
        cart = cart_of(task)
        paid = v1_payload(payer_key, x402_terms(cart))
        stranger = Shopper(new_key("stranger-1"), agent)
        message = mandate_message(task["id"], stranger.pay(cart, paid, merchant_id=MERCHANT.id, now=now))
        assert "invalid_credential" in await refused(wire, message)
        good = Shopper(provider, agent).pay(cart, paid, merchant_id=MERCHANT.id, now=now)
        done = await wire.send(mandate_message(task["id"], good))
        assert state_of(done) == "completed", done
    assert tls_key_server.hits["/.well-known/jwks.json"] == 1
    assert len(await ledger_entries(shop.database_url, tenant="strict")) == 1

"""The embedded flow's offer, served for real (§20.2, §20.3): a tenant declared `ap2` in the tenants file
gets the `ap2-checkout` artifact beside its terms on every binding, signed with a key its JWK Set route
publishes, stored with the offer and replaced by fresh terms; a tenant without `ap2`, or terms the price
rule refuses, get none; the card declares the tenants and their `jwksUrl`, whose keys have no private part.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from eth_account import Account
from joserfc import jwt
from joserfc.jwk import KeySet

from a2a_x402.devchain import DevChain
from a2a_x402.extension import (
    AP2_CHECKOUT_ARTIFACT_ID,
    AP2_CHECKOUT_JWT_KEY,
    EXTENSION_URI,
    PaymentCompletedData,
    PaymentRequiredData,
)
from a2a_x402.payer import sign_payment
from a2a_x402.storage import create_engine
from tests.fixtures.merchant import (
    BINDINGS,
    DEFAULT_PAY_TO,
    MerchantStarter,
    MerchantWire,
    RunningMerchant,
    offered_terms,
    payment_data,
    payment_message,
    user_message,
)
from tests.merchant.ap2.support import write_key

ACME = ("0x976EA74026E726554dB657fA54763abd0C3a0aa9", 100_000)  # 10 cents
GLOBEX = ("0x14dC79964da2C08b23698B3D3cc7Ca32193d9955", 300_000)  # not in the embedded flow
INITECH = ("0x9965507D1a55bcC2695C58ba16FB37d819B0A4dc", 100_001)  # not a whole number of cents
PRICES = {"globex": GLOBEX[1], "initech": INITECH[1]}
DECLARED = {"": "shop.example", "acme": "acme.example", "initech": "initech.example"}


def write_ap2_tenants(directory: Path) -> Path:
    """The tenants file: each declared tenant with a checkout key of its own, read relative to the file."""
    lines = [f'[default]\npay_to = "{DEFAULT_PAY_TO}"\nprice = 250000\n']
    for tenant, (pay_to, price) in (("acme", ACME), ("globex", GLOBEX), ("initech", INITECH)):
        lines.append(f'[tenants.{tenant}]\npay_to = "{pay_to}"\nprice = {price}\n')
    for tenant, merchant_id in DECLARED.items():
        name = tenant or "default"
        write_key(directory / f"{name}.pem")
        table = "default.ap2" if not tenant else f"tenants.{tenant}.ap2"
        lines.append(
            f'[{table}]\nmerchant = {{ id = "{merchant_id}", name = "{name.title()}" }}\n'
            f'checkout_keys = ["{name}.pem"]\n'
        )
    path = directory / "tenants.toml"
    path.write_text("\n".join(lines))
    return path


@pytest.fixture
def shop(start_merchant: MerchantStarter, database_url: str, tmp_path: Path) -> RunningMerchant:
    """A merchant whose default tenant, acme and initech offer the embedded flow, and globex not."""
    return start_merchant(database_url, tenants_file=write_ap2_tenants(tmp_path))


def checkout_of(task: dict[str, Any]) -> str | None:
    """The checkout JWT of a task's `ap2-checkout` artifact (its exact shape checked), or None."""
    found = [a for a in task.get("artifacts", []) if a["artifactId"] == AP2_CHECKOUT_ARTIFACT_ID]
    if not found:
        return None
    [artifact] = found
    [part] = artifact["parts"]
    assert artifact["name"] == "AP2 checkout" and artifact["extensions"] == [EXTENSION_URI]
    assert part["mediaType"] == "application/json" and list(part["data"]) == [AP2_CHECKOUT_JWT_KEY]
    token: str = part["data"][AP2_CHECKOUT_JWT_KEY]
    return token


def required_of(task: dict[str, Any]) -> Any:
    """The `required` of a task's `payment-required` status, as the client read it."""
    return task["status"]["message"]["metadata"][EXTENSION_URI]["required"]


async def verified_claims(http: httpx.AsyncClient, tenant: str, token: str) -> dict[str, Any]:
    """The claims of `token`, verified with the tenant's JWK Set as its route serves it."""
    served = await http.get(f"/.well-known/ap2/{tenant or 'default'}/jwks.json")
    assert served.status_code == 200
    claims: dict[str, Any] = jwt.decode(
        token, KeySet.import_key_set(served.json()), algorithms=["ES256"]
    ).claims
    return claims


async def stored_checkouts(database_url: str) -> dict[str, str | None]:
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            rows = await connection.execute(sa.text("SELECT task_id, checkout_jwt FROM payment_offers"))
            return {row.task_id: row.checkout_jwt for row in rows}
    finally:
        await engine.dispose()


async def test_declared_tenants_offer_a_signed_checkout_on_every_binding(
    shop: RunningMerchant, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="a2a_x402.merchant.payments._checkouts")
    offered: dict[str, str | None] = {}
    async with shop.http() as http:
        for binding in BINDINGS:
            for tenant in ("", "acme", "globex", "initech"):
                task = (await MerchantWire(http, binding, tenant).send(user_message()))["task"]
                assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
                token = checkout_of(task)
                offered[task["id"]] = token
                if tenant not in ("", "acme"):
                    # globex is not in the embedded flow; initech's price is not whole cents: terms only.
                    assert token is None and task.get("artifacts", []) == []
                    assert offered_terms(task).accepts[0].amount == PRICES[tenant]
                    continue
                assert token is not None
                claims = await verified_claims(http, tenant, token)
                terms = required_of(task)
                assert claims["x402"] == terms
                assert claims["id"] == terms["accepts"][0]["extra"]["offerId"]
                assert claims["merchant"] == {"id": DECLARED[tenant], "name": (tenant or "default").title()}
                total = int(terms["accepts"][0]["amount"]) // 10_000  # 6-decimal token, cents
                assert claims["totals"][-1] == {"type": "total", "amount": total}
        for binding in BINDINGS:  # streamed, the checkout comes before the status that offers its terms
            events = await MerchantWire(http, binding, "acme").stream(user_message())
            kinds = [next(iter(event)) for event in events]
            assert kinds == ["task", "artifactUpdate", "statusUpdate"], kinds
            update = events[1]["artifactUpdate"]
            assert update.get("append", False) is False and update["lastChunk"] is True
            token = checkout_of({"artifacts": [update["artifact"]]})
            assert token is not None
            terms = events[2]["statusUpdate"]["status"]["message"]["metadata"][EXTENSION_URI]["required"]
            assert (await verified_claims(http, "acme", token))["x402"] == terms
            offered[update["taskId"]] = token
    assert await stored_checkouts(shop.database_url) == offered
    refused = [r for r in caplog.records if "without an AP2 checkout" in r.getMessage()]
    assert [r.levelno for r in refused] == [logging.INFO]  # once, for every round of initech's terms
    assert "initech" in refused[0].getMessage()


async def test_fresh_terms_replace_the_checkout_and_the_paid_task_keeps_it(
    shop: RunningMerchant, chain: DevChain
) -> None:
    broke = str(Account.create().key.to_0x_hex())  # no funds: the payment is refused, fresh terms follow
    async with shop.http() as http:
        wire = MerchantWire(http, "rest", "acme")
        task = (await wire.send(user_message()))["task"]
        first = checkout_of(task)
        [entry] = offered_terms(task).accepts
        assert first is not None and entry.extra is not None
        again = (await wire.send(payment_message(task["id"], sign_payment(broke, entry))))["task"]
        data = payment_data(again)
        assert isinstance(data, PaymentRequiredData) and data.error is not None
        second = checkout_of(again)  # one artifact still, of the new round
        assert second is not None and second != first
        claims = await verified_claims(http, "acme", second)
        assert claims["x402"] == required_of(again)
        assert claims["id"] == required_of(again)["accepts"][0]["extra"]["offerId"] != entry.extra["offerId"]
        assert [a["artifactId"] for a in again["artifacts"]] == [AP2_CHECKOUT_ARTIFACT_ID]
        assert (await stored_checkouts(shop.database_url))[task["id"]] == second

        # Paid as in the standalone flow: the work is delivered beside the checkout it was offered with.
        [fresh] = offered_terms(again).accepts
        paid = (await wire.send(payment_message(task["id"], sign_payment(chain.new_payer(), fresh))))["task"]
        assert isinstance(payment_data(paid), PaymentCompletedData)
        assert [a.get("name") for a in paid["artifacts"]] == ["AP2 checkout", "text-stats"]
        assert checkout_of(paid) == second


def private_members(value: Any) -> list[str]:
    """Every member name of a JWK's private part (`d`, RSA's primes and exponents) anywhere in `value`."""
    private = {"d", "p", "q", "dp", "dq", "qi", "oth", "k"}
    if isinstance(value, dict):
        return [key for key in value if key in private] + [
            found for item in value.values() for found in private_members(item)
        ]
    if isinstance(value, list):
        return [found for item in value for found in private_members(item)]
    return []


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_the_card_declares_each_tenant_and_its_keys_are_public(shop: RunningMerchant) -> None:
    base = shop.base_url
    async with shop.http() as http:
        card = (await http.get("/.well-known/agent-card.json")).json()
        [extension] = [e for e in card["capabilities"]["extensions"] if e["uri"] == EXTENSION_URI]
        assert extension["params"]["ap2"] == [
            {
                "merchant": {"id": "shop.example", "name": "Default"},
                "jwksUrl": f"{base}/.well-known/ap2/default/jwks.json",
            },
            {
                "tenant": "acme",
                "merchant": {"id": "acme.example", "name": "Acme"},
                "jwksUrl": f"{base}/.well-known/ap2/acme/jwks.json",
            },
            {
                "tenant": "initech",
                "merchant": {"id": "initech.example", "name": "Initech"},
                "jwksUrl": f"{base}/.well-known/ap2/initech/jwks.json",
            },
        ]
        kids = set()
        for tenant in ("default", "acme", "initech"):
            served = await http.get(f"/.well-known/ap2/{tenant}/jwks.json")
            assert served.headers["cache-control"] == "public, max-age=300"
            assert '"d"' not in served.text and private_members(served.json()) == []
            [key] = served.json()["keys"]
            assert (key["kty"], key["crv"], key["alg"], key["use"]) == ("EC", "P-256", "ES256", "sig")
            kids.add(key["kid"])
        assert len(kids) == 3
        for nobody in ("globex", "nobody", "tasks"):
            assert (await http.get(f"/.well-known/ap2/{nobody}/jwks.json")).status_code == 404

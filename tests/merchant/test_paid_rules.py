"""`paid_app` called wrongly is refused with a `PaidAppError` of one line, before anything is built."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from a2a.types import AgentSkill, Message
from a2a.utils.errors import InvalidParamsError

from a2a_x402.cli import ConfigError
from a2a_x402.facilitator import HttpFacilitatorClient, RpcClient
from a2a_x402.merchant import MerchantSettings, PaidAppError, paid_app
from a2a_x402.merchant._paid_rules import priced_tenants, skill_resolver
from a2a_x402.merchant.ledger import Ledger
from a2a_x402.merchant.payments import Asset, OfferStore, PaymentExecutor, Pricing
from a2a_x402.merchant.webhooks import Outbox
from a2a_x402.merchant.wiring import load_tenants
from a2a_x402.storage import create_engine
from tests.fixtures.merchant import DEFAULT_PAY_TO, TWO_TENANTS
from tests.merchant.paid_agents import SHOUT, WHISPER, Voices, skill_named

ASSET = "0x5FbDB2315678afecb367f032d93F642f64180aa3"
ACME_PAY_TO = TWO_TENANTS["acme"][0]


def settings(tmp_path: Path, **overrides: Any) -> MerchantSettings:
    values: dict[str, Any] = {
        "database_url": f"sqlite+aiosqlite:///{tmp_path / 'x402.db'}",
        "asset": ASSET,
        "pay_to": DEFAULT_PAY_TO,
        "_env_file": None,
        **overrides,
    }
    return MerchantSettings(**values)


def build(tmp_path: Path, **arguments: Any) -> Any:
    """`paid_app` of `Voices` offering `shout`, with `arguments` overriding."""
    given: dict[str, Any] = {
        "name": "Voices",
        "description": "Shouts your text.",
        "skills": [SHOUT],
        "settings": settings(tmp_path),
        **arguments,
    }
    executor = given.pop("executor", Voices())
    return paid_app(executor, **given)


@pytest.mark.parametrize(
    ("arguments", "refusal"),
    [
        ({"prices": {"sing": 10}}, "prices names the skill 'sing', which is not in skills (offered: shout)"),
        ({"prices": {"shout": -1}}, "prices['shout']: must not be negative, got -1"),
        ({"prices": {"shout": 2**256}}, "prices['shout']: must be below 2**256"),
        ({"prices": {"shout": 0.5}}, "prices['shout']: must be a whole number of atomic units"),
        ({"prices": {"shout": True}}, "prices['shout']: must be a whole number of atomic units"),
        ({"skills": [SHOUT, WHISPER]}, "2 skills and no skill_of: pass skill_of"),
        ({"skills": []}, "skills is empty"),
        ({"skills": [SHOUT, SHOUT]}, "the skill id 'shout' is listed twice"),
        ({"skills": [AgentSkill(name="Nameless")]}, "the skill 'Nameless' has no id"),
        ({"skills": ["shout"]}, "skills must hold a2a.types.AgentSkill, got str"),
        ({"skills": [SHOUT, WHISPER], "skill_of": "shout"}, "skill_of must be a function of the message"),
        ({"executor": object()}, "executor must be an a2a-sdk AgentExecutor, got object"),
    ],
)
def test_a_wrong_call_is_refused_in_one_line(tmp_path: Path, arguments: dict[str, Any], refusal: str) -> None:
    with pytest.raises(PaidAppError) as refused:
        build(tmp_path, **arguments)

    assert refusal in str(refused.value)
    assert "\n" not in str(refused.value)
    assert refused.value.code == "paid_app_invalid"


async def test_a_payment_executor_is_refused_for_the_executor_it_wraps(tmp_path: Path) -> None:
    engine = create_engine(settings(tmp_path).database_url)
    facilitator, rpc = HttpFacilitatorClient("http://127.0.0.1:9"), RpcClient("http://127.0.0.1:9")
    asset = Asset("eip155:31337", ASSET, "USDC", "2")
    wrapped = PaymentExecutor(
        Voices(),
        pricing=Pricing(load_tenants(settings(tmp_path)), asset, resource_url="http://127.0.0.1:1"),
        facilitator=facilitator,
        offers=OfferStore(engine),
        ledger=Ledger(engine, Outbox(engine)),
        chain=rpc,
        skill_of=skill_named,
    )
    try:
        with pytest.raises(PaidAppError, match="executor is a PaymentExecutor already: pass the executor"):
            build(tmp_path, executor=wrapped)
    finally:
        await facilitator.aclose()
        await rpc.aclose()
        await engine.dispose()


@pytest.mark.parametrize(
    ("tenants", "arguments", "refusal"),
    [
        (
            f'[tenants.acme]\npay_to = "{ACME_PAY_TO}"\nprice = 5\n',
            {"prices": {"shout": 10}},
            "declares no [default] tenant",
        ),
        (
            f'[default]\npay_to = "{DEFAULT_PAY_TO}"\nprice = 5\n[default.skill_prices]\nshout = 7\n',
            {"prices": {"shout": 10}},
            "'shout' priced both in prices and in",
        ),
        (
            f'[tenants.acme]\npay_to = "{ACME_PAY_TO}"\nprice = 5\n[tenants.acme.skill_prices]\nsing = 7\n',
            {},
            "acme.skill_prices names 'sing', not in skills (offered: shout)",
        ),
        (
            f'[default]\npay_to = "{DEFAULT_PAY_TO}"\nprice = 5\n[default.metered_skills]\nshout = 7\n',
            {"prices": {"shout": 10}},
            "[default] metered_skills: keep one",
        ),
        (
            f'[tenants.acme]\npay_to = "{ACME_PAY_TO}"\nprice = 5\n[tenants.acme.metered_skills]\nsing = 7\n',
            {},
            "acme.metered_skills names 'sing', not in skills (offered: shout)",
        ),
        (
            f'[tenants.acme]\npay_to = "{ACME_PAY_TO}"\nprice = 5\nwebhook_url = "https://acme.example/hook"\n'
            f'webhook_secret = "whsec_{"A" * 32}"\n',
            {"webhooks": False},
            "webhooks=False, but the tenants configure webhook endpoints",
        ),
    ],
)
def test_prices_and_the_tenants_file_must_agree(
    tmp_path: Path, tenants: str, arguments: dict[str, Any], refusal: str
) -> None:
    tenants_file = tmp_path / "tenants.toml"
    tenants_file.write_text(tenants)
    configured = settings(tmp_path, pay_to=None, tenants_file=str(tenants_file))

    with pytest.raises(PaidAppError) as refused:
        build(tmp_path, settings=configured, **arguments)

    assert refusal in str(refused.value)
    assert "\n" not in str(refused.value)


def test_without_settings_the_environment_s_mistake_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no .env here
    for variable in ("X402_ASSET", "X402_PAY_TO", "X402_TENANTS_FILE"):
        monkeypatch.delenv(variable, raising=False)

    with pytest.raises(ConfigError, match="X402_ASSET") as refused:
        build(tmp_path, settings=None)

    assert "\n" not in str(refused.value)


def test_a_message_naming_no_offered_skill_is_refused_before_any_price() -> None:
    resolve = skill_resolver([SHOUT, WHISPER], skill_named)
    asks = Message()
    asks.metadata.update({"skill": "<script>"})

    with pytest.raises(InvalidParamsError) as refused:
        resolve(asks)

    assert refused.value.message == "the message asks for no skill this agent offers (shout, whisper)"
    assert resolve(Message()) == SHOUT.id


def test_prices_are_the_default_tenant_s_and_the_file_prices_the_others(tmp_path: Path) -> None:
    tenants_file = tmp_path / "tenants.toml"
    tenants_file.write_text(
        f'[default]\npay_to = "{DEFAULT_PAY_TO}"\nprice = 5\n'
        f'[tenants.acme]\npay_to = "{ACME_PAY_TO}"\nprice = 9\n'
    )
    configured = settings(tmp_path, pay_to=None, tenants_file=str(tenants_file))

    tenants = priced_tenants(load_tenants(configured), {"shout": 10}, [SHOUT, WHISPER], str(tenants_file))

    prices = {(t.id, skill.id): t.price_for(skill.id) for t in tenants for skill in (SHOUT, WHISPER)}
    assert prices == {("", "shout"): 10, ("", "whisper"): 5, ("acme", "shout"): 9, ("acme", "whisper"): 9}


def test_the_app_is_built_without_connecting(tmp_path: Path) -> None:
    # A remote facilitator: the in-process one would need a relayer key, and reads it at once.
    remote = settings(tmp_path, facilitator_url="http://127.0.0.1:9")

    app = build(tmp_path, settings=remote, prices={"shout": 10})

    assert app.title == "Voices"
    assert not (tmp_path / "x402.db").exists()  # the database is opened in the lifespan, not before

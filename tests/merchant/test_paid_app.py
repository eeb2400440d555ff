"""`paid_app` around an executor of a developer's own (`paid_agents.Voices`), served on loopback on the dev
chain: paid end to end and booked once, judged conforming by the kit, two skills at two prices chosen by
`skill_of`, and a tenants file's prices for the other tenants."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from a2a.helpers import new_text_message
from a2a.types import Message, Role

from a2a_x402.conformance import KitSettings, render_console, run_conformance
from a2a_x402.devchain import DevChain
from a2a_x402.merchant import paid_app
from a2a_x402.merchant.payments import OfferStore
from a2a_x402.payer import Binding, MerchantError, Payer, PaymentPolicy
from a2a_x402.storage import create_engine
from tests.fixtures.merchant import DEFAULT_PAY_TO, TWO_TENANTS, ledger_entries
from tests.merchant.paid_agents import (
    SHOUT,
    SHOUT_PRICE,
    WHISPER,
    WHISPER_PRICE,
    Voices,
    serve_paid,
    skill_named,
)

pytestmark = pytest.mark.timeout(300)

ACME, (ACME_PAY_TO, _) = "acme", TWO_TENANTS["acme"]
ACME_WHISPER_PRICE = 7_000


@pytest.fixture(scope="module")
def shouter(kit_chain: DevChain, kit_database: str) -> Iterator[str]:
    """One skill, priced in code: the few lines a developer writes. Its base URL."""
    with serve_paid(
        kit_chain,
        kit_database,
        lambda settings: paid_app(
            Voices(),
            name="Shouter",
            description="Your text in capitals, paid per request.",
            skills=[SHOUT],
            prices={SHOUT.id: SHOUT_PRICE},
            settings=settings,
        ),
    ) as url:
        yield url


async def test_a_paid_executor_is_paid_end_to_end_and_booked_once(
    shouter: str, kit_chain: DevChain, kit_database: str
) -> None:
    before = kit_chain.balance_of(DEFAULT_PAY_TO)
    policy = PaymentPolicy(max_amount_atomic=SHOUT_PRICE)

    async with Payer.connect(shouter, kit_chain.new_payer(), policy=policy) as payer:
        result = await payer.pay("hello there")

    [artifact] = result.artifacts
    assert artifact.parts[0].text == "HELLO THERE"
    assert result.paid is not None and (result.paid.amount, result.paid.pay_to) == (
        SHOUT_PRICE,
        DEFAULT_PAY_TO,
    )
    assert kit_chain.balance_of(DEFAULT_PAY_TO) - before == SHOUT_PRICE
    booked = [entry for entry in await ledger_entries(kit_database) if entry.task_id == result.task.id]
    assert [(entry.amount, entry.tx_hash) for entry in booked] == [(SHOUT_PRICE, result.transaction)]
    engine = create_engine(kit_database)
    try:
        offer = await OfferStore(engine).get(result.task.id)
    finally:
        await engine.dispose()
    # The edge's task store told the offer's outcome: the reconciler has nothing left to tell.
    assert offer is not None and offer.told_at is not None


async def test_the_kit_says_a_paid_executor_conforms(
    shouter: str, kit_chain: DevChain, kit_payer: str
) -> None:
    report = await run_conformance(KitSettings(shouter, kit_chain.rpc_url, kit_payer, concurrency=6))

    assert report.ok, render_console(report)
    assert {r.target for r in report.results} >= {
        "JSONRPC 1.0 tenant=(default)",
        "HTTP+JSON 1.0 tenant=(default)",
        "GRPC 1.0 tenant=(default)",
        "JSONRPC 0.3 tenant=(default)",
        "HTTP+JSON 0.3 tenant=(default)",
    }


def asking_for(skill: str, text: str) -> Message:
    """A user message asking `skill` for `text` (the skill named in its metadata, as `skill_named` reads)."""
    message = new_text_message(text, role=Role.ROLE_USER)
    message.metadata.update({"skill": skill})
    return message


async def test_two_skills_are_priced_apart_and_chosen_by_skill_of(
    chain: DevChain, sqlite_url: str, tmp_path: Path
) -> None:
    tenants_file = tmp_path / "tenants.toml"
    tenants_file.write_text(
        f'[default]\npay_to = "{DEFAULT_PAY_TO}"\nprice = 1\n\n'
        f'[tenants.{ACME}]\npay_to = "{ACME_PAY_TO}"\nprice = 1\n\n'
        f"[tenants.{ACME}.skill_prices]\n{WHISPER.id} = {ACME_WHISPER_PRICE}\n"
    )
    voices = Voices()
    with serve_paid(
        chain,
        sqlite_url,
        lambda settings: paid_app(
            voices,
            name="Voices",
            description="Shouts or whispers your text.",
            skills=[SHOUT, WHISPER],
            prices={SHOUT.id: SHOUT_PRICE, WHISPER.id: WHISPER_PRICE},
            skill_of=skill_named,
            settings=settings,
            dashboard=False,
            webhooks=False,
            reconciler=False,
        ),
        pay_to=None,
        tenants_file=str(tenants_file),
    ) as url:
        key = chain.new_payer()
        async with Payer.connect(url, key) as payer:
            shouted = await payer.pay(asking_for(SHOUT.id, "Hello"))
            whispered = await payer.pay(asking_for(WHISPER.id, "Hello"))
            with pytest.raises(MerchantError, match="asks for no skill this agent offers"):
                await payer.pay(asking_for("sing", "Hello"))
        async with Payer.connect(url, key, binding=Binding.HTTP_JSON, tenant=ACME) as payer:
            at_acme = await payer.pay(asking_for(WHISPER.id, "Hello"))

    assert [r.artifacts[0].parts[0].text for r in (shouted, whispered, at_acme)] == [
        "HELLO",
        "hello",
        "hello",
    ]
    paid = [(r.paid.amount, r.paid.pay_to) for r in (shouted, whispered, at_acme) if r.paid is not None]
    assert paid == [
        (SHOUT_PRICE, DEFAULT_PAY_TO),
        (WHISPER_PRICE, DEFAULT_PAY_TO),
        (ACME_WHISPER_PRICE, ACME_PAY_TO),
    ]
    booked = sorted((e.tenant, e.amount) for e in await ledger_entries(sqlite_url))
    assert booked == sorted([("", SHOUT_PRICE), ("", WHISPER_PRICE), (ACME, ACME_WHISPER_PRICE)])
    assert voices.runs == 3  # the refused request never reached the executor

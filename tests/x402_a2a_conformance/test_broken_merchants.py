"""The kit catches each deliberately broken merchant (`broken.py`) with the checks that test the fault.

Each broken merchant is one module-scoped server, and the kit runs only the checks that matter for it, on
the interfaces its fault reaches: the checks that test the fault fail (a MUST, so the run does not conform),
and checks the fault does not touch still pass, so the failure is the fault's and not a broken kit.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import merchant.app
from devchain import DevChain
from tests.fixtures.conformance import serve_reference_merchant
from x402_a2a_conformance import KitSettings, Outcome, Report, render_console, run_conformance

from .broken import (
    ROGUE_PAY_TO,
    SettlesLate,
    SettlesSlowly,
    ignore_activation,
    ignore_tenant,
    rogue_tenant_card,
    tenant_cards_are_the_root_s,
    terms_while_busy,
    v0_3_literals,
)

TENANT_CARD_CHECKS = (
    "card.tenant-0-3-served",
    "card.tenant-0-3-declares",
    "card.tenant-0-3-interfaces",
    "card.tenant-0-3-pay-to",
)
HTTP_1_0 = ("JSONRPC 1.0 tenant=(default)", "HTTP+JSON 1.0 tenant=(default)")
GRPC_1_0 = ("GRPC 1.0 tenant=(default)", "GRPC 1.0 tenant=acme")
ACME_0_3 = ("JSONRPC 0.3 tenant=acme", "HTTP+JSON 0.3 tenant=acme")


def _outcomes(report: Report, check_id: str) -> dict[str, Outcome]:
    return {r.target: r.outcome for r in report.results if r.spec.id == check_id}


async def _run(url: str, chain: DevChain, payer: str, *only: str) -> Report:
    return await run_conformance(KitSettings(url, chain.rpc_url, payer, only=frozenset(only), concurrency=6))


@pytest.fixture(scope="module")
def settles_late_url(
    kit_chain: DevChain, kit_database: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A merchant whose payment layer delivers before settling."""
    with pytest.MonkeyPatch.context() as patch:
        # Only while the app is built: the composition root then makes a SettlesLate facilitator.
        patch.setattr(merchant.app, "Facilitator", SettlesLate)
        context = serve_reference_merchant(kit_chain, kit_database, tmp_path_factory.mktemp("late"))
        url = context.__enter__()
    try:
        yield url
    finally:
        context.__exit__(None, None, None)


@pytest.fixture(scope="module")
def ignores_activation_url(
    kit_chain: DevChain, tmp_path_factory: pytest.TempPathFactory, kit_database: str
) -> Iterator[str]:
    """A merchant that ignores activation."""
    with serve_reference_merchant(
        kit_chain, kit_database, tmp_path_factory.mktemp("ignores"), wrap=ignore_activation
    ) as url:
        yield url


@pytest.fixture(scope="module")
def old_literals_url(
    kit_chain: DevChain, tmp_path_factory: pytest.TempPathFactory, kit_database: str
) -> Iterator[str]:
    """A merchant that answers A2A 1.0 requests with 0.3 literals."""
    with serve_reference_merchant(
        kit_chain, kit_database, tmp_path_factory.mktemp("old"), wrap=v0_3_literals
    ) as url:
        yield url


async def test_delivering_before_settling_fails_the_settlement_checks(
    settles_late_url: str, kit_chain: DevChain, kit_payer: str
) -> None:
    report = await _run(
        settles_late_url,
        kit_chain,
        kit_payer,
        "payment.completes",
        "payment.settled-on-chain",
        "streaming",
        "v02.streaming-terms",
        "v02.streaming-paid-turn",
    )
    assert not report.ok
    for check_id in ("payment.settled-on-chain", "streaming.paid-turn", "v02.streaming-paid-turn"):
        outcomes = _outcomes(report, check_id)
        assert outcomes and set(outcomes.values()) == {Outcome.FAILED}, render_console(report)
    # The payment layer is the gRPC server's too: the fault is caught there as on HTTP.
    for target in GRPC_1_0:
        for check_id in ("payment.settled-on-chain", "streaming.paid-turn"):
            assert _outcomes(report, check_id)[target] is Outcome.FAILED, render_console(report)
    # Over 0.3 streams too, at the default tenant's interfaces and at acme's own.
    assert {*ACME_0_3, "JSONRPC 0.3 tenant=(default)"} <= set(_outcomes(report, "v02.streaming-paid-turn"))
    assert set(_outcomes(report, "v02.streaming-terms").values()) == {Outcome.PASSED}, render_console(report)
    # The merchant did complete the task: what fails is that no money had moved when it delivered.
    assert set(_outcomes(report, "payment.completes").values()) == {Outcome.PASSED}, render_console(report)
    failure = report.result("payment.settled-on-chain", HTTP_1_0[0])
    assert failure is not None and "not a successful mined transaction" in failure.detail
    assert failure.evidence and "payment-completed" in failure.evidence[0]["answer"]


async def test_ignoring_activation_fails_the_activation_checks(
    ignores_activation_url: str, kit_chain: DevChain, kit_payer: str
) -> None:
    report = await _run(ignores_activation_url, kit_chain, kit_payer, "activation", "v02", "terms.placement")
    assert not report.ok
    for check_id in ("activation.refused", "activation.other-version-uri", "activation.continue-refused"):
        outcomes = _outcomes(report, check_id)
        assert all(outcomes[target] is Outcome.FAILED for target in HTTP_1_0), render_console(report)
    for check_id in ("v02.activation-refused", "v02.other-version-uri"):
        assert set(_outcomes(report, check_id).values()) == {Outcome.FAILED}, render_console(report)
    # gRPC is not behind the wrapper, and the activated requests are answered as ever.
    assert _outcomes(report, "activation.refused")["GRPC 1.0 tenant=(default)"] is Outcome.PASSED
    assert set(_outcomes(report, "terms.placement").values()) == {Outcome.PASSED}


async def test_0_3_literals_on_1_0_fail_the_terms_checks(
    old_literals_url: str, kit_chain: DevChain, kit_payer: str
) -> None:
    report = await _run(old_literals_url, kit_chain, kit_payer, "terms", "payment.completes", "v02.terms")
    assert not report.ok
    for check_id in ("terms.placement", "payment.completes"):
        outcomes = _outcomes(report, check_id)
        assert all(outcomes[target] is Outcome.FAILED for target in HTTP_1_0), render_console(report)
    placement = report.result("terms.placement", HTTP_1_0[0])
    assert placement is not None and "input-required" in placement.evidence[0]["answer"]
    # 0.3 answers are 0.3 already, and gRPC is not behind the wrapper.
    assert set(_outcomes(report, "v02.terms").values()) == {Outcome.PASSED}
    assert _outcomes(report, "terms.placement")["GRPC 1.0 tenant=acme"] is Outcome.PASSED


@pytest.fixture(scope="module")
def ignores_tenant_url(
    kit_chain: DevChain, tmp_path_factory: pytest.TempPathFactory, kit_database: str
) -> Iterator[str]:
    """A merchant whose JSON-RPC binding ignores the tenant."""
    with serve_reference_merchant(
        kit_chain, kit_database, tmp_path_factory.mktemp("tenant"), wrap=ignore_tenant
    ) as url:
        yield url


async def test_ignoring_the_tenant_fails_tenant_isolation(
    ignores_tenant_url: str, kit_chain: DevChain, kit_payer: str
) -> None:
    report = await _run(ignores_tenant_url, kit_chain, kit_payer, "tenant")
    outcomes = _outcomes(report, "tenant.isolation")
    assert outcomes["JSONRPC 1.0 tenant=(default)"] is Outcome.FAILED, render_console(report)
    assert outcomes["HTTP+JSON 1.0 tenant=(default)"] is Outcome.PASSED  # the tenant is in the REST path


@pytest.fixture(scope="module")
def terms_while_busy_url(
    kit_chain: DevChain, kit_database: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A merchant answering a payment in flight with the terms it paid, and settling slowly."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(merchant.app, "Facilitator", SettlesSlowly)
        context = serve_reference_merchant(
            kit_chain, kit_database, tmp_path_factory.mktemp("busy"), wrap=terms_while_busy
        )
        url = context.__enter__()
    try:
        yield url
    finally:
        context.__exit__(None, None, None)


async def test_offering_the_terms_for_a_payment_in_flight_fails_the_concurrent_check(
    terms_while_busy_url: str, kit_chain: DevChain, kit_payer: str
) -> None:
    report = await _run(terms_while_busy_url, kit_chain, kit_payer, "payment.represented-concurrently")
    assert not report.ok
    outcomes = _outcomes(report, "payment.represented-concurrently")
    jsonrpc = ("JSONRPC 1.0 tenant=(default)", "JSONRPC 1.0 tenant=acme")
    assert all(outcomes[target] is Outcome.FAILED for target in jsonrpc), render_console(report)
    failure = report.result("payment.represented-concurrently", jsonrpc[0])
    assert failure is not None and "answered with the terms again" in failure.detail
    # The other bindings are not behind the front, and the slow settlement alone is no fault.
    others = {target: outcome for target, outcome in outcomes.items() if target not in jsonrpc}
    assert others and set(others.values()) == {Outcome.PASSED}, render_console(report)


@pytest.fixture(scope="module")
def root_card_for_tenants_url(
    kit_chain: DevChain, tmp_path_factory: pytest.TempPathFactory, kit_database: str
) -> Iterator[str]:
    """A merchant serving the default tenant's card at every named tenant's 0.3 card path."""
    with serve_reference_merchant(
        kit_chain, kit_database, tmp_path_factory.mktemp("cards"), wrap=tenant_cards_are_the_root_s
    ) as url:
        yield url


async def test_a_tenant_card_naming_another_tenant_fails_the_tenant_card_checks(
    root_card_for_tenants_url: str, kit_chain: DevChain, kit_payer: str
) -> None:
    report = await _run(
        root_card_for_tenants_url, kit_chain, kit_payer, *TENANT_CARD_CHECKS, "v02.listed-in-card"
    )
    card = {r.spec.id: r.outcome for r in report.results if r.target == "card tenant=acme A2A-Version=0.3"}
    assert card == {
        "card.tenant-0-3-served": Outcome.PASSED,
        "card.tenant-0-3-declares": Outcome.PASSED,
        "card.tenant-0-3-interfaces": Outcome.FAILED,
        "card.tenant-0-3-pay-to": Outcome.FAILED,
    }, render_console(report)
    # The interfaces the root card names are the default's: acme's are not tested as the wrong card's.
    assert not any("its 0.3 card only" in target for target in report.targets)


@pytest.fixture(scope="module")
def rogue_tenant_card_url(
    kit_chain: DevChain, tmp_path_factory: pytest.TempPathFactory, kit_database: str
) -> Iterator[str]:
    """A merchant whose named tenants' own 0.3 cards list a payee the 1.0 card gives no tenant."""
    with serve_reference_merchant(
        kit_chain, kit_database, tmp_path_factory.mktemp("rogue-card"), wrap=rogue_tenant_card
    ) as url:
        yield url


async def test_a_tenant_card_with_another_payee_fails_its_pay_to_checks(
    rogue_tenant_card_url: str, kit_chain: DevChain, kit_payer: str
) -> None:
    report = await _run(
        rogue_tenant_card_url, kit_chain, kit_payer, *TENANT_CARD_CHECKS, "v02.listed-in-card"
    )
    pay_to = report.result("card.tenant-0-3-pay-to", "card tenant=acme A2A-Version=0.3")
    assert pay_to is not None and pay_to.outcome is Outcome.FAILED, render_console(report)
    assert ROGUE_PAY_TO in pay_to.detail
    # acme's terms name acme's payee, which its own card does not list: a 0.3 client of acme would refuse.
    listed = _outcomes(report, "v02.listed-in-card")
    assert all(listed[target] is Outcome.FAILED for target in ACME_0_3), render_console(report)
    assert listed["JSONRPC 0.3 tenant=(default)"] is Outcome.PASSED, render_console(report)

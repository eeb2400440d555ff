"""The kit catches each deliberately broken merchant (`broken.py`) with the checks that test the fault.

Each broken merchant is one server for its test, and the kit runs only the checks that matter for it, on
the interfaces its fault reaches: the checks that test the fault fail (a MUST, so the run does not conform),
and checks the fault does not touch still pass, so the failure is the fault's and not a broken kit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import ExitStack

import pytest
from starlette.types import ASGIApp

from a2a_x402.conformance import KitSettings, Outcome, Report, render_console, run_conformance
from a2a_x402.devchain import DevChain
from a2a_x402.facilitator import Facilitator
from a2a_x402.merchant import paid as merchant_paid
from tests.fixtures.conformance import serve_reference_merchant

from .broken import (
    ROGUE_PAY_TO,
    SettlesLate,
    SettlesSlowly,
    echoes_signature,
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


class Broken:
    """Serves the reference merchant broken one way, for one test, and runs the kit against it."""

    def __init__(
        self, chain: DevChain, database_url: str, payer: str, folders: pytest.TempPathFactory
    ) -> None:
        self._chain, self._database_url, self._payer, self._folders = chain, database_url, payer, folders
        self.servers = ExitStack()

    async def run(
        self,
        name: str,
        *only: str,
        wrap: Callable[[ASGIApp], ASGIApp] | None = None,
        facilitator: type[Facilitator] | None = None,
    ) -> Report:
        """Serve the merchant with its app wrapped by `wrap` and its payment layer's facilitator made of the
        class `facilitator`, then run the checks `only` against it."""
        folder = self._folders.mktemp(name)
        with pytest.MonkeyPatch.context() as patch:
            if facilitator is not None:
                # Only while the app is built: the composition root then makes this facilitator.
                patch.setattr(merchant_paid, "Facilitator", facilitator)
            url = self.servers.enter_context(
                serve_reference_merchant(self._chain, self._database_url, folder, wrap=wrap)
            )
        settings = KitSettings(url, self._chain.rpc_url, self._payer, only=frozenset(only), concurrency=6)
        return await run_conformance(settings)


@pytest.fixture
def broken(
    kit_chain: DevChain, kit_database: str, kit_payer: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Broken]:
    """Broken merchants for one test, each stopped at its end."""
    merchants = Broken(kit_chain, kit_database, kit_payer, tmp_path_factory)
    with merchants.servers:
        yield merchants


def _outcomes(report: Report, check_id: str) -> dict[str, Outcome]:
    return {r.target: r.outcome for r in report.results if r.spec.id == check_id}


def _assert_all(
    report: Report, check_id: str, outcome: Outcome, targets: Iterable[str] | None = None
) -> None:
    """`check_id` had `outcome` on each of `targets` (one at least); if None, on every target it ran on."""
    outcomes: dict[str, Outcome | None] = dict(_outcomes(report, check_id))
    chosen = outcomes if targets is None else {target: outcomes.get(target) for target in targets}
    assert chosen and set(chosen.values()) == {outcome}, render_console(report)


async def test_delivering_before_settling_fails_the_settlement_checks(broken: Broken) -> None:
    report = await broken.run(
        "late",
        "payment.completes",
        "payment.settled-on-chain",
        "streaming",
        "v02.streaming-terms",
        "v02.streaming-paid-turn",
        facilitator=SettlesLate,
    )
    assert not report.ok
    for check_id in ("payment.settled-on-chain", "streaming.paid-turn", "v02.streaming-paid-turn"):
        _assert_all(report, check_id, Outcome.FAILED)
    # The payment layer is the gRPC server's too: the fault is caught there as on HTTP.
    for check_id in ("payment.settled-on-chain", "streaming.paid-turn"):
        _assert_all(report, check_id, Outcome.FAILED, GRPC_1_0)
    # Over 0.3 streams too, at the default tenant's interfaces and at acme's own.
    assert {*ACME_0_3, "JSONRPC 0.3 tenant=(default)"} <= set(_outcomes(report, "v02.streaming-paid-turn"))
    _assert_all(report, "v02.streaming-terms", Outcome.PASSED)
    # The merchant did complete the task: what fails is that no money had moved when it delivered.
    _assert_all(report, "payment.completes", Outcome.PASSED)
    failure = report.result("payment.settled-on-chain", HTTP_1_0[0])
    assert failure is not None and "not a successful mined transaction" in failure.detail
    assert failure.evidence and "payment-completed" in failure.evidence[0]["answer"]


async def test_ignoring_activation_fails_the_activation_checks(broken: Broken) -> None:
    report = await broken.run("ignores", "activation", "v02", "terms.placement", wrap=ignore_activation)
    assert not report.ok
    for check_id in ("activation.refused", "activation.other-version-uri", "activation.continue-refused"):
        _assert_all(report, check_id, Outcome.FAILED, HTTP_1_0)
    for check_id in ("v02.activation-refused", "v02.other-version-uri"):
        _assert_all(report, check_id, Outcome.FAILED)
    # gRPC is not behind the wrapper, and the activated requests are answered as ever.
    _assert_all(report, "activation.refused", Outcome.PASSED, ["GRPC 1.0 tenant=(default)"])
    _assert_all(report, "terms.placement", Outcome.PASSED)


async def test_0_3_literals_on_1_0_fail_the_terms_checks(broken: Broken) -> None:
    report = await broken.run("old", "terms", "payment.completes", "v02.terms", wrap=v0_3_literals)
    assert not report.ok
    for check_id in ("terms.placement", "payment.completes"):
        _assert_all(report, check_id, Outcome.FAILED, HTTP_1_0)
    placement = report.result("terms.placement", HTTP_1_0[0])
    assert placement is not None and "input-required" in placement.evidence[0]["answer"]
    # 0.3 answers are 0.3 already, and gRPC is not behind the wrapper.
    _assert_all(report, "v02.terms", Outcome.PASSED)
    _assert_all(report, "terms.placement", Outcome.PASSED, ["GRPC 1.0 tenant=acme"])


async def test_ignoring_the_tenant_fails_tenant_isolation(broken: Broken) -> None:
    report = await broken.run("tenant", "tenant", wrap=ignore_tenant)
    _assert_all(report, "tenant.isolation", Outcome.FAILED, ["JSONRPC 1.0 tenant=(default)"])
    # The tenant is in the REST path.
    _assert_all(report, "tenant.isolation", Outcome.PASSED, ["HTTP+JSON 1.0 tenant=(default)"])


async def test_offering_the_terms_for_a_payment_in_flight_fails_the_concurrent_check(broken: Broken) -> None:
    # The front answers a payment in flight with the terms it paid; the slow settlement keeps it in flight.
    report = await broken.run(
        "busy", "payment.represented-concurrently", wrap=terms_while_busy, facilitator=SettlesSlowly
    )
    assert not report.ok
    jsonrpc = ("JSONRPC 1.0 tenant=(default)", "JSONRPC 1.0 tenant=acme")
    _assert_all(report, "payment.represented-concurrently", Outcome.FAILED, jsonrpc)
    failure = report.result("payment.represented-concurrently", jsonrpc[0])
    assert failure is not None and "answered with the terms again" in failure.detail
    # The other bindings are not behind the front, and the slow settlement alone is no fault.
    others = [
        target for target in _outcomes(report, "payment.represented-concurrently") if target not in jsonrpc
    ]
    _assert_all(report, "payment.represented-concurrently", Outcome.PASSED, others)


async def test_a_tenant_card_naming_another_tenant_fails_the_tenant_card_checks(broken: Broken) -> None:
    # The default tenant's card is served at every named tenant's 0.3 card path.
    report = await broken.run(
        "cards", *TENANT_CARD_CHECKS, "v02.listed-in-card", wrap=tenant_cards_are_the_root_s
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


async def test_a_tenant_card_with_another_payee_fails_its_pay_to_checks(broken: Broken) -> None:
    # The named tenants' own 0.3 cards list a payee the 1.0 card gives no tenant.
    report = await broken.run("rogue-card", *TENANT_CARD_CHECKS, "v02.listed-in-card", wrap=rogue_tenant_card)
    pay_to = report.result("card.tenant-0-3-pay-to", "card tenant=acme A2A-Version=0.3")
    assert pay_to is not None and pay_to.outcome is Outcome.FAILED, render_console(report)
    assert ROGUE_PAY_TO in pay_to.detail
    # acme's terms name acme's payee, which its own card does not list: a 0.3 client of acme would refuse.
    _assert_all(report, "v02.listed-in-card", Outcome.FAILED, ACME_0_3)
    _assert_all(report, "v02.listed-in-card", Outcome.PASSED, ["JSONRPC 0.3 tenant=(default)"])


async def test_an_answer_holding_the_payment_signature_fails_the_no_signature_check(broken: Broken) -> None:
    report = await broken.run(
        "leaks",
        "payment.no-signature",
        "payment.completes",
        "v02.no-signature",
        "v02.payment-completes",
        wrap=echoes_signature,
    )
    assert not report.ok
    _assert_all(report, "payment.no-signature", Outcome.FAILED, HTTP_1_0)
    failure = report.result("payment.no-signature", HTTP_1_0[0])
    assert failure is not None and "carries the payment's signature" in failure.detail
    # gRPC is not behind the wrapper: the merchant's own answers hold no signature.
    _assert_all(report, "payment.no-signature", Outcome.PASSED, GRPC_1_0)
    # On A2A 0.3 too: the paid message/send and tasks/get carry it, at every 0.3 interface.
    _assert_all(report, "v02.payment-completes", Outcome.PASSED, ACME_0_3)
    _assert_all(report, "v02.no-signature", Outcome.FAILED, [*ACME_0_3, "JSONRPC 0.3 tenant=(default)"])
    failure_0_3 = report.result("v02.no-signature", ACME_0_3[0])
    assert failure_0_3 is not None and "carries the payment's signature" in failure_0_3.detail

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

from .broken import SettlesLate, ignore_activation, ignore_tenant, v0_3_literals

HTTP_1_0 = ("JSONRPC 1.0 tenant=(default)", "HTTP+JSON 1.0 tenant=(default)")


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
        settles_late_url, kit_chain, kit_payer, "payment.completes", "payment.settled-on-chain", "streaming"
    )
    assert not report.ok
    for check_id in ("payment.settled-on-chain", "streaming.paid-turn"):
        outcomes = _outcomes(report, check_id)
        assert outcomes and set(outcomes.values()) == {Outcome.FAILED}, render_console(report)
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

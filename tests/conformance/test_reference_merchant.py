"""The kit against the reference merchant: every binding, both A2A versions, the default tenant and `acme`.

One merchant for the module and one run of the whole kit (module-scoped): the tests read its report. Every
MUST passes; the report covers every interface the card lists and every check of the catalogue.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from a2a_x402.conformance import CHECKS, KitSettings, Outcome, Report, Scope, render_console, run_conformance
from a2a_x402.devchain import DevChain
from a2a_x402.merchant.callers import CallerKeys
from a2a_x402.storage import create_engine
from tests.fixtures.conformance import serve_reference_merchant

EXPECTED_TARGETS = {
    "JSONRPC 1.0 tenant=(default)",
    "HTTP+JSON 1.0 tenant=(default)",
    "GRPC 1.0 tenant=(default)",
    "JSONRPC 1.0 tenant=acme",
    "HTTP+JSON 1.0 tenant=acme",
    "GRPC 1.0 tenant=acme",
    "JSONRPC 0.3 tenant=(default)",
    "HTTP+JSON 0.3 tenant=(default)",
    "JSONRPC 0.3 tenant=acme",
    "HTTP+JSON 0.3 tenant=acme",
}


@pytest.fixture(scope="module")
def reference_url(kit_chain: DevChain, kit_database: str, kit_folder: Path) -> Iterator[str]:
    """The reference merchant's base URL."""
    with serve_reference_merchant(kit_chain, kit_database, kit_folder) as url:
        yield url


@pytest.fixture(scope="module")
async def report(reference_url: str, kit_chain: DevChain, kit_payer: str, kit_database: str) -> Report:
    """One run of the whole kit against the reference merchant."""
    engine = create_engine(kit_database)
    try:
        keys = CallerKeys(engine)
        tokens = (await keys.create("", "kit-owner"), await keys.create("", "kit-stranger"))
    finally:
        await engine.dispose()
    settings = KitSettings(reference_url, kit_chain.rpc_url, kit_payer, concurrency=6, caller_tokens=tokens)
    return await run_conformance(settings)


def test_every_must_passes(report: Report) -> None:
    assert report.ok, render_console(report)


def test_every_interface_of_both_versions_is_checked(report: Report) -> None:
    checked = {r.target for r in report.results}
    assert EXPECTED_TARGETS <= checked, checked


def test_every_check_ran_where_it_applies(report: Report) -> None:
    for spec in CHECKS:
        ran = [r for r in report.results if r.spec is spec]
        assert ran, spec.id
        if spec.scope is not Scope.CARD:
            targets = {r.target for r in ran}
            version = spec.scope.value
            assert targets == {t for t in EXPECTED_TARGETS if f" {version} " in t}, (spec.id, targets)


def test_the_named_tenant_s_own_0_3_card_is_checked(report: Report) -> None:
    """acme's 0.3 card is found under its 0.3 interfaces' URLs and names acme's interfaces and payee only."""
    results = {r.spec.id: r.outcome for r in report.results if r.target == "card tenant=acme A2A-Version=0.3"}
    assert results == {
        "card.tenant-0-3-served": Outcome.PASSED,
        "card.tenant-0-3-declares": Outcome.PASSED,
        "card.tenant-0-3-interfaces": Outcome.PASSED,
        "card.tenant-0-3-pay-to": Outcome.PASSED,
    }, render_console(report, verbose=True)


def test_only_what_cannot_apply_is_skipped(report: Report) -> None:
    """gRPC has no JSON integers; the 0.3 card declares only v0.2, which defines no params; the kit's caller
    keys are the default tenant's (a key is valid at its own tenant only); the merchant offers neither
    Permit2 nor metered terms (`test_payment_kinds.py` runs those checks against one that does), nor the
    embedded flow (`test_ap2.py` runs the `ap2.*` checks against one that does)."""
    skipped = {(r.spec.id, r.target) for r in report.results if r.outcome is Outcome.SKIPPED}
    params = ("params-present", "params-schema", "params-consistent", "pay-to-per-tenant", "no-empty-tenant")
    kinds = [
        spec
        for spec in CHECKS
        if spec.id.startswith(("permit2.", "metered.", "ap2.")) and spec.scope is not Scope.CARD
    ]
    assert skipped == {
        # Each on the interfaces of its version (the ap2.v02-* checks on 0.3's).
        *((s.id, target) for s in kinds for target in EXPECTED_TARGETS if f" {s.scope.value} " in target),
        ("terms.integers", "GRPC 1.0 tenant=(default)"),
        ("terms.integers", "GRPC 1.0 tenant=acme"),
        *(("callers.stranger-cancel", f"{b} 1.0 tenant=acme") for b in ("JSONRPC", "HTTP+JSON", "GRPC")),
        *(("v02.stranger-cancel", f"{b} 0.3 tenant=acme") for b in ("JSONRPC", "HTTP+JSON")),
        *((f"card.{name}", "card A2A-Version=0.3") for name in params),
        ("ap2.declaration", "card A2A-Version=1.0"),
    }, render_console(report, verbose=True)


def test_every_check_passes_on_the_reference_merchant(report: Report) -> None:
    """The reference merchant meets the SHOULDs too: a SHOULD the kit cannot see met is a kit defect."""
    failed = [(r.spec.id, r.target) for r in report.results if r.outcome is Outcome.FAILED]
    assert failed == [], render_console(report)

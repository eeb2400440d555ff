"""The kit's checks of `exact` by Permit2 and of metered `upto` payments, against real merchants.

The merchant takes dev USDC by Permit2 (`X402_ASSET_TRANSFER_METHOD=permit2`) and meters `acme`'s text-stats
(`kinds.MeteredTextStats`): its default tenant offers `exact` by Permit2, `acme` offers `upto`. The kit's
payer holds USDC and gas money but no Permit2 allowance: the kit approves Permit2 itself
(`approve_permit2`). Each check passes where its kind is offered and is skipped, saying why, elsewhere; each
deliberately wrong merchant of `kinds.py` fails the checks that test its fault.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import ExitStack
from typing import Any

import pytest
from eth_account import Account

from a2a_x402.conformance import KitSettings, Outcome, Report, render_console, run_conformance
from a2a_x402.devchain import DevChain
from a2a_x402.facilitator import Facilitator
from a2a_x402.merchant import paid as merchant_paid
from tests.fixtures.conformance import serve_reference_merchant

from .kinds import (
    FAILING_REQUEST,
    ChargesBeforeTheWork,
    ClaimsUnsentPermit2,
    MeteredTextStats,
    SettlesTheMaximum,
    inflates_usage,
    metered_tenants,
    misreports_charge,
)

DEFAULT_1_0 = tuple(f"{b} 1.0 tenant=(default)" for b in ("JSONRPC", "HTTP+JSON", "GRPC"))
ACME_1_0 = tuple(f"{b} 1.0 tenant=acme" for b in ("JSONRPC", "HTTP+JSON", "GRPC"))
METERED = (
    "metered.completes",
    "metered.within-maximum",
    "metered.usage-consistent",
    "metered.settled-on-chain",
)
PERMIT2 = ("permit2.completes", "permit2.settled-on-chain")


def _gas_payer(chain: DevChain) -> str:
    """A fresh payer with 1000 dev USDC and gas money, which has not approved Permit2."""
    key: str = chain.new_payer()
    chain.rpc.call("anvil_setBalance", [Account.from_key(key).address, hex(10**20)])
    return key


class Kinds:
    """Serves the merchant of the module docstring, made one way for one test, and runs the kit against it."""

    def __init__(self, chain: DevChain, database_url: str, folders: pytest.TempPathFactory) -> None:
        self._chain, self._database_url, self._folders = chain, database_url, folders
        self.payer = _gas_payer(chain)
        self.servers = ExitStack()

    def serve(
        self, name: str, *, used: bool = True, facilitator: type[Facilitator] | None = None, **options: Any
    ) -> str:
        """Serve the merchant (its work reporting usage if `used`, its payment layer's facilitator of the
        class `facilitator`, `options` passed to `serve_reference_merchant`); its base URL."""
        folder = self._folders.mktemp(name)
        with pytest.MonkeyPatch.context() as patch:
            if facilitator is not None:
                # Only while the app is built: the composition root then makes this facilitator.
                patch.setattr(merchant_paid, "Facilitator", facilitator)
            return self.servers.enter_context(
                serve_reference_merchant(
                    self._chain,
                    self._database_url,
                    folder,
                    delegate=MeteredTextStats(used=used),
                    tenants_file=str(metered_tenants(folder / "metered.toml")),
                    asset_transfer_method="permit2",
                    **options,
                )
            )

    async def run(
        self, url: str, *only: str, payer: str = "", approve: bool = True, failing: str = ""
    ) -> Report:
        """The kit's checks `only` against the merchant at `url`."""
        settings = KitSettings(
            url,
            self._chain.rpc_url,
            payer or self.payer,
            only=frozenset(only),
            concurrency=6,
            approve_permit2=approve,
            failing_request=failing,
        )
        return await run_conformance(settings)


@pytest.fixture
def kinds(
    kit_chain: DevChain, kit_database: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Kinds]:
    """Merchants of both kinds for one test, each stopped at its end."""
    merchants = Kinds(kit_chain, kit_database, tmp_path_factory)
    with merchants.servers:
        yield merchants


def _outcomes(report: Report, check_id: str) -> dict[str, Outcome]:
    return {r.target: r.outcome for r in report.results if r.spec.id == check_id}


def _assert_all(report: Report, check_ids: Iterable[str], outcome: Outcome, targets: Iterable[str]) -> None:
    """Each of `check_ids` had `outcome` on each of `targets`."""
    for check_id in check_ids:
        outcomes = _outcomes(report, check_id)
        assert {target: outcomes.get(target) for target in targets} == dict.fromkeys(targets, outcome), (
            check_id,
            render_console(report, verbose=True),
        )


def _detail(report: Report, check_id: str, target: str) -> str:
    result = report.result(check_id, target)
    assert result is not None, (check_id, target)
    return result.detail


async def test_each_kind_s_checks_pass_where_it_is_offered_and_are_skipped_elsewhere(kinds: Kinds) -> None:
    url = kinds.serve("good")
    report = await kinds.run(url, "metered", "permit2", "payment.completes", failing=FAILING_REQUEST)

    assert report.ok, render_console(report)
    _assert_all(report, (*METERED, "metered.failed-work"), Outcome.PASSED, ACME_1_0)
    _assert_all(report, PERMIT2, Outcome.PASSED, DEFAULT_1_0)
    # Where the terms offer another kind, the check says which kind it looked for.
    _assert_all(report, (*METERED, "metered.failed-work"), Outcome.SKIPPED, DEFAULT_1_0)
    _assert_all(report, PERMIT2, Outcome.SKIPPED, ACME_1_0)
    assert "offer no upto entry" in _detail(report, "metered.settled-on-chain", DEFAULT_1_0[0])
    assert "offer no exact entry by Permit2" in _detail(report, "permit2.completes", ACME_1_0[1])
    # The EIP-3009 payment checks do not sign an EIP-3009 authorization for either kind.
    _assert_all(report, ("payment.completes",), Outcome.SKIPPED, (*DEFAULT_1_0, *ACME_1_0))
    assert "offer no exact entry by EIP-3009" in _detail(report, "payment.completes", DEFAULT_1_0[2])


async def test_a_settlement_of_nothing_names_no_transaction(kinds: Kinds) -> None:
    url = kinds.serve("unused", used=False)
    report = await kinds.run(url, "metered")

    _assert_all(report, METERED, Outcome.PASSED, ACME_1_0)
    failed_work = _detail(report, "metered.failed-work", ACME_1_0[0])
    assert "--failing-request" in failed_work, failed_work


async def test_without_an_allowance_the_kit_does_not_approve_unless_let(
    kinds: Kinds, kit_chain: DevChain
) -> None:
    url = kinds.serve("no-allowance")
    report = await kinds.run(
        url, "permit2.completes", "metered.completes", payer=_gas_payer(kit_chain), approve=False
    )

    _assert_all(report, ("permit2.completes",), Outcome.SKIPPED, DEFAULT_1_0)
    _assert_all(report, ("metered.completes",), Outcome.SKIPPED, ACME_1_0)
    detail = _detail(report, "permit2.completes", DEFAULT_1_0[0])
    assert "has not approved Permit2" in detail and "--approve-permit2" in detail, detail


async def test_receipts_of_unsent_settlements_fail_the_chain_checks(kinds: Kinds) -> None:
    url = kinds.serve("unsent", facilitator=ClaimsUnsentPermit2)
    report = await kinds.run(url, "metered.completes", "metered.settled-on-chain", "permit2")

    assert not report.ok
    # The merchants did complete the tasks: what fails is that nothing moved.
    _assert_all(report, ("permit2.completes",), Outcome.PASSED, DEFAULT_1_0)
    _assert_all(report, ("metered.completes",), Outcome.PASSED, ACME_1_0)
    _assert_all(report, ("permit2.settled-on-chain",), Outcome.FAILED, DEFAULT_1_0)
    _assert_all(report, ("metered.settled-on-chain",), Outcome.FAILED, ACME_1_0)
    assert "not a successful mined transaction" in _detail(report, "permit2.settled-on-chain", DEFAULT_1_0[0])


@pytest.mark.error_logs(
    "why: the merchant's facilitator settles the maximum, which the merchant's own receipt refuses to report"
)
async def test_settling_the_maximum_for_less_usage_never_completes(kinds: Kinds) -> None:
    url = kinds.serve("maximum", facilitator=SettlesTheMaximum)
    report = await kinds.run(url, "metered.completes")

    assert not report.ok
    _assert_all(report, ("metered.completes",), Outcome.FAILED, ACME_1_0)
    assert "not completed" in _detail(report, "metered.completes", ACME_1_0[0])


async def test_failed_work_charged_fails_the_failed_work_check(kinds: Kinds) -> None:
    url = kinds.serve("charges-failed-work", facilitator=ChargesBeforeTheWork)
    report = await kinds.run(url, "metered.failed-work", failing=FAILING_REQUEST)

    assert not report.ok
    # Each binding's answer is the right one (payment-failed, nothing delivered): only the chain tells.
    _assert_all(report, ("metered.failed-work",), Outcome.FAILED, ACME_1_0)
    detail = _detail(report, "metered.failed-work", ACME_1_0[0])
    assert "nonce is spent although the work failed" in detail, detail


async def test_a_charge_reported_other_than_settled_fails_the_chain_or_maximum_check(kinds: Kinds) -> None:
    url = kinds.serve("misreported", wrap=misreports_charge)
    report = await kinds.run(url, "metered")

    assert not report.ok
    jsonrpc, rest, grpc = ACME_1_0
    # JSON-RPC reports 1 charged, consistently: only the chain shows more moved.
    _assert_all(report, METERED[:3], Outcome.PASSED, [jsonrpc])
    _assert_all(report, ("metered.settled-on-chain",), Outcome.FAILED, [jsonrpc])
    assert "not exactly 1 to" in _detail(report, "metered.settled-on-chain", jsonrpc)
    # HTTP+JSON reports more than the payer authorized.
    _assert_all(report, ("metered.within-maximum", "metered.settled-on-chain"), Outcome.FAILED, [rest])
    assert "over the authorized maximum" in _detail(report, "metered.within-maximum", rest)
    # gRPC is not behind the wrapper: the merchant's own report passes.
    _assert_all(report, METERED, Outcome.PASSED, [grpc])


async def test_usage_that_breaks_its_arithmetic_fails_the_usage_check(kinds: Kinds) -> None:
    url = kinds.serve("inflated", wrap=inflates_usage)
    report = await kinds.run(url, "metered")

    assert not report.ok
    # The wrapper reaches the HTTP bindings only: over gRPC the merchant's own usage passes.
    _assert_all(report, ("metered.usage-consistent",), Outcome.FAILED, ACME_1_0[:2])
    _assert_all(report, ("metered.usage-consistent",), Outcome.PASSED, ACME_1_0[2:])
    _assert_all(report, ("metered.completes", "metered.within-maximum"), Outcome.PASSED, ACME_1_0)
    assert "not quantity × unitPrice" in _detail(report, "metered.usage-consistent", ACME_1_0[0])

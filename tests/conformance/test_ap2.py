"""The kit's checks of the embedded flow (§20), against the reference merchant with AP2 tenants.

`acme` offers the embedded flow and trusts the issuer whose key the kit is given (`ap2_issuer_key`);
`strict` requires mandates; the default tenant is outside the flow. The merchant is on loopback http, so the
kit takes its `jwksUrl`s with `allow_insecure_jwks`. The whole kit runs: every check passes, each `ap2.*`
one at `acme` and `strict` on each binding, those that read the merchant's AP2 receipts
(`RECEIPT_CHECKS`) among them; the standalone flow still passes at `acme` beside its checkout
artifact, and is not paid at `strict`, which requires mandates. On A2A 0.3 `strict` is offered the v0.2
form (§20.7): the `ap2.v02-*` checks pass there, and the standalone v0.2 checks are skipped. Without the
issuer key the mandate checks are skipped saying so; and a merchant whose verifier ignores `payload_hash`
(1.0), or the payment a `user_authorization` signs (0.3), fails `ap2.binding-payload` or
`ap2.v02-binding-payment`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from a2a_x402.conformance import (
    KitSettings,
    Outcome,
    Report,
    render_console,
    render_json,
    run_conformance,
)
from a2a_x402.devchain import DevChain
from tests.fixtures.ap2 import new_key
from tests.fixtures.conformance import serve_reference_merchant

from .ap2 import (
    ap2_tenants,
    cart_total_changed,
    checkout_carries_work,
    ignores_payload_hash,
    ignores_signed_payment,
    publishes_private_keys,
    terms_beside_the_cart,
)

pytest.importorskip(
    "ap2.sdk.mandate",
    reason="the AP2 SDK is not installed (scripts/setup installs it from ../shared/peers/ap2)",
)

BINDINGS = ("JSONRPC", "HTTP+JSON", "GRPC")
ACME = tuple(f"{b} 1.0 tenant=acme" for b in BINDINGS)
STRICT = tuple(f"{b} 1.0 tenant=strict" for b in BINDINGS)
DEFAULT = tuple(f"{b} 1.0 tenant=(default)" for b in BINDINGS)
BINDINGS_0_3 = ("JSONRPC", "HTTP+JSON")
STRICT_0_3 = tuple(f"{b} 0.3 tenant=strict" for b in BINDINGS_0_3)
"""strict requires mandates: on A2A 0.3 it is offered the embedded flow's v0.2 form (§20.7)."""
OTHERS_0_3 = tuple(f"{b} 0.3 tenant={t}" for b in BINDINGS_0_3 for t in ("acme", "(default)"))
V02_FORM = ("ap2.v02-no-required", "ap2.v02-cart-offered")
V02_PAYMENTS = ("ap2.v02-paid-with-mandate", "ap2.v02-binding-payment", "ap2.v02-standalone-refused")
V02_STANDALONE = (
    "v02.terms",
    "v02.listed-in-card",
    "v02.payment-completes",
    "v02.other-version-form",
    "v02.no-signature",
    "v02.streaming-terms",
    "v02.streaming-paid-turn",
)
"""The 0.3 checks of the standalone flow, skipped where the v0.2 form is offered."""
OFFER = ("ap2.checkout-offered", "ap2.checkout-signed", "ap2.checkout-not-work", "ap2.checkout-replaced")
MANDATES = (
    "ap2.binding-payload",
    "ap2.binding-checkout",
    "ap2.binding-round",
    "ap2.issuer-untrusted",
    "ap2.unknown-constraint",
    "ap2.refused-then-paid",
)
_LIFTED: dict[str, Any] = {"max_unpaid_per_minute": 1000, "max_unpaid_tasks": 1000}
"""The unpaid-work limits of each merchant here: the module's database keeps the unpaid tasks of the runs
before (each run leaves some at every tenant), which the default limits would soon refuse."""
RECEIPT_CHECKS = ("ap2.paid-with-mandates", "ap2.budget")
"""The checks that read the merchant's AP2 receipts (§20.6)."""


@pytest.fixture(scope="module")
def issuer() -> Any:
    return new_key("trusted-surface")


@pytest.fixture(scope="module")
def ap2_merchant(kit_chain: DevChain, kit_database: str, kit_folder: Path, issuer: Any) -> Iterator[str]:
    tenants = ap2_tenants(kit_folder, issuer)
    # The whole kit leaves more priced tasks unpaid than a caller may by default (`_LIFTED`).
    with serve_reference_merchant(
        kit_chain, kit_database, kit_folder, **_LIFTED, tenants_file=str(tenants)
    ) as url:
        yield url


async def _run(url: str, chain: DevChain, payer: str, issuer: Any | None, *only: str) -> Report:
    key = json.loads(issuer.export_private()) if issuer is not None else None
    settings = KitSettings(
        url,
        chain.rpc_url,
        payer,
        only=frozenset(only),
        concurrency=6,
        ap2_issuer_key=key,
        allow_insecure_jwks=True,
    )
    return await run_conformance(settings)


def _outcomes(report: Report, check_id: str, targets: tuple[str, ...]) -> dict[str, Outcome | None]:
    found = {r.target: r.outcome for r in report.results if r.spec.id == check_id}
    return {target: found.get(target) for target in targets}


def _assert(report: Report, check_ids: tuple[str, ...], targets: tuple[str, ...], outcome: Outcome) -> None:
    for check_id in check_ids:
        assert _outcomes(report, check_id, targets) == dict.fromkeys(targets, outcome), (
            check_id,
            render_console(report, verbose=True),
        )


def _detail(report: Report, check_id: str, target: str) -> str:
    result = report.result(check_id, target)
    assert result is not None, (check_id, target)
    return result.detail


async def test_the_reference_merchant_passes_the_embedded_flow_s_checks(
    ap2_merchant: str, kit_chain: DevChain, kit_payer: str, issuer: Any
) -> None:
    report = await _run(ap2_merchant, kit_chain, kit_payer, issuer)  # the whole kit

    shown = render_console(report, verbose=True)
    declaration = report.result("ap2.declaration", "card A2A-Version=1.0")
    assert declaration is not None and declaration.outcome is Outcome.PASSED, shown
    _assert(report, (*OFFER, *MANDATES, *RECEIPT_CHECKS), (*ACME, *STRICT), Outcome.PASSED)
    _assert(report, ("ap2.required",), STRICT, Outcome.PASSED)
    _assert(report, ("ap2.required",), ACME, Outcome.SKIPPED)
    # The kit's delivery checks ignore the checkout artifact: the standalone flow still passes at acme.
    standalone = ("payment.completes", "payment.expired", "payment.replayed", "streaming.paid-turn")
    _assert(report, standalone, ACME, Outcome.PASSED)
    # A tenant that requires mandates is paid by the ap2 checks only.
    _assert(report, standalone, STRICT, Outcome.SKIPPED)
    assert "required: true" in _detail(report, "payment.completes", STRICT[0])
    # On A2A 0.3, strict is offered the v0.2 form: its checks pass there, the standalone ones are skipped.
    _assert(report, (*V02_FORM, *V02_PAYMENTS), STRICT_0_3, Outcome.PASSED)
    _assert(report, V02_STANDALONE, STRICT_0_3, Outcome.SKIPPED)
    assert "v0.2 form" in _detail(report, "v02.payment-completes", STRICT_0_3[0])
    _assert(report, V02_STANDALONE, OTHERS_0_3, Outcome.PASSED)
    _assert(report, (*V02_FORM, *V02_PAYMENTS), OTHERS_0_3, Outcome.SKIPPED)
    assert "not offered" in _detail(report, "ap2.v02-cart-offered", OTHERS_0_3[0])
    # Outside the embedded flow every ap2 check is skipped, saying why.
    _assert(report, (*OFFER, *MANDATES, *RECEIPT_CHECKS, "ap2.required"), DEFAULT, Outcome.SKIPPED)
    assert "no entry for tenant (default)" in _detail(report, "ap2.checkout-offered", DEFAULT[0])
    # Nothing fails.
    assert [r for r in report.results if r.outcome is Outcome.FAILED] == [], shown
    # No key of the issuer's ever reaches the report.
    secret = json.loads(issuer.export_private())["d"]
    assert secret not in shown and secret not in render_json(report)


async def test_without_the_issuer_key_the_mandate_checks_are_skipped(
    ap2_merchant: str, kit_chain: DevChain, kit_payer: str
) -> None:
    report = await _run(ap2_merchant, kit_chain, kit_payer, None, "ap2")

    _assert(report, OFFER, ACME, Outcome.PASSED)
    _assert(report, (*MANDATES, *RECEIPT_CHECKS), ACME, Outcome.SKIPPED)
    _assert(report, ("ap2.required",), STRICT, Outcome.PASSED)
    assert "--ap2-issuer-key" in _detail(report, "ap2.binding-round", ACME[0])
    _assert(report, V02_FORM, STRICT_0_3, Outcome.PASSED)
    _assert(report, V02_PAYMENTS, STRICT_0_3, Outcome.SKIPPED)
    assert "--ap2-issuer-key" in _detail(report, "ap2.v02-paid-with-mandate", STRICT_0_3[0])


async def test_merchants_ignoring_the_payment_their_mandates_bind_fail_the_binding_checks(
    kit_chain: DevChain, kit_database: str, kit_payer: str, issuer: Any, tmp_path: Path
) -> None:
    """On A2A 1.0 the verifier ignores `payload_hash`; on A2A 0.3 the hash of the payment_mandate_contents
    that user_authorization signs: each takes a payment the user did not sign for."""
    tenants = ap2_tenants(tmp_path, issuer)
    checks = (
        "ap2.binding-payload",
        "ap2.binding-round",
        "ap2.v02-binding-payment",
        "ap2.v02-paid-with-mandate",
    )
    with pytest.MonkeyPatch.context() as patch:
        ignores_payload_hash(patch)
        ignores_signed_payment(patch)
        # The module's database holds the unpaid tasks of the runs before: the limits are lifted (`_LIFTED`).
        with serve_reference_merchant(
            kit_chain, kit_database, tmp_path, **_LIFTED, tenants_file=str(tenants)
        ) as url:
            report = await _run(url, kit_chain, kit_payer, issuer, *checks)

    _assert(report, ("ap2.binding-payload",), ACME, Outcome.FAILED)
    assert "not refused" in _detail(report, "ap2.binding-payload", ACME[0])
    _assert(report, ("ap2.v02-binding-payment",), STRICT_0_3, Outcome.FAILED)
    assert "not refused" in _detail(report, "ap2.v02-binding-payment", STRICT_0_3[0])
    # What the faults do not touch still passes.
    _assert(report, ("ap2.binding-round",), ACME, Outcome.PASSED)
    _assert(report, ("ap2.v02-paid-with-mandate",), STRICT_0_3, Outcome.PASSED)


async def test_work_under_the_checkout_s_id_and_private_keys_in_its_jwks_are_caught(
    kit_chain: DevChain, kit_database: str, kit_payer: str, issuer: Any, tmp_path: Path
) -> None:
    tenants = ap2_tenants(tmp_path, issuer)
    options: dict[str, Any] = {**_LIFTED, "tenants_file": str(tenants)}
    with serve_reference_merchant(
        kit_chain, kit_database, tmp_path, wrap=checkout_carries_work, **options
    ) as url:
        early = await _run(url, kit_chain, kit_payer, issuer, "ap2.checkout-offered", "payment.expired")
    with serve_reference_merchant(
        kit_chain, kit_database, tmp_path, wrap=publishes_private_keys, **options
    ) as url:
        private = await _run(url, kit_chain, kit_payer, issuer, "ap2.declaration", "ap2.checkout-signed")

    json_bindings = ACME[:2]  # the wrapper rewrites HTTP answers; gRPC's are the merchant's own
    _assert(early, ("ap2.checkout-offered", "payment.expired"), json_bindings, Outcome.FAILED)
    assert "carries an artifact" in _detail(early, "payment.expired", ACME[0])
    _assert(early, ("ap2.checkout-offered", "payment.expired"), ACME[2:], Outcome.PASSED)
    declaration = private.result("ap2.declaration", "card A2A-Version=1.0")
    assert declaration is not None and declaration.outcome is Outcome.FAILED
    assert "private key" in declaration.detail and "WW91IHNob3Vs" not in render_console(private, verbose=True)
    _assert(private, ("ap2.checkout-signed",), ACME, Outcome.FAILED)


async def test_a_cart_changed_after_signing_and_terms_beside_it_are_caught_on_0_3(
    kit_chain: DevChain, kit_database: str, kit_payer: str, issuer: Any, tmp_path: Path
) -> None:
    tenants = ap2_tenants(tmp_path, issuer)
    options: dict[str, Any] = {**_LIFTED, "tenants_file": str(tenants)}
    with serve_reference_merchant(
        kit_chain, kit_database, tmp_path, wrap=cart_total_changed, **options
    ) as url:
        changed = await _run(
            url, kit_chain, kit_payer, issuer, "ap2.v02-cart-offered", "ap2.v02-paid-with-mandate"
        )
    with serve_reference_merchant(
        kit_chain, kit_database, tmp_path, wrap=terms_beside_the_cart, **options
    ) as url:
        beside = await _run(url, kit_chain, kit_payer, issuer, "ap2.v02-no-required")

    for check_id in ("ap2.v02-cart-offered", "ap2.v02-paid-with-mandate"):
        _assert(changed, (check_id,), STRICT_0_3, Outcome.FAILED)
        assert "cart_hash" in _detail(changed, check_id, STRICT_0_3[0])
    _assert(beside, ("ap2.v02-no-required",), STRICT_0_3, Outcome.FAILED)
    assert "x402.payment.required" in _detail(beside, "ap2.v02-no-required", STRICT_0_3[1])

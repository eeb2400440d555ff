"""The kit treats the merchant as untrusted: every misbehaviour is a failed check with evidence, never a
crash, every request ends within its timeout, and the kit signs nothing the card does not allow."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from a2a_x402.conformance import CHECKS, KitSettings, Outcome, Report, Scope, render_console, run_conformance
from a2a_x402.devchain import DevChain
from tests.fixtures.conformance import serve_reference_merchant
from tests.fixtures.servers import free_port

from .broken import ROGUE_PAY_TO, rogue_pay_to
from .hostile import good_card, hang, hostile_app

TIMEOUT_S = 1.0
"""The kit's timeout where the test is about a server that never answers."""
PATIENT_S = 15.0
"""Its timeout elsewhere: a loaded machine must not turn a prompt bad answer into a timeout."""
_HANGING_BOUND_S = 30 * TIMEOUT_S
"""What a run against a server that never answers stays under on however busy a machine (it normally takes
about three timeouts): only a check without its timeout reaches it, waiting as long as the server hangs."""
# A payer that never pays: the hostile servers are never paid, and the kit must not need the key's funds.
UNUSED_KEY = "0x" + "11" * 32


async def _run(url: str, *, max_bytes: int = 2 * 1024 * 1024, timeout_s: float = PATIENT_S) -> Report:
    # No chain: the hostile servers are never paid (port 9 is discard; every chain read fails at once).
    settings = KitSettings(
        url, "http://127.0.0.1:9/", UNUSED_KEY, timeout_s=timeout_s, concurrency=32, max_bytes=max_bytes
    )
    return await run_conformance(settings)


def _failure(report: Report, check_id: str, target: str = "card A2A-Version=1.0") -> str:
    result = report.result(check_id, target)
    assert result is not None and result.outcome is Outcome.FAILED, render_console(report)
    assert result.evidence, result
    return result.detail + " " + " ".join(e["answer"] for e in result.evidence)


@pytest.mark.parametrize(
    ("card", "expected"),
    [
        ([1, 2, 3], "not a JSON object"),
        ({"name": "no interfaces", "capabilities": 5}, "lists no A2A 1.0 or 0.3 interface"),
        (b'{"name": "cut off', "not JSON"),
        (b'{"a": ' * 100_000 + b"1" + b"}" * 100_000, "not JSON"),
    ],
    ids=["array", "no-interfaces", "truncated", "deeply-nested"],
)
async def test_a_malformed_card_fails_card_served(
    asgi_server: Callable[..., str], card: object, expected: str
) -> None:
    report = await _run(asgi_server(hostile_app(card=card)))
    assert not report.ok
    assert expected in _failure(report, "card.served")


async def test_a_card_with_a_malformed_declaration_fails_its_checks(asgi_server: Callable[..., str]) -> None:
    base = asgi_server(hostile_app())
    card = {
        "supportedInterfaces": [
            {"url": f"{base}/a2a/jsonrpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
        "capabilities": {
            "extensions": [
                {
                    "uri": "https://github.com/google-agentic-commerce/a2a-x402/blob/main/spec/v0.3",
                    "params": {"networks": "eip155:1", "payTo": 7},
                }
            ]
        },
    }
    report = await _run(asgi_server(hostile_app(card=card)))
    assert "params does not validate" in _failure(report, "card.params-schema")
    # The interface it lists answers 404 to everything: each check fails with that answer as evidence.
    assert "404" in _failure(report, "activation.refused", "JSONRPC 1.0 tenant=(default)")


@pytest.mark.error_logs("why: the hanging merchant it serves is cut off at shutdown, mid-request")
async def test_a_hanging_server_fails_within_the_timeout(asgi_server: Callable[..., str]) -> None:
    started = time.monotonic()
    report = await _run(asgi_server(hostile_app(card=hang)), timeout_s=TIMEOUT_S)
    assert time.monotonic() - started < _HANGING_BOUND_S
    assert f"no complete answer within {TIMEOUT_S:g} s" in _failure(report, "card.served")


async def test_a_hanging_endpoint_fails_every_interface_check_in_time(
    asgi_server: Callable[..., str],
) -> None:
    arrived: list[int] = []  # one entry a request; then how many had arrived when the first was given up

    async def hang_till_given_up(request: Request) -> Response:
        arrived.append(len(arrived))
        while (await request.receive())["type"] != "http.disconnect":
            pass  # the body, then nothing till the kit gives up
        cut_off.append(len(arrived))
        return Response(status_code=204)

    cut_off: list[int] = []
    started = time.monotonic()
    report = await _run(asgi_server(hostile_app(jsonrpc=hang_till_given_up)), timeout_s=TIMEOUT_S)
    # About 20 scenarios at once, each stopped by its first request's timeout. Counted, not timed: more than
    # one request was waiting before the first was given up (one after another, only one would ever be).
    assert cut_off and cut_off[0] > 1, f"requests waited one at a time: {cut_off}"
    assert time.monotonic() - started < _HANGING_BOUND_S
    interface = [r for r in report.results if r.target == "JSONRPC 1.0 tenant=(default)"]
    # One tenant only: tenant.isolation does not apply; no caller tokens given: callers.stranger-cancel does
    # not either; no failing request given: metered.failed-work neither; the card declares no params.ap2:
    # no ap2 check; every other check fails.
    ap2 = {spec.id for spec in CHECKS if spec.id.startswith("ap2.") and spec.scope is Scope.A2A_1_0}
    not_applicable = {"tenant.isolation", "callers.stranger-cancel", "metered.failed-work", *ap2}
    assert {r.spec.id for r in interface if r.outcome is Outcome.SKIPPED} == not_applicable
    assert all(r.outcome is Outcome.FAILED for r in interface if r.spec.id not in not_applicable), (
        render_console(report)
    )
    assert "no complete answer" in _failure(report, "payment.completes", "JSONRPC 1.0 tenant=(default)")


# An exception's class (`ConnectError: `, `OSError`) or repr (`ConnectError('...')`) in a report's words.
_PYTHON_WORDS = re.compile(r"\b[A-Z]\w*(?:Error|Exception)\b|\w+\('")


async def test_an_interface_nobody_serves_fails_in_words_not_in_an_exceptions_name(
    asgi_server: Callable[..., str],
) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    report = await _run(asgi_server(hostile_app(card=good_card(closed))))

    assert "the request failed: connection refused" in _failure(
        report, "activation.refused", "JSONRPC 1.0 tenant=(default)"
    )
    details = [r.detail for r in report.results if r.target == "JSONRPC 1.0 tenant=(default)" and r.detail]
    assert details and not [d for d in details if _PYTHON_WORDS.search(d)], details


async def test_a_huge_answer_is_cut_off(asgi_server: Callable[..., str]) -> None:
    async def huge(_request: Request) -> Response:
        return Response(
            b'{"jsonrpc": "2.0", "id": 1, "result": "' + b"x" * 3_000_000 + b'"}',
            media_type="application/json",
        )

    report = await _run(asgi_server(hostile_app(card=huge)), max_bytes=1_000_000)
    assert "over the cap of 1000000" in _failure(report, "card.served")


async def test_a_non_json_answer_is_a_failed_check(asgi_server: Callable[..., str]) -> None:
    async def html(_request: Request) -> Response:
        return Response("<html>busy</html>", media_type="text/html")

    report = await _run(asgi_server(hostile_app(jsonrpc=html)))
    assert "is not JSON" in _failure(report, "activation.refused", "JSONRPC 1.0 tenant=(default)")


async def test_a_redirect_loop_is_not_followed(asgi_server: Callable[..., str]) -> None:
    requests: list[str] = []

    async def loop(request: Request) -> Response:
        requests.append(str(request.url))
        return RedirectResponse(str(request.url), status_code=307)

    report = await _run(asgi_server(hostile_app(card=loop)))
    assert "HTTP 307" in _failure(report, "card.served")
    assert len(requests) == 3, requests  # one per card reading: no redirect followed


@pytest.fixture(scope="module")
def rogue_url(kit_chain: DevChain, kit_database: str, kit_folder: Path) -> Iterator[str]:
    """The reference merchant whose 1.0 HTTP answers ask to be paid to an address the card does not list."""
    with serve_reference_merchant(kit_chain, kit_database, kit_folder, wrap=rogue_pay_to) as url:
        yield url


def _balance(chain: DevChain, address: str) -> int:
    data = "0x70a08231" + address.lower().removeprefix("0x").rjust(64, "0")
    return int(chain.rpc.call("eth_call", [{"to": chain.asset, "data": data}, "latest"]), 16)


async def test_terms_to_a_pay_to_not_in_the_card_are_never_signed(
    rogue_url: str, kit_chain: DevChain, kit_payer: str
) -> None:
    before = _balance(kit_chain, ROGUE_PAY_TO)
    settings = KitSettings(
        rogue_url, kit_chain.rpc_url, kit_payer, only=frozenset({"terms", "payment", "streaming"})
    )
    report = await run_conformance(settings)
    assert not report.ok
    target = "JSONRPC 1.0 tenant=(default)"
    assert ROGUE_PAY_TO in _failure(report, "terms.listed-in-card", target)
    assert "does not sign" in _failure(report, "payment.completes", target)
    assert "does not sign" in _failure(report, "payment.wrong-amount", target)
    assert _balance(kit_chain, ROGUE_PAY_TO) == before
    # gRPC is not behind the rewrite: its payments go through, to the listed payTo.
    settled = report.result("payment.settled-on-chain", "GRPC 1.0 tenant=acme")
    assert settled is not None and settled.outcome is Outcome.PASSED


async def test_the_kit_never_signs_over_its_cap(rogue_url: str, kit_chain: DevChain, kit_payer: str) -> None:
    settings = KitSettings(
        rogue_url, kit_chain.rpc_url, kit_payer, max_amount=1, only=frozenset({"payment.completes"})
    )
    report = await run_conformance(settings)
    assert "over the offered" in _failure(report, "payment.completes", "GRPC 1.0 tenant=(default)")

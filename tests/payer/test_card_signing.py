"""The payer against signed and unsigned merchant cards: policies, a man in the middle, payTo pinning, CLI.

Signed merchants are the reference merchant with a key directory; keys are always fetched through the
card's ``jku`` from the merchant over loopback. The man in the middle is a reverse proxy on the merchant's
public origin (the card names it in its interfaces and ``jku``) that swaps the payee's address for the
attacker's in what it relays.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from a2a_x402.agentcard import (
    JWKS_PATH,
    CardStatus,
    CardVerificationError,
    CardVerifier,
    JwksCache,
    KeyStore,
    SignatureCheck,
    SignaturePolicy,
    VerificationResult,
)
from a2a_x402.devchain import DevChain
from a2a_x402.payer import (
    Payer,
    PaymentStage,
    PayToNotPinnedError,
    StageKind,
    UntrustedCardError,
    resolve_card,
)
from a2a_x402.payer.cli import _jku_hint
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.servers import base_url_of, bind_loopback

from .conftest import PAY_TO, PRICE, TEXT
from .test_cli import transaction_in, x402_pay

pytestmark = pytest.mark.timeout(60)

ATTACKER = "0x976EA74026E726554dB657fA54763abd0C3a0aa9"  # anvil account 6
# Hop-by-hop or recomputed headers a proxy must not copy.
_NOT_RELAYED = frozenset({"host", "content-length", "content-encoding", "transfer-encoding", "connection"})


def block_number(chain: DevChain) -> int:
    return int(chain.rpc.call("eth_blockNumber"), 16)


def verifier(http: httpx.AsyncClient, policy: SignaturePolicy) -> CardVerifier:
    return CardVerifier(jwks=JwksCache(http, allow_insecure_localhost=True), policy=policy)


@pytest.fixture
def keys_dir(tmp_path: Path) -> Path:
    """A merchant key directory with one ES256 key."""
    KeyStore(tmp_path / "keys").generate()
    return tmp_path / "keys"


def rewriting_proxy(upstream: str, *, card: bool, terms: bool) -> Starlette:
    """Relays everything to ``upstream``, replacing PAY_TO by ATTACKER in the card (``card``) and in the A2A
    answers (``terms``). The JWK Set passes untouched: the attacker cannot sign with the merchant's key."""

    async def relay(request: Request) -> Response:
        path = request.url.path
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _NOT_RELAYED}
        async with httpx.AsyncClient(timeout=HANG_S) as http:
            reply = await http.request(
                request.method, upstream + path, headers=headers, content=await request.body()
            )
        body = reply.content
        is_card, is_jwks = path == AGENT_CARD_WELL_KNOWN_PATH, path == JWKS_PATH
        if (card and is_card) or (terms and not is_card and not is_jwks):
            body = body.replace(PAY_TO.encode(), ATTACKER.encode())  # same length: the JSON stays valid
        relayed = {k: v for k, v in reply.headers.items() if k.lower() not in _NOT_RELAYED | {"etag"}}
        return Response(body, status_code=reply.status_code, headers=relayed)

    return Starlette(routes=[Route("/{path:path}", relay, methods=["GET", "POST"])])


def behind_proxy(
    merchant: Callable[..., str], asgi_server: Callable[..., str], keys_dir: Path, *, card: bool, terms: bool
) -> str:
    """A signed merchant whose public origin is a man in the middle; returns that origin."""
    sock = bind_loopback()
    public_url = base_url_of(sock)
    upstream = merchant(public_url=public_url, card_keys_dir=str(keys_dir))
    return asgi_server(rewriting_proxy(upstream, card=card, terms=terms), sock=sock)


async def test_require_pays_a_merchant_whose_card_verifies(
    merchant: Callable[..., str], keys_dir: Path, chain: DevChain, new_payer: Callable[..., str]
) -> None:
    [key] = KeyStore(keys_dir).signing_keys()
    url = merchant(card_keys_dir=str(keys_dir))

    async with httpx.AsyncClient(timeout=HANG_S) as http:
        card_verifier = verifier(http, SignaturePolicy.REQUIRE)
        async with await Payer.connect(url, new_payer(), card_verifier=card_verifier, http=http) as payer:
            verification = payer.card.verification
            result = await payer.pay(TEXT)

    assert verification is not None and (verification.status, verification.kid) == (
        CardStatus.VERIFIED,
        key.kid,
    )
    assert result.paid is not None and (result.paid.amount, result.paid.pay_to) == (PRICE, PAY_TO)
    assert chain.balance_of(PAY_TO) == PRICE


async def test_warn_pays_despite_an_unsigned_card_and_logs_why(
    merchant: Callable[..., str],
    chain: DevChain,
    new_payer: Callable[..., str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    url = merchant()

    with caplog.at_level(logging.WARNING, logger="a2a_x402.agentcard"):
        async with httpx.AsyncClient(timeout=HANG_S) as http:
            card_verifier = verifier(http, SignaturePolicy.WARN)
            async with await Payer.connect(url, new_payer(), card_verifier=card_verifier, http=http) as payer:
                verification = payer.card.verification
                result = await payer.pay(TEXT)

    assert verification is not None and verification.status is CardStatus.UNSIGNED
    assert result.paid is not None and chain.balance_of(PAY_TO) == PRICE
    [record] = [r for r in caplog.records if r.name.startswith("a2a_x402.agentcard")]
    assert record.levelno == logging.WARNING
    assert "code=card_unsigned" in record.getMessage() and "the card has no signatures" in record.getMessage()


async def test_a_man_in_the_middle_swapping_the_cards_pay_to_is_refused_under_require(
    merchant: Callable[..., str],
    asgi_server: Callable[..., str],
    keys_dir: Path,
    chain: DevChain,
    new_payer: Callable[..., str],
) -> None:
    # The attacker rewrites the payee everywhere, so card and terms agree: only the signature can tell.
    url = behind_proxy(merchant, asgi_server, keys_dir, card=True, terms=True)
    key, block = new_payer(), block_number(chain)

    async with httpx.AsyncClient(timeout=HANG_S) as http:
        with pytest.raises(UntrustedCardError) as caught:
            await Payer.connect(url, key, card_verifier=verifier(http, SignaturePolicy.REQUIRE), http=http)
        async with await Payer.connect(
            url, key, card_verifier=verifier(http, SignaturePolicy.WARN), http=http
        ) as warned:
            pinned = warned.card.terms.payees(chain.network, "")
            verification = warned.card.verification

    assert (caught.value.code, caught.value.signed) == ("card_untrusted", False)
    cause = caught.value.__cause__
    assert isinstance(cause, CardVerificationError)
    assert [check.code for check in cause.result.checks] == ["signature_mismatch"]
    assert block_number(chain) == block
    # What `require` protects from: under `warn` the payer would pin the attacker's address.
    assert verification is not None and verification.status is CardStatus.FAILED
    assert pinned == {ATTACKER}


async def test_terms_paying_an_address_the_verified_card_does_not_list_are_refused(
    merchant: Callable[..., str],
    asgi_server: Callable[..., str],
    keys_dir: Path,
    chain: DevChain,
    new_payer: Callable[..., str],
) -> None:
    # The card passes untouched (and verifies); the payment-required terms are rewritten to pay the attacker.
    url = behind_proxy(merchant, asgi_server, keys_dir, card=False, terms=True)
    stages: list[PaymentStage] = []
    key, block = new_payer(), block_number(chain)

    async with httpx.AsyncClient(timeout=HANG_S) as http:
        card_verifier = verifier(http, SignaturePolicy.REQUIRE)
        async with await Payer.connect(url, key, card_verifier=card_verifier, http=http) as payer:
            verified = payer.card.verification
            with pytest.raises(PayToNotPinnedError) as caught:
                await payer.pay(TEXT, on_stage=stages.append)

    assert verified is not None and verified.verified
    assert (caught.value.code, caught.value.signed) == ("pay_to_not_pinned", False)
    assert f"payTo {ATTACKER} is not listed in the card" in str(caught.value)
    assert [s for s in stages if s.kind is StageKind.PAYMENT_SIGNED] == []
    assert block_number(chain) == block


async def test_a_card_carrying_another_merchants_signatures_is_refused(
    merchant: Callable[..., str], keys_dir: Path
) -> None:
    genuine = merchant(card_keys_dir=str(keys_dir))
    async with httpx.AsyncClient(timeout=HANG_S) as http:
        reply = await http.get(genuine + AGENT_CARD_WELL_KNOWN_PATH, headers={"A2A-Version": "1.0"})
    signatures = reply.json()["signatures"]

    def graft(card: dict[str, Any]) -> None:
        card["signatures"] = signatures

    # An impostor paid to the attacker, presenting the genuine merchant's signatures (jku and all).
    impostor = merchant(pay_to=ATTACKER, card_edit=graft)
    key = "0x" + "11" * 32

    async with httpx.AsyncClient(timeout=HANG_S) as http:
        with pytest.raises(UntrustedCardError) as caught:
            await Payer.connect(
                impostor, key, card_verifier=verifier(http, SignaturePolicy.REQUIRE), http=http
            )

    cause = caught.value.__cause__
    assert isinstance(cause, CardVerificationError)
    # The jku names the genuine merchant's origin, which the impostor's card is not bound to.
    assert [check.code for check in cause.result.checks] == ["jwks_url_not_allowed"]


async def test_resolutions_sharing_a_jwks_cache_fetch_the_merchants_keys_once(
    merchant: Callable[..., str], keys_dir: Path
) -> None:
    url = merchant(card_keys_dir=str(keys_dir))
    key = "0x" + "11" * 32
    jwks_fetches: list[str] = []

    async def note_jwks_fetch(request: httpx.Request) -> None:
        if request.url.path == JWKS_PATH:
            jwks_fetches.append(str(request.url))

    async with httpx.AsyncClient(timeout=HANG_S, event_hooks={"request": [note_jwks_fetch]}) as http:
        jwks = JwksCache(http, allow_insecure_localhost=True)
        first = await resolve_card(http, url, jwks=jwks)
        second = await resolve_card(http, url, jwks=jwks)
        async with await Payer.connect(url, key, jwks=jwks, http=http) as payer:
            third = payer.card
        with pytest.raises(ValueError, match="either a verifier or a jwks cache"):
            await resolve_card(http, url, verifier=verifier(http, SignaturePolicy.WARN), jwks=jwks)

    assert [card.verification.status for card in (first, second, third)] == [CardStatus.VERIFIED] * 3
    assert len(jwks_fetches) == 1


async def test_x402_pay_card_policy_flags(
    merchant: Callable[..., str], keys_dir: Path, chain: DevChain, new_payer: Callable[..., str]
) -> None:
    [key] = KeyStore(keys_dir).signing_keys()
    signed, unsigned = merchant(card_keys_dir=str(keys_dir)), merchant()
    payers = [new_payer() for _ in range(4)]
    block = block_number(chain)

    verified, insecure, warned, refused = await asyncio.gather(
        x402_pay(
            "--card-url",
            signed,
            "--card-policy",
            "require",
            "--allow-insecure-jku",
            TEXT,
            env=_key(payers[0]),
        ),
        x402_pay("--card-url", signed, "--card-policy", "require", TEXT, env=_key(payers[1])),
        x402_pay("--card-url", unsigned, TEXT, env=_key(payers[2])),
        x402_pay(
            "--card-url",
            unsigned,
            "--card-policy",
            "require",
            "--allow-insecure-jku",
            TEXT,
            env=_key(payers[3]),
        ),
    )

    assert verified[0] == 0, verified[2]
    assert f"\ncard: signature verified (kid {key.kid})\n" in verified[1]
    assert chain.rpc.call("eth_getTransactionReceipt", [transaction_in(verified[1])])["status"] == "0x1"
    # Without the development flag a plain-http jku is not fetched, so the signature cannot be checked.
    assert (
        insecure[0] == 1
        and "Error: card_untrusted: " in insecure[2]
        and "jwks_url_not_allowed" in insecure[2]
    )
    assert (
        insecure[2]
        .rstrip("\n")
        .endswith(
            "; to fetch its keys over plain http from localhost (development), pass --allow-insecure-jku"
        )
    )
    assert len(insecure[2].splitlines()) == 1, insecure[2]
    assert "nothing was signed" in insecure[2] and "signed:" not in insecure[1]
    # warn (the default): reported, logged with its reason, and paid.
    assert warned[0] == 0, warned[2]
    assert "\ncard: unsigned\n" in warned[1] and "code=card_unsigned" in warned[2]
    assert (
        refused[0] == 1
        and "Error: card_untrusted: " in refused[2]
        and "the card has no signatures" in refused[2]
    )
    assert "nothing was signed" in refused[2] and "signed:" not in refused[1]
    assert chain.balance_of(PAY_TO) == 2 * PRICE  # exactly the two runs that were allowed to pay
    assert block_number(chain) == block + 2


async def test_x402_pay_warns_of_a_plain_http_jku_naming_the_flag_and_pays(
    merchant: Callable[..., str], keys_dir: Path, chain: DevChain, new_payer: Callable[..., str]
) -> None:
    status, out, err = await x402_pay(
        "--card-url", merchant(card_keys_dir=str(keys_dir)), TEXT, env=_key(new_payer())
    )

    assert status == 0, err
    [card_line] = [line for line in out.splitlines() if line.startswith("card: signature")]
    assert card_line.startswith("card: signature FAILED: ") and "is not HTTPS" in card_line
    assert card_line.endswith("pass --allow-insecure-jku")
    assert chain.balance_of(PAY_TO) == PRICE


def test_the_flag_is_named_only_when_it_would_let_the_jku_through() -> None:
    def failed(jku: str, code: str = "jwks_url_not_allowed") -> VerificationResult:
        check = SignatureCheck(index=0, kid="k", alg="ES256", jku=jku, code=code, reason="refused")
        return VerificationResult(CardStatus.FAILED, None, "card_verification_failed", "refused", (check,))

    local = failed("http://127.0.0.1:8000/.well-known/jwks.json")
    assert "--allow-insecure-jku" in _jku_hint(local, allow_insecure_jku=False)
    assert _jku_hint(local, allow_insecure_jku=True) == ""  # given already: something else failed
    assert _jku_hint(failed("http://shop.example/.well-known/jwks.json"), allow_insecure_jku=False) == ""
    assert _jku_hint(failed(local.checks[0].jku or "", "signature_mismatch"), allow_insecure_jku=False) == ""


def _key(private_key: str) -> dict[str, str]:
    return {"X402_PAYER_KEY": private_key}

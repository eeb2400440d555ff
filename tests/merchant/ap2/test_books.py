"""A payment made with AP2 mandates in the books, served for real (§20.5, §20.6): its ledger entry, its
`settlement.completed` webhook, the billing statement, the dashboard and its CSV name the mandates by the
three references matching what was sent (the checkout's hash, the closed payment mandate's reference, the
open payment mandate's key), while a payment made without mandates carries none. The mandates themselves
are kept as evidence with the receipts that ended their round, purged after their retention (a clock the
test sets), and never appear (nor those receipts) in the DEBUG log, a webhook body, a dashboard page, an
export or `/metrics`. `x402_ap2_mandates_total` counts the refusal and the acceptance.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import re
import secrets
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client import CollectorRegistry

from a2a_x402.devchain import DevChain
from a2a_x402.extension import Ap2ErrorCode, Ap2Mandates, ap2_digest
from a2a_x402.merchant._metrics import MerchantMetrics
from a2a_x402.merchant.ap2 import Ap2EvidenceStore, mandate_reference
from a2a_x402.merchant.edge import JSONRPC_PATH
from a2a_x402.merchant.webhooks import generate_secret
from a2a_x402.observability import LogSettings, configure_logging
from a2a_x402.payer import present_mandates, sign_payment
from a2a_x402.storage import create_engine
from tests.fixtures.ap2 import MERCHANT, OpenTerms, issue_open_mandates, new_key, public_jwks
from tests.fixtures.deadlines import wait_until
from tests.fixtures.merchant import (
    DEFAULT_PAY_TO,
    DEFAULT_PRICE,
    MerchantStarter,
    MerchantWire,
    RunningMerchant,
    offered_terms,
    payment_message,
    user_message,
)
from tests.merchant.ap2.shop import ACME, rows, status_receipts, with_mandates
from tests.merchant.ap2.support import write_key
from tests.merchant.ap2.test_offer import checkout_of
from tests.merchant.ap2.test_paid_with_mandates import refused
from tests.merchant.webhooks.receiver import HOOK_PATH, Receiver

# Autouse here too: the logging `debug_log` configures is put back after the test.
from tests.observability.conftest import restored_logging  # noqa: F401

pytest.importorskip(
    "ap2.sdk.mandate",
    reason="the AP2 SDK is not installed (scripts/setup installs it from ../shared/peers/ap2)",
)

JSON = dict[str, Any]


@dataclass
class Books:
    """The merchant (acme in the embedded flow, the default tenant not), its tokens and webhook receiver."""

    merchant: RunningMerchant
    tokens: dict[str, str]
    receiver: Receiver

    async def get(self, http: httpx.AsyncClient, tenant: str, path: str) -> httpx.Response:
        """`path` under `/tenants/<tenant>` with the tenant's token."""
        answer = await http.get(
            f"/tenants/{tenant or 'default'}{path}",
            headers={"authorization": f"Bearer {self.tokens[tenant]}"},
        )
        assert answer.status_code == 200, (path, answer.status_code, answer.text[:200])
        return answer


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def debug_log() -> Iterator[list[logging.LogRecord]]:
    """Every record logged under the services' log setup at `X402_LOG_LEVEL=DEBUG` (as `serve` sets it
    up: the dependencies that write bodies held above DEBUG), as logged, before any redaction. The
    logging is put back after the test by `restored_logging` (autouse)."""
    configure_logging(LogSettings(log_level="DEBUG", _env_file=None))
    handler = _Records()
    logging.getLogger().addHandler(handler)
    yield handler.records


def _written(record: logging.LogRecord) -> str:
    """A record's message, and its traceback if any."""
    trace = logging.Formatter().formatException(record.exc_info) if record.exc_info else ""
    return f"{record.name} {record.getMessage()} {trace}"


@pytest.fixture
def user_key() -> Any:
    return new_key("trusted-surface")


@pytest.fixture
def books(
    start_merchant: MerchantStarter,
    database_url: str,
    tmp_path: Path,
    user_key: Any,
    asgi_server: Callable[..., str],
) -> Books:
    secret = generate_secret()
    receiver = Receiver([secret])
    hook = asgi_server(receiver.app) + HOOK_PATH
    tokens = {tenant: f"{tenant or 'default'}-{secrets.token_urlsafe(24)}" for tenant in ("", "acme")}
    (tmp_path / "surface.jwks.json").write_text(json.dumps(public_jwks(user_key)))
    write_key(tmp_path / "acme.pem")
    website = f', website = "{MERCHANT.website}"' if MERCHANT.website else ""
    webhook = f'url = "{hook}"\nsecret = "{secret}"\nevent_types = ["settlement.completed"]\n'
    (tmp_path / "tenants.toml").write_text(
        f'[default]\npay_to = "{DEFAULT_PAY_TO}"\nprice = {DEFAULT_PRICE}\napi_token = "{tokens[""]}"\n\n'
        f"[[default.webhooks]]\n{webhook}\n"
        f'[tenants.acme]\npay_to = "{ACME[0]}"\nprice = {ACME[1]}\napi_token = "{tokens["acme"]}"\n\n'
        f'[tenants.acme.ap2]\nmerchant = {{ id = "{MERCHANT.id}", name = "{MERCHANT.name}"{website} }}\n'
        'checkout_keys = ["acme.pem"]\nissuers = ["surface.jwks.json"]\n\n'
        f"[[tenants.acme.webhooks]]\n{webhook}"
    )
    merchant = start_merchant(
        database_url, tenants_file=tmp_path / "tenants.toml", webhooks_allow_private=True
    )
    return Books(merchant, tokens, receiver)


def pieces(mandates: Iterable[Ap2Mandates]) -> set[str]:
    """What of the mandates must never be shown: every SD-JWT, disclosure and key-binding JWT they are
    made of, and each JWT's signature alone."""
    found: set[str] = set()
    for sent in mandates:
        for token in (sent.checkout_mandate, sent.payment_mandate):
            found.add(token)
            for piece in token.split("~"):
                if len(piece) >= 16:
                    found.add(piece)
                    signature = piece.rsplit(".", 1)[-1]
                    found.update([signature] if "." in piece and len(signature) >= 16 else [])
    return found


def metric(text: str, tenant: str, outcome: str, code: str) -> float:
    """The value of `x402_ap2_mandates_total` for the labels given (0 when the series is absent)."""
    for line in text.splitlines():
        if line.startswith("x402_ap2_mandates_total{"):
            labels = dict(re.findall(r'(\w+)="([^"]*)"', line))
            if labels == {"tenant": tenant, "outcome": outcome, "code": code}:
                return float(line.rsplit(" ", 1)[1])
    return 0.0


async def test_a_payment_with_mandates_is_booked_told_and_kept_by_references_and_never_shown(
    books: Books, chain: DevChain, user_key: Any, debug_log: list[logging.LogRecord]
) -> None:
    now = int(time.time())
    payer_key = chain.new_payer()
    async with books.merchant.http() as http:
        wire = MerchantWire(http, "jsonrpc", "acme")
        task = (await wire.send(user_message()))["task"]
        checkout = checkout_of(task)
        [entry] = offered_terms(task).accepts
        assert checkout is not None and entry.extra is not None
        offer_id = entry.extra["offerId"]
        paid = sign_payment(payer_key, entry).to_json_dict()

        # Refused first (a surface acme does not trust), then paid with good mandates.
        stranger = issue_open_mandates(new_key("stranger"), new_key(), OpenTerms(), now=now)
        untrusted = present_mandates(stranger, checkout, paid, MERCHANT.id, offer_id, now=now)
        code, _, _ = await refused(http, "acme", with_mandates(payment_message(task["id"], paid), untrusted))
        assert code == Ap2ErrorCode.INVALID_CREDENTIAL
        opened = issue_open_mandates(user_key, new_key(), OpenTerms(), now=now)
        good = present_mandates(opened, checkout, paid, MERCHANT.id, offer_id, now=now)
        done = (await wire.send(with_mandates(payment_message(task["id"], paid), good)))["task"]
        assert done["status"]["state"] == "TASK_STATE_COMPLETED"
        receipts = status_receipts(done)
        assert receipts is not None
        # Replayed whole: nothing more is booked, counted as a use or kept.
        replay = with_mandates(payment_message(task["id"], paid), good)
        params = {"tenant": "acme", "message": replay}
        request = {"jsonrpc": "2.0", "id": 9, "method": "SendMessage", "params": params}
        replayed = (await http.post(JSONRPC_PATH, json=request)).json()
        assert replayed["error"]["code"] == -32004  # the task has ended

        # A payment of the default tenant, made without mandates.
        plain = MerchantWire(http, "jsonrpc", "")
        other = (await plain.send(user_message()))["task"]
        [terms] = offered_terms(other).accepts
        answer = await plain.send(payment_message(other["id"], sign_payment(chain.new_payer(), terms)))
        assert answer["task"]["status"]["state"] == "TASK_STATE_COMPLETED"

        await wait_until(lambda: len(books.receiver.received) >= 2, what="both settlement webhooks")
        booked = await rows(books.merchant.database_url, "ledger_entries")
        [acme_entry] = [row for row in booked if row.tenant == "acme"]
        # Another tenant's token shows nothing of acme's settlement.
        stranger_view = await http.get(
            f"/tenants/acme/dashboard/settlements/{acme_entry.id}",
            headers={"authorization": f"Bearer {books.tokens['']}"},
        )
        assert stranger_view.status_code == 401 and acme_entry.id not in stranger_view.text
        shown = {
            "statement": (await books.get(http, "acme", "/ledger/statement?format=json")).text,
            "statement.csv": (await books.get(http, "acme", "/ledger/statement?format=csv")).text,
            "overview": (await books.get(http, "acme", "/dashboard")).text,
            "settlement": (await books.get(http, "acme", f"/dashboard/settlements/{acme_entry.id}")).text,
            "settlements.csv": (await books.get(http, "acme", "/dashboard/settlements.csv")).text,
            "standalone": (await books.get(http, "", "/dashboard/settlements.csv")).text,
            "metrics": (await http.get("/metrics")).text,
        }

    expected = {
        "ap2_checkout_hash": ap2_digest(checkout),
        "ap2_payment_ref": mandate_reference(good.payment_mandate),
        "ap2_open_mandate": ap2_digest(opened.payment.split("~", 1)[0]),
    }
    [use] = await rows(books.merchant.database_url, "ap2_mandate_uses")
    assert (use.checkout_hash, use.reference, use.open_mandate) == tuple(expected.values())

    # The ledger: acme's entry names the mandates, the default tenant's nothing.
    entries = {row.tenant: row for row in await rows(books.merchant.database_url, "ledger_entries")}
    assert {name: getattr(entries["acme"], name) for name in expected} == expected
    assert all(getattr(entries[""], name) is None for name in expected)

    # The webhooks: acme's `settlement.completed` has them under `ap2`, the default tenant's no `ap2`.
    bodies = {json.loads(got.body)["data"]["tenant"]: json.loads(got.body) for got in books.receiver.received}
    assert all(got.verified for got in books.receiver.received)
    assert bodies["acme"]["type"] == "settlement.completed"
    assert bodies["acme"]["data"]["ap2"] == {
        "checkoutHash": expected["ap2_checkout_hash"],
        "paymentRef": expected["ap2_payment_ref"],
        "openMandate": expected["ap2_open_mandate"],
    }
    assert "ap2" not in bodies["default"]["data"]

    # The statement, the dashboard (shortened, whole on hover) and its CSV.
    [line] = json.loads(shown["statement"])["lines"]
    assert (line["ap2CheckoutHash"], line["ap2PaymentRef"], line["ap2OpenMandate"]) == tuple(
        expected.values()
    )
    assert all(value in shown["statement.csv"] for value in expected.values())
    for value in expected.values():
        assert f'title="{value}"' in shown["settlement"]
    [exported] = [dict(zip(*csv_rows, strict=True)) for csv_rows in [_csv(shown["settlements.csv"])]]
    assert {name: exported[name].lstrip("'") for name in expected} == expected
    [standalone] = [dict(zip(*csv_rows, strict=True)) for csv_rows in [_csv(shown["standalone"])]]
    assert all(standalone[name] == "" for name in expected)

    # The metric: one refusal (invalid_credential) and one acceptance, for acme.
    assert metric(shown["metrics"], "acme", "refused", "invalid_credential") == 1
    assert metric(shown["metrics"], "acme", "accepted", "") == 1

    # The evidence: the round's checkout and mandates as sent and the receipts that ended it, purged once past
    # the retention.
    engine = create_engine(books.merchant.database_url)
    try:
        store = Ap2EvidenceStore(engine, days=books.merchant.settings.ap2_evidence_days)
        kept = await store.evidence(task["id"], use.round)
        assert kept is not None and await store.evidence(other["id"], 1) is None
        assert (kept.checkout_jwt, kept.checkout_mandate, kept.payment_mandate) == (
            checkout,
            good.checkout_mandate,
            good.payment_mandate,
        )
        assert (kept.checkout_receipt, kept.payment_receipt) == receipts
        assert len(await rows(books.merchant.database_url, "ap2_evidence")) == 1  # none of the refused
        retention = timedelta(days=books.merchant.settings.ap2_evidence_days)
        assert await store.purge(now=kept.created_at + retention) == 0
        assert await store.purge(now=kept.created_at + retention + timedelta(seconds=1)) == 1
        assert await store.evidence(task["id"], use.round) is None
    finally:
        await engine.dispose()

    # Never shown: not in the DEBUG log (which did record the payment), a webhook, a page or an export.
    log = "\n".join(_written(record) for record in debug_log)
    assert "booked settlement" in log and any(r.levelno == logging.DEBUG for r in debug_log)
    secret = pieces([good, untrusted]) | {*receipts, *(receipt.rsplit(".", 1)[-1] for receipt in receipts)}
    outputs = {
        "log": log,
        "webhooks": " ".join(got.body.decode() for got in books.receiver.received),
        "stored events": " ".join(
            bytes(row.payload).decode() for row in await rows(books.merchant.database_url, "webhook_events")
        ),
        **shown,
    }
    for where, text in outputs.items():
        leaked = [piece[:12] for piece in secret if piece in text]
        assert not leaked, f"pieces of the mandates in the {where}: {leaked}"


def _csv(text: str) -> tuple[list[str], list[str]]:
    [header, row] = list(csv.reader(io.StringIO(text)))
    return header, row


def test_the_metric_keeps_its_labels_few() -> None:
    metrics = MerchantMetrics(CollectorRegistry())
    metrics.mandates("acme", "accepted", "")
    metrics.mandates("acme", "refused", "invalid_mandate")
    metrics.mandates("acme", "refused", "a code no one sent " + "x" * 500)
    metrics.mandates("acme", "maybe", "<script>")

    def count(outcome: str, code: str) -> float | None:
        labels = {"tenant": "acme", "outcome": outcome, "code": code}
        return metrics.registry.get_sample_value("x402_ap2_mandates_total", labels)

    assert (count("accepted", ""), count("refused", "invalid_mandate")) == (1, 1)
    assert (count("refused", "other"), count("other", "other")) == (1, 1)
    series = {
        tuple(sample.labels.values())
        for family in metrics.registry.collect()
        if family.name == "x402_ap2_mandates"
        for sample in family.samples
        if sample.name.endswith("_total")
    }
    assert len(series) == 4 and not any("script" in "".join(labels) for labels in series)

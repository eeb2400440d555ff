"""The JSON Schemas under `spec/schema/` and the wire contract (`a2a_x402.decode`) agree.

Each case starts from a valid extension object of the specification's examples and changes one thing;
the schema and the decoder must both accept it or both refuse it, except where JSON Schema cannot say
what the specification says (`_SCHEMA_LAX`): then the decoder refuses and the schema documents the rule.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from a2a_x402.extension import EXTENSION_URI, Dialect, ExtensionMetadataError, decode
from spec.build import SCHEMA_DIR

from .support import JSON, example, extension_object, messages, schema_errors, schema_names

_BASE_ID = "https://github.com/google-agentic-commerce/a2a-x402/blob/main/spec/v0.3/schema/"


def _value(example_name: str, status: str) -> JSON:
    for message in messages(example(example_name)):
        value = extension_object(message)
        if value is not None and value["status"] == status:
            return copy.deepcopy(value)
    raise LookupError(f"{example_name} has no {status} object")


def _required() -> JSON:
    return _value("payment-required.response.json", "payment-required")


def _submitted() -> JSON:
    return _value("payment-submitted.request.json", "payment-submitted")


def _pending() -> JSON:
    return _value("settlement-pending.response.json", "payment-verified")


def _completed() -> JSON:
    return _value("payment-completed.response.json", "payment-completed")


def _failed() -> JSON:
    return _value("settlement-failed.response.json", "payment-failed")


def _edit(base: Callable[[], JSON], change: Callable[[JSON], object]) -> JSON:
    value = base()
    change(value)
    return value


def _pending_receipt() -> JSON:
    receipt: JSON = _pending()["receipts"][0]
    return receipt


_REFUSED: dict[str, JSON] = {
    "unknown-member": _edit(_required, lambda v: v.update(note="hi")),
    "unknown-status": _edit(_required, lambda v: v.update(status="payment-pending")),
    "terminal-code-on-fresh-terms": _edit(_required, lambda v: v.update(error="INVALID_SIGNATURE")),
    "unknown-error-code": _edit(_failed, lambda v: v.update(error="TIMEOUT")),
    "x402-v1-terms": _edit(_required, lambda v: v["required"].update(x402Version=1)),
    "legacy-network": _edit(_required, lambda v: v["required"]["accepts"][0].update(network="base-sepolia")),
    "amount-as-number": _edit(_required, lambda v: v["required"]["accepts"][0].update(amount=250000)),
    "amount-with-leading-zero": _edit(
        _required, lambda v: v["required"]["accepts"][0].update(amount="0250000")
    ),
    "max-amount-required": _edit(
        _required, lambda v: v["required"]["accepts"][0].update(maxAmountRequired="1")
    ),
    "no-accepts": _edit(_required, lambda v: v["required"].update(accepts=[])),
    "payload-on-terms": _edit(_required, lambda v: v.update(payload=_submitted()["payload"])),
    "submitted-without-payload": _edit(_submitted, lambda v: v.pop("payload")),
    "short-nonce": _edit(_submitted, lambda v: v["payload"]["payload"]["authorization"].update(nonce="0x01")),
    "top-level-scheme": _edit(_submitted, lambda v: v["payload"].update(scheme="exact")),
    "bad-address": _edit(_submitted, lambda v: v["payload"]["payload"]["authorization"].update(to="0x1234")),
    "fractional-timeout": _edit(_submitted, lambda v: v["payload"]["accepted"].update(maxTimeoutSeconds=1.5)),
    "verified-with-empty-receipts": _edit(_pending, lambda v: v.update(receipts=[])),
    "verified-with-success": _edit(_pending, lambda v: v.update(receipts=_completed()["receipts"])),
    "pending-without-transaction": _edit(_pending, lambda v: v["receipts"][0].update(transaction="")),
    "completed-without-receipts": _edit(_completed, lambda v: v.update(receipts=[])),
    "completed-with-only-failure": _edit(_completed, lambda v: v.update(receipts=_failed()["receipts"])),
    "success-without-transaction": _edit(_completed, lambda v: v["receipts"][0].update(transaction="")),
    "failed-without-receipts": _edit(_failed, lambda v: v.pop("receipts")),
    "failed-without-error": _edit(_failed, lambda v: v.pop("error")),
    "failed-with-pending": _edit(_failed, lambda v: v.update(receipts=[_pending_receipt()])),
    "failed-with-success": _edit(_failed, lambda v: v.update(receipts=_completed()["receipts"])),
    "rejected-with-error": {"status": "payment-rejected", "error": "INSUFFICIENT_FUNDS"},
    "receipt-unknown-member": _edit(_completed, lambda v: v["receipts"][0].update(blockNumber=7)),
    "scheme-other-in-terms": _edit(
        _required, lambda v: v["required"]["accepts"][0].update(scheme="deferred")
    ),
    "scheme-other-in-payment": _edit(
        _submitted, lambda v: v["payload"]["accepted"].update(scheme="deferred")
    ),
    # §6.3: a pending receipt is replaced by its final one, and a task settles at most once; the schemas
    # say so by counting (no pending receipt beside a final one, at most one success).
    "completed-with-earlier-pending": _edit(
        _completed, lambda v: v["receipts"].insert(0, _pending_receipt())
    ),
    "completed-with-two-successes": _edit(_completed, lambda v: v["receipts"].insert(0, v["receipts"][0])),
    "failed-with-earlier-pending": _edit(_failed, lambda v: v["receipts"].insert(0, _pending_receipt())),
}

# The order of the receipt history (§6.3: oldest first, so a success or a pending attempt can only be the
# newest receipt). JSON Schema 2020-12 can constrain the first items of an array (`prefixItems`) and count
# matching items (`contains`), but it cannot address the last item of an array of any length, so these
# validate against the schemas (whose descriptions state the rule) and only the decoder refuses them.
_SCHEMA_LAX: dict[str, JSON] = {
    "completed-success-then-failure": _edit(
        _completed, lambda v: v["receipts"].append(_failed()["receipts"][0])
    ),
    "verified-pending-then-failure": _edit(
        _pending, lambda v: v["receipts"].append(_failed()["receipts"][0])
    ),
}

_ACCEPTED: dict[str, JSON] = {
    "fresh-terms-with-retryable-code": _edit(_required, lambda v: v.update(error="EXPIRED_PAYMENT")),
    # §11 rule 7: a merchant that stops offering fresh terms ends the task with the last failure's code.
    "failed-with-retryable-code": _edit(_failed, lambda v: v.update(error="INSUFFICIENT_FUNDS")),
    "integral-float-version": _edit(_required, lambda v: v["required"].update(x402Version=2.0)),
    "verified-without-receipts": {"status": "payment-verified"},
    "failed-with-no-attempt": _edit(_failed, lambda v: v.update(receipts=[])),
    "earlier-failure-then-success": _edit(
        _completed, lambda v: v["receipts"].insert(0, _failed()["receipts"][0])
    ),
    "receipt-with-extensions": _edit(
        _completed, lambda v: v["receipts"][0].update(extensions={"settlement": {"blockNumber": 7}})
    ),
    "lower-case-address": _edit(
        _submitted,
        lambda v: v["payload"]["payload"]["authorization"].update(
            to=v["payload"]["payload"]["authorization"]["to"].lower()
        ),
    ),
}


def _decodes(value: Any) -> bool:
    try:
        decode({EXTENSION_URI: value}, Dialect.V03)
    except ExtensionMetadataError:
        return False
    return True


@pytest.mark.parametrize("schema", schema_names())
def test_schema_is_valid_2020_12_with_its_own_id(schema: str) -> None:
    document = json.loads((SCHEMA_DIR / schema).read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(document)
    assert document["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert document["$id"] == _BASE_ID + schema


@pytest.mark.parametrize("value", _REFUSED.values(), ids=_REFUSED.keys())
def test_schema_refuses(value: JSON) -> None:
    assert schema_errors("extension-object.json", value) != []


@pytest.mark.parametrize("value", [*_REFUSED.values(), *_SCHEMA_LAX.values()], ids=[*_REFUSED, *_SCHEMA_LAX])
def test_decoder_refuses(value: JSON) -> None:
    assert not _decodes(value)


@pytest.mark.parametrize("value", _SCHEMA_LAX.values(), ids=_SCHEMA_LAX.keys())
def test_receipt_order_is_beyond_json_schema(value: JSON) -> None:
    # If a schema ever refuses one of these, move the case to _REFUSED.
    assert schema_errors("extension-object.json", value) == []


@pytest.mark.parametrize("value", _ACCEPTED.values(), ids=_ACCEPTED.keys())
def test_schema_and_decoder_both_accept(value: JSON) -> None:
    assert schema_errors("extension-object.json", value) == []
    assert _decodes(value)


def test_each_status_schema_accepts_only_its_status() -> None:
    values = [_required(), _submitted(), _pending(), _completed(), _failed(), {"status": "payment-rejected"}]
    for value in values:
        matching = [
            name
            for name in schema_names()
            if name.startswith("payment-") and schema_errors(name, value) == []
        ]
        assert matching == [f"{value['status']}.json"]


def test_card_params_schema_reads_a_pay_to_without_tenant_as_the_default_tenant() -> None:
    # §3: the default tenant's entry omits `tenant`; an entry must still name its address and network.
    [declaration] = example("agent-card.json")["capabilities"]["extensions"]
    params = declaration["params"]
    assert "tenant" not in params["payTo"][0]
    assert schema_errors("card-params.json", params) == []
    params["payTo"][0]["tenant"] = 7
    assert schema_errors("card-params.json", params) != []
    del params["payTo"][0]["tenant"]
    del params["payTo"][0]["network"]
    assert schema_errors("card-params.json", params) != []

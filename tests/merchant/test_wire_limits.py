"""The numbers a payer chooses (`validAfter`, `validBefore`, `value`) over their whole wire range, paid to
the reference merchant on SQLite and PostgreSQL: each payment completes the task, gets fresh terms or a
failed task naming why, or is refused as InvalidParams (a time past uint64, a value other than the price
offered) — never an internal error. The limits themselves (0, 2**63, the uint64 and uint256
maxima, just past them) always run, beside values drawn by Hypothesis; every payment is correctly signed
wherever the value can be signed at all."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from a2a.extensions.common import HTTP_EXTENSION_HEADER
from a2a.utils.constants import VERSION_HEADER
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from a2a_x402.devchain import DevChain
from a2a_x402.extension import (
    EXTENSION_URI,
    PaymentCompletedData,
    PaymentErrorCode,
    PaymentFailedData,
    PaymentRequiredData,
)
from a2a_x402.merchant.edge import JSONRPC_PATH
from a2a_x402.payer import sign_payment
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.merchant import (
    DEFAULT_PRICE,
    RunningMerchant,
    offered_terms,
    payment_data,
    payment_message,
    user_message,
)

UINT64_MAX = 2**64 - 1
UINT256_MAX = 2**256 - 1
# Within this many seconds of the wall clock's edge of the window, either answer is right.
CLOSE_S = 20
SETTLES = "settles"
# Refused as InvalidParams (-32602): not x402, or not what was offered for the task.
INVALID_PARAMS = "InvalidParams"

_SETTINGS = settings(
    max_examples=25,
    deadline=None,
    database=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)
_LIMITS = (0, 2**63 - 1, 2**63, UINT64_MAX, UINT64_MAX + 1, UINT256_MAX)
Expected = str | PaymentErrorCode | None


class _Shop:
    """Pays one task of the merchant per call, over A2A 1.0 JSON-RPC, with a fresh payer each time."""

    def __init__(self, merchant: RunningMerchant, new_payer: Callable[..., str]):
        self._merchant = merchant
        self._new_payer = new_payer
        self._ids = itertools.count(1)

    def _send(self, client: httpx.Client, message: dict[str, Any]) -> dict[str, Any]:
        """The task answered, or the JSON-RPC error object."""
        request = {"jsonrpc": "2.0", "id": next(self._ids), "method": "SendMessage"}
        response = client.post(JSONRPC_PATH, json={**request, "params": {"message": message}})
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        answer: dict[str, Any] = body["error"] if "error" in body else body["result"]["task"]
        return answer

    def pay(self, expected: Expected, **authorization: int) -> None:
        """Pay a new task with the authorization fields given (the others as a payer signs them)."""
        headers = {VERSION_HEADER: "1.0", HTTP_EXTENSION_HEADER: EXTENSION_URI}
        with httpx.Client(base_url=self._merchant.base_url, headers=headers, timeout=HANG_S) as client:
            task = self._send(client, user_message())
            assert "code" not in task, task
            terms = offered_terms(task).accepts[0]
            # A payload model holds no time past uint64: such a time replaces a signed one on the wire.
            wire_only = {
                name: number
                for name, number in authorization.items()
                if name != "value" and number > UINT64_MAX
            }
            now = int(time.time())
            signed = {
                "valid_after": now - 60,
                "valid_before": now + 120,
                **authorization,
                **dict.fromkeys(wire_only, 0),
            }
            if "value" in signed:
                terms = terms.model_copy(update={"amount": signed["value"]})
            payload = sign_payment(
                self._new_payer(),
                terms,
                valid_after=signed["valid_after"],
                valid_before=signed["valid_before"],
            ).to_json_dict()
            payload["accepted"]["amount"] = str(DEFAULT_PRICE)  # what was offered: only `value` differs
            for name, number in wire_only.items():
                payload["payload"]["authorization"][_camel(name)] = str(number)
            answer = self._send(client, payment_message(task["id"], payload))
        _check(answer, expected)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _check(task: dict[str, Any], expected: Expected) -> None:
    if "code" in task:  # a JSON-RPC error
        assert (expected, task["code"]) == (INVALID_PARAMS, -32602), task
        return
    assert expected != INVALID_PARAMS, task
    state, data = task["status"]["state"], payment_data(task)
    if expected == SETTLES:
        assert (state, type(data)) == ("TASK_STATE_COMPLETED", PaymentCompletedData), data
        return
    if state == "TASK_STATE_COMPLETED":
        assert expected is None, (expected, data)
        return
    assert isinstance(data, PaymentRequiredData | PaymentFailedData), data
    assert data.error is not None
    assert state == (
        "TASK_STATE_INPUT_REQUIRED" if isinstance(data, PaymentRequiredData) else "TASK_STATE_FAILED"
    )
    if isinstance(expected, PaymentErrorCode):
        assert data.error == expected, data


def _window(value: int, *, opens: bool) -> Expected:
    now = int(time.time())
    edge = now if opens else now + 6
    if value > UINT64_MAX:
        return INVALID_PARAMS
    if abs(value - edge) <= CLOSE_S:
        return None
    if (value < edge) if opens else (value > edge):
        return SETTLES
    # Spec v0.3 §7.5: a window closed or not yet open is EXPIRED_PAYMENT (retryable, fresh terms).
    return PaymentErrorCode.EXPIRED_PAYMENT


@pytest.mark.parametrize("name", ["valid_after", "valid_before"])
async def test_a_time_over_its_whole_range(
    name: str, merchant: RunningMerchant, chain: DevChain, new_payer: Callable[..., str]
) -> None:
    shop = _Shop(merchant, new_payer)

    @_SETTINGS
    @given(st.integers(0, UINT64_MAX) | st.integers(UINT64_MAX + 1, UINT256_MAX))
    def each(value: int) -> None:
        shop.pay(_window(value, opens=name == "valid_after"), **{name: value})

    for limit in _LIMITS:
        each = example(limit)(each)
    each()


async def test_value_over_its_whole_range(
    merchant: RunningMerchant, chain: DevChain, new_payer: Callable[..., str]
) -> None:
    shop = _Shop(merchant, new_payer)

    @_SETTINGS
    @given(st.integers(0, UINT256_MAX))
    @example(DEFAULT_PRICE)
    @example(0)
    @example(UINT64_MAX + 1)
    @example(UINT256_MAX)
    def each(value: int) -> None:
        shop.pay(SETTLES if value == DEFAULT_PRICE else INVALID_PARAMS, value=value)

    each()

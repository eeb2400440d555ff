"""Every numeric field of a verify or settle request over its whole wire range, through the HTTP service on
SQLite and PostgreSQL: each value is verified and settled, refused with its reason, or refused by the parser
as malformed (the parser's reasons) — never a 5xx. Each run tries the limits themselves (0, the uint64 and
uint256 maxima, just past them) and values drawn by Hypothesis across the range; requests are correctly
signed wherever the value can be signed at all."""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from typing import Any

import httpx
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from a2a_x402.devchain import DevChain
from a2a_x402.facilitator.wire import MAX_CHAIN_ID, Reason
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.facilitator import make_requirements

from .conftest import StartService
from .payments import sign_exact

UINT64_MAX = 2**64 - 1
UINT256_MAX = 2**256 - 1
MAX_TIMEOUT_S = 365 * 24 * 3600
# A fresh payer's balance (atomic units).
BALANCE = 1_000 * 10**6
SETTLES = "settles"
# Refused by the request parser: a number outside what its field's wire type allows.
MALFORMED = "malformed"
PARSER_REASONS = {
    Reason.INVALID_PAYLOAD.value,
    Reason.INVALID_PAYMENT_REQUIREMENTS.value,
    Reason.INVALID_X402_VERSION.value,
    Reason.INVALID_NETWORK.value,
}
# Within this many seconds of the wall clock's edge of the window, either answer is right.
CLOSE_S = 20

Body = dict[str, Any]
Expected = str | Reason | None

_SETTINGS = settings(
    max_examples=25,
    deadline=None,
    database=None,
    derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)


def _body(payload: Any, requirements: Any) -> Body:
    return {
        "x402Version": 2,
        "paymentPayload": payload.to_json_dict(),
        "paymentRequirements": requirements.to_json_dict(),
    }


def _with_terms(body: Body, name: str, value: object) -> Body:
    """`body` with the requirements' field `name` (and the payload's copy of them) set to `value`."""
    changed = copy.deepcopy(body)
    changed["paymentRequirements"][name] = value
    changed["paymentPayload"]["accepted"][name] = value
    return changed


def _with_authorization(body: Body, name: str, value: object) -> Body:
    changed = copy.deepcopy(body)
    changed["paymentPayload"]["payload"]["authorization"][name] = value
    return changed


def _window(value: int, *, opens: bool) -> Expected:
    """What a validAfter (`opens`) or validBefore of `value` gets, by the wall clock now."""
    now = int(time.time())
    edge = now if opens else now + 6
    if abs(value - edge) <= CLOSE_S:
        return None
    if opens:
        return SETTLES if value < edge else Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALID_AFTER
    return SETTLES if value > edge else Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALID_BEFORE


class _Case:
    """Builds the request for one field value and checks the service's two answers to it."""

    def __init__(self, chain: DevChain, base_url: str, new_payer: Callable[..., str]):
        self.chain = chain
        self.base_url = base_url
        self.new_payer = new_payer

    def signed(self, *, requirements: dict[str, Any] | None = None, **message: Any) -> Body:
        requirements_model = make_requirements(self.chain, **(requirements or {}))
        now = int(time.time())
        message = {"valid_after": now - 60, "valid_before": now + 120, **message}
        return _body(sign_exact(self.new_payer(), requirements_model, **message), requirements_model)

    def check(self, body: Body, expected: Expected) -> None:
        with httpx.Client(base_url=self.base_url, timeout=HANG_S) as client:
            verified = client.post("/verify", json=body)
            settled = client.post("/settle", json=body)
        assert (verified.status_code, settled.status_code) == (200, 200), (verified.text, settled.text)
        verify, settle = verified.json(), settled.json()
        assert settle["success"] is verify["isValid"], (verify, settle)
        if not verify["isValid"]:
            assert settle["errorReason"] == verify["invalidReason"]
            assert settle["transaction"] == ""
        if expected is MALFORMED:
            assert verify["isValid"] is False and verify["invalidReason"] in PARSER_REASONS, verify
        elif expected is SETTLES:
            assert settle["success"] is True, (verify, settle)
            assert len(settle["transaction"]) == 66
        elif isinstance(expected, Reason):
            assert (verify["isValid"], verify["invalidReason"]) == (False, expected.value), verify
        else:
            assert expected is None, (expected, verify, settle)


def _uint64(field_name: str, *, opens: bool) -> Callable[[_Case], None]:
    def run(case: _Case) -> None:
        @_SETTINGS
        @given(st.integers(0, UINT64_MAX) | st.integers(UINT64_MAX + 1, UINT256_MAX))
        @example(0)
        @example(2**63 - 1)
        @example(2**63)
        @example(UINT64_MAX)
        @example(UINT64_MAX + 1)
        @example(UINT256_MAX)
        def each(value: int) -> None:
            if value > UINT64_MAX:
                body = _with_authorization(case.signed(), field_name, str(value))
                case.check(body, MALFORMED)
            elif opens:
                case.check(case.signed(valid_after=value), _window(value, opens=True))
            else:
                case.check(case.signed(valid_before=value), _window(value, opens=False))

        each()

    return run


def _run_value(case: _Case) -> None:
    @_SETTINGS
    @given(st.integers(0, UINT256_MAX))
    @example(0)
    @example(UINT64_MAX + 1)
    @example(UINT256_MAX)
    @example(1_500_000)
    def each(value: int) -> None:
        expected = (
            SETTLES if value == 1_500_000 else Reason.INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALUE_MISMATCH
        )
        case.check(case.signed(value=value), expected)

    each()


def _run_amount(case: _Case) -> None:
    @_SETTINGS
    @given(st.integers(0, BALANCE) | st.integers(BALANCE + 1, UINT256_MAX))
    @example(0)
    @example(BALANCE)
    @example(BALANCE + 1)
    @example(UINT256_MAX)
    def each(value: int) -> None:
        expected: Expected = SETTLES if value <= BALANCE else Reason.INVALID_EXACT_EVM_INSUFFICIENT_BALANCE
        case.check(case.signed(requirements={"amount": value}), expected)

    each()


def _run_max_timeout(case: _Case) -> None:
    @_SETTINGS
    @given(st.integers(-(2**70), 2**70))
    @example(0)
    @example(1)
    @example(MAX_TIMEOUT_S)
    @example(MAX_TIMEOUT_S + 1)
    @example(UINT64_MAX)
    @example(UINT256_MAX)
    def each(value: int) -> None:
        if 1 <= value <= MAX_TIMEOUT_S:
            case.check(case.signed(requirements={"max_timeout_seconds": value}), SETTLES)
        else:
            case.check(_with_terms(case.signed(), "maxTimeoutSeconds", value), MALFORMED)

    each()


def _run_chain_id(case: _Case) -> None:
    @_SETTINGS
    @given(st.integers(0, MAX_CHAIN_ID) | st.integers(MAX_CHAIN_ID + 1, UINT256_MAX))
    @example(0)
    @example(1)
    @example(MAX_CHAIN_ID)
    @example(MAX_CHAIN_ID + 1)
    @example(2**63)
    @example(UINT256_MAX)
    def each(value: int) -> None:
        if value == case.chain.chain_id:
            case.check(case.signed(), SETTLES)
            return
        expected = Reason.INVALID_NETWORK if 1 <= value <= MAX_CHAIN_ID else MALFORMED
        case.check(_with_terms(case.signed(), "network", f"eip155:{value}"), expected)

    each()


def _run_x402_version(case: _Case) -> None:
    @_SETTINGS
    @given(st.integers(-(2**70), 2**70))
    @example(0)
    @example(1)
    @example(2)
    @example(UINT64_MAX)
    @example(UINT256_MAX)
    def each(value: int) -> None:
        body = case.signed()
        body["x402Version"] = value
        body["paymentPayload"]["x402Version"] = value
        case.check(body, SETTLES if value == 2 else MALFORMED)

    each()


async def test_valid_after_over_its_whole_range(
    database_url: str, chain: DevChain, start_service: StartService, new_payer: Callable[..., str]
) -> None:
    _uint64("validAfter", opens=True)(_Case(chain, start_service(database_url), new_payer))


async def test_valid_before_over_its_whole_range(
    database_url: str, chain: DevChain, start_service: StartService, new_payer: Callable[..., str]
) -> None:
    _uint64("validBefore", opens=False)(_Case(chain, start_service(database_url), new_payer))


async def test_value_over_its_whole_range(
    database_url: str, chain: DevChain, start_service: StartService, new_payer: Callable[..., str]
) -> None:
    _run_value(_Case(chain, start_service(database_url), new_payer))


async def test_amount_over_its_whole_range(
    database_url: str, chain: DevChain, start_service: StartService, new_payer: Callable[..., str]
) -> None:
    _run_amount(_Case(chain, start_service(database_url), new_payer))


async def test_max_timeout_seconds_over_its_whole_range(
    database_url: str, chain: DevChain, start_service: StartService, new_payer: Callable[..., str]
) -> None:
    _run_max_timeout(_Case(chain, start_service(database_url), new_payer))


async def test_chain_id_over_its_whole_range(
    database_url: str, chain: DevChain, start_service: StartService, new_payer: Callable[..., str]
) -> None:
    _run_chain_id(_Case(chain, start_service(database_url), new_payer))


async def test_x402_version_over_its_whole_range(
    database_url: str, chain: DevChain, start_service: StartService, new_payer: Callable[..., str]
) -> None:
    _run_x402_version(_Case(chain, start_service(database_url), new_payer))

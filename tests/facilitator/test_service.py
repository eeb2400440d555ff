"""The facilitator service in process: settlement moves the tokens exactly once, answers are stored and
repeated, idempotency keys bind to one payment, and the service refuses to start on the wrong chain."""

from __future__ import annotations

import ast
import asyncio
import logging
import selectors
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

import a2a_x402.facilitator as facilitator_package
from a2a_x402.devchain import DevChain
from a2a_x402.facilitator import (
    FOREIGN_SETTLEMENTS_COUNTED,
    ChainMismatchError,
    ClaimState,
    Facilitator,
    IdempotencyConflictError,
    InvalidIdempotencyKeyError,
)
from a2a_x402.facilitator._reverted import MAX_SETTLE_ATTEMPTS
from a2a_x402.facilitator.wire import (
    PaymentPayload,
    PaymentRequirements,
    Reason,
    ResourceInfo,
    SettleResponse,
)
from a2a_x402.payer import sign_payment
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.facilitator import PAY_TO, make_requirements

from .conftest import OpenFacilitator
from .payments import (
    accept_again,
    claim_rows,
    deploy_gas_burning_wallet,
    relayer_address,
    relayer_nonce,
    settle_while_the_wallet_refuses,
    sign_exact,
    submit_directly,
    transfer_logs_of,
    tx_count,
)

# A stand-in for a token whose code changed under the facilitator (an upgraded proxy): it answers
# balanceOf (36 bytes of calldata) with 2**256-1 and every other call, transferWithAuthorization included,
# with a zero word, so every check passes and the "transfer" succeeds without moving anything.
SILENT_TOKEN_CODE = "0x36602414600c5760206000f35b7f" + "ff" * 32 + "60005260206000f3"
# Both claim stores on DevUSDC, and Circle's FiatToken v2.2 on one (the store does not depend on the token).
_STORES_AND_TOKENS = pytest.mark.parametrize(
    ("database_url", "chain"),
    [
        pytest.param("sqlite", "DevUSDC", id="sqlite"),
        pytest.param("postgres", "DevUSDC", id="postgres", marks=pytest.mark.postgres),
        pytest.param("sqlite", "FiatTokenV2_2", id="sqlite-FiatTokenV2_2"),
    ],
    indirect=True,
)


@_STORES_AND_TOKENS
async def test_settle_moves_the_tokens_and_records_success(
    database_url: str, chain: DevChain, open_facilitator: OpenFacilitator, new_payer: Callable[..., str]
) -> None:
    service = await open_facilitator(database_url)
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)
    payer = payload.payload.authorization.from_address
    payer_before, payee_before, nonce_before = (
        chain.balance_of(payer),
        chain.balance_of(PAY_TO),
        relayer_nonce(chain),
    )

    answer = await service.settle(payload, requirements)

    assert (answer.success, answer.error_reason, answer.payer, answer.network) == (
        True,
        None,
        payer,
        chain.network,
    )
    assert answer.amount == requirements.amount
    receipt = chain.rpc.call("eth_getTransactionReceipt", [answer.transaction])
    assert int(receipt["status"], 16) == 1
    assert transfer_logs_of(chain, answer.transaction) == [
        (chain.asset.lower(), payer.lower(), PAY_TO.lower(), requirements.amount)
    ]
    assert chain.balance_of(payer) == payer_before - requirements.amount
    assert chain.balance_of(PAY_TO) == payee_before + requirements.amount
    assert relayer_nonce(chain) == nonce_before + 1
    [row] = await claim_rows(database_url)
    assert (row["state"], row["tx_hash"], row["block_number"]) == (
        ClaimState.SUCCEEDED,
        answer.transaction,
        int(receipt["blockNumber"], 16),
    )
    assert SettleResponse.from_wire(row["response"]) == answer


@_STORES_AND_TOKENS
async def test_a_second_settle_without_key_is_refused_naming_the_original_transaction(
    database_url: str, chain: DevChain, open_facilitator: OpenFacilitator, new_payer: Callable[..., str]
) -> None:
    service = await open_facilitator(database_url)
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)
    first = await service.settle(payload, requirements)
    payee_after_first = chain.balance_of(PAY_TO)

    second = await service.settle(payload, requirements)

    assert first.success
    assert (second.success, second.error_reason, second.transaction) == (
        False,
        Reason.DUPLICATE_SETTLEMENT,
        "",
    )
    assert second.extensions == {
        "originalSettlement": {"state": "succeeded", "transaction": first.transaction}
    }
    assert chain.balance_of(PAY_TO) == payee_after_first


async def test_the_same_idempotency_key_gets_the_same_answer(
    database_url: str, chain: DevChain, open_facilitator: OpenFacilitator, new_payer: Callable[..., str]
) -> None:
    service = await open_facilitator(database_url)
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)
    nonce_before = relayer_nonce(chain)

    answers = [await service.settle(payload, requirements, idempotency_key="order-7") for _ in range(3)]

    assert answers[0].success
    assert {a.model_dump_json() for a in answers} == {answers[0].model_dump_json()}
    assert relayer_nonce(chain) == nonce_before + 1


async def test_an_idempotency_key_is_bound_to_one_payment(
    database_url: str, chain: DevChain, open_facilitator: OpenFacilitator, new_payer: Callable[..., str]
) -> None:
    service = await open_facilitator(database_url)
    requirements = make_requirements(chain)
    key = new_payer()
    payload = sign_payment(key, requirements)
    other_authorization = sign_payment(key, requirements)
    same_authorization_other_resource = payload.model_copy(
        update={"resource": ResourceInfo(url="https://merchant.example/other")}
    )
    await service.settle(payload, requirements, idempotency_key="order-8")
    nonce_after_first = relayer_nonce(chain)

    for different in (other_authorization, same_authorization_other_resource):
        with pytest.raises(IdempotencyConflictError):
            await service.settle(different, requirements, idempotency_key="order-8")

    assert relayer_nonce(chain) == nonce_after_first
    assert len(await claim_rows(database_url)) == 1


async def test_the_payment_identifier_extension_is_the_idempotency_key(
    database_url: str, chain: DevChain, open_facilitator: OpenFacilitator, new_payer: Callable[..., str]
) -> None:
    service = await open_facilitator(database_url)
    requirements = make_requirements(chain)
    key = new_payer()
    extensions = {"payment-identifier": {"info": {"id": "pay_0123456789abcdef"}}}
    payload = sign_exact(key, requirements, extensions=extensions)

    first = await service.settle(payload, requirements)
    again = await service.settle(payload, requirements)
    with pytest.raises(IdempotencyConflictError):
        await service.settle(sign_exact(key, requirements, extensions=extensions), requirements)

    assert first.success
    assert again.model_dump_json() == first.model_dump_json()
    [row] = await claim_rows(database_url)
    assert row["idempotency_key"] == "payment-identifier:pay_0123456789abcdef"


@pytest.mark.parametrize("key", ["", "has space", "x" * 256, "non-ascii-ü"])
async def test_a_malformed_idempotency_key_is_refused_before_anything_happens(
    key: str, chain: DevChain, facilitator: Facilitator, new_payer: Callable[..., str], sqlite_url: str
) -> None:
    requirements = make_requirements(chain)

    with pytest.raises(InvalidIdempotencyKeyError):
        await facilitator.settle(sign_payment(new_payer(), requirements), requirements, idempotency_key=key)

    assert await claim_rows(sqlite_url) == []


@_STORES_AND_TOKENS
async def test_fifty_concurrent_settles_of_one_authorization_make_one_transaction(
    database_url: str, chain: DevChain, open_facilitator: OpenFacilitator, new_payer: Callable[..., str]
) -> None:
    # Fifty settles at once on a loaded machine may queue past the default budget, and a winner still
    # waiting for its receipt then answers settlement_pending (tested elsewhere): a budget no queue reaches.
    service = await open_facilitator(database_url, receipt_timeout_s=HANG_S)
    requirements = make_requirements(chain)
    payload = sign_payment(new_payer(), requirements)
    nonce_before, payee_before = relayer_nonce(chain), chain.balance_of(PAY_TO)

    answers = await asyncio.gather(*(service.settle(payload, requirements) for _ in range(50)))

    [winner] = [a for a in answers if a.success]
    duplicates = [a for a in answers if not a.success]
    assert len(duplicates) == 49
    assert {(a.error_reason, a.transaction) for a in duplicates} == {(Reason.DUPLICATE_SETTLEMENT, "")}
    # Every refusal names the transaction, even those that arrived before it was broadcast.
    assert {(a.extensions or {})["originalSettlement"]["transaction"] for a in duplicates} == {
        winner.transaction
    }
    assert relayer_nonce(chain) == nonce_before + 1
    assert chain.balance_of(PAY_TO) == payee_before + requirements.amount


async def test_a_retry_after_the_authorization_expired_still_gets_the_first_answer(
    chain: DevChain, open_facilitator: OpenFacilitator, new_payer: Callable[..., str], sqlite_url: str
) -> None:
    service = await open_facilitator(sqlite_url, validity_margin_s=0)
    requirements = make_requirements(chain)
    valid_before = int(time.time()) + 2
    payload = sign_payment(new_payer(), requirements, valid_before=valid_before)
    first = await service.settle(payload, requirements, idempotency_key="late-retry")

    await asyncio.sleep(valid_before - time.time() + 0.1)
    again = await service.settle(payload, requirements, idempotency_key="late-retry")
    without_key = await service.settle(payload, requirements)

    assert first.success
    assert again == first
    assert without_key.error_reason == Reason.DUPLICATE_SETTLEMENT


async def test_success_needs_a_transfer_log_not_just_a_mined_transaction(
    chain: DevChain, facilitator: Facilitator, new_payer: Callable[..., str], sqlite_url: str
) -> None:
    requirements = make_requirements(chain)
    key = new_payer()
    assert (await facilitator.verify(sign_payment(key, requirements), requirements)).is_valid
    chain.rpc.call("anvil_setCode", [chain.asset, SILENT_TOKEN_CODE])

    answer = await facilitator.settle(sign_payment(key, requirements), requirements)

    assert (answer.success, answer.error_reason) == (False, Reason.INVALID_EXACT_EVM_TRANSFER_EVENT_MISMATCH)
    receipt = chain.rpc.call("eth_getTransactionReceipt", [answer.transaction])
    assert (int(receipt["status"], 16), receipt["logs"]) == (1, [])
    [row] = await claim_rows(sqlite_url)
    assert (row["state"], row["error_reason"]) == (
        ClaimState.FAILED,
        Reason.INVALID_EXACT_EVM_TRANSFER_EVENT_MISMATCH,
    )


async def wallet_payment(
    database_url: str, chain: DevChain, open_facilitator: OpenFacilitator, **changes: Any
) -> tuple[Facilitator, str, PaymentRequirements, PaymentPayload]:
    """A facilitator (settings `changes` applied), a gas-burning ERC-1271 wallet
    (`settle_while_the_wallet_refuses`), and its payment.

    The payer does not cool off after a revert here (`X402_REVERT_COOLOFF_S=0`) unless `changes` say so:
    these tests are about the authorization's own retries; `test_reverts` covers the cool-off."""
    settings: dict[str, Any] = {"revert_cooloff_s": 0, **changes}
    service = await open_facilitator(database_url, receipt_timeout_s=5.0, **settings)
    wallet, owner_key = deploy_gas_burning_wallet(chain, cold_reads=1)
    requirements = make_requirements(chain)
    return service, wallet, requirements, sign_exact(owner_key, requirements, from_address=wallet)


async def test_a_settlement_reverted_without_using_the_authorization_can_be_settled_again(
    database_url: str, chain: DevChain, open_facilitator: OpenFacilitator
) -> None:
    service, wallet, requirements, payload = await wallet_payment(database_url, chain, open_facilitator)
    nonce = bytes.fromhex(payload.payload.authorization.nonce[2:])
    wallet_before, payee_before = chain.balance_of(wallet), chain.balance_of(PAY_TO)

    reverted = await settle_while_the_wallet_refuses(
        chain, service, wallet, payload, requirements, idempotency_key="reverted-1"
    )

    assert (reverted.success, reverted.error_reason) == (False, Reason.TRANSACTION_FAILED)
    receipt = chain.rpc.call("eth_getTransactionReceipt", [reverted.transaction])
    assert int(receipt["status"], 16) == 0
    assert chain.authorization_state(wallet, nonce) is False
    [row] = await claim_rows(database_url)
    assert row["state"] == ClaimState.RELEASED
    # The wallet accepts its owner again: the same authorization settles, once.
    accept_again(chain, wallet)
    again = await service.settle(payload, requirements, idempotency_key="reverted-1")
    other = await service.settle(payload, requirements)
    assert again.success, again
    assert again.transaction != reverted.transaction
    assert (other.success, other.error_reason) == (False, Reason.DUPLICATE_SETTLEMENT)
    assert chain.balance_of(wallet) == wallet_before - requirements.amount
    assert chain.balance_of(PAY_TO) == payee_before + requirements.amount
    [row] = await claim_rows(database_url)
    assert (row["state"], row["tx_hash"]) == (ClaimState.SUCCEEDED, again.transaction)


async def test_an_authorization_whose_settlements_keep_reverting_fails_for_good_after_the_last_attempt(
    database_url: str, chain: DevChain, open_facilitator: OpenFacilitator
) -> None:
    """A wallet that passes simulation and reverts on chain costs the relayer gas at most a few times."""
    service, wallet, requirements, payload = await wallet_payment(database_url, chain, open_facilitator)
    nonce_before = relayer_nonce(chain)

    states = []
    for _ in range(MAX_SETTLE_ATTEMPTS):
        reverted = await settle_while_the_wallet_refuses(
            chain, service, wallet, payload, requirements, idempotency_key="keeps-reverting"
        )
        assert (reverted.success, reverted.error_reason) == (False, Reason.TRANSACTION_FAILED)
        [row] = await claim_rows(database_url)
        states.append(row["state"])
        accept_again(chain, wallet)

    assert states == [ClaimState.RELEASED] * (MAX_SETTLE_ATTEMPTS - 1) + [ClaimState.FAILED]
    assert relayer_nonce(chain) == nonce_before + MAX_SETTLE_ATTEMPTS
    # The wallet would accept now, but the claim is spent: no further transaction is sent.
    again = await service.settle(payload, requirements, idempotency_key="keeps-reverting")
    assert again == reverted
    assert relayer_nonce(chain) == nonce_before + MAX_SETTLE_ATTEMPTS
    assert chain.authorization_state(wallet, bytes.fromhex(payload.payload.authorization.nonce[2:])) is False


TRANSFER_TOPIC = "ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"


def misreporting_token_code(recipient: str, value: str) -> str:
    """EVM code of a "token" that, like SILENT_TOKEN_CODE, answers balanceOf with 2**256-1 and every other
    call with a zero word, and also logs a Transfer from the authorization's `from`, whose `to` and value
    are computed by the EVM snippets given (the calldata's own, or something else)."""
    log_and_return = (
        value
        + "600052"  # mstore(0, value)
        + recipient
        + "600435"  # topic2 = to, topic1 = calldataload(4): the authorization's `from`
        + "7f"
        + TRANSFER_TOPIC
        + "60206000a3"  # log3(0, 32, Transfer, from, to)
        + "600060005260206000f3"  # return a zero word
    )
    balance_of_at = 7 + len(log_and_return) // 2  # after the 7-byte size test and the logging branch
    size_test = "36602414" + "60" + f"{balance_of_at:02x}" + "57"  # 36 bytes of calldata: balanceOf
    balance_of = "5b7f" + "ff" * 32 + "60005260206000f3"
    return "0x" + size_test + log_and_return + balance_of


CALLDATA_TO, CALLDATA_VALUE = "602435", "604435"  # calldataload(36), calldataload(68)
MISREPORTED = {
    "wrong value": misreporting_token_code(CALLDATA_TO, CALLDATA_VALUE + "600190" + "03"),  # value - 1
    "wrong to": misreporting_token_code("33", CALLDATA_VALUE),  # to = the caller (the relayer)
}


@pytest.mark.parametrize("mismatch", MISREPORTED.keys())
async def test_success_needs_the_transfer_log_to_match_the_payment(
    mismatch: str, chain: DevChain, facilitator: Facilitator, new_payer: Callable[..., str], sqlite_url: str
) -> None:
    requirements = make_requirements(chain)
    key = new_payer()
    payer = sign_payment(key, requirements).payload.authorization.from_address
    assert (await facilitator.verify(sign_payment(key, requirements), requirements)).is_valid
    chain.rpc.call("anvil_setCode", [chain.asset, MISREPORTED[mismatch]])

    answer = await facilitator.settle(sign_payment(key, requirements), requirements)

    assert (answer.success, answer.error_reason) == (False, Reason.INVALID_EXACT_EVM_TRANSFER_EVENT_MISMATCH)
    [(token, sender, recipient, value)] = transfer_logs_of(chain, answer.transaction)
    assert (token, sender) == (chain.asset.lower(), payer.lower())
    if mismatch == "wrong value":
        assert (recipient, value) == (PAY_TO.lower(), requirements.amount - 1)
    else:
        assert (recipient, value) == (relayer_address(chain).lower(), requirements.amount)
    [row] = await claim_rows(sqlite_url)
    assert (row["state"], row["error_reason"]) == (
        ClaimState.FAILED,
        Reason.INVALID_EXACT_EVM_TRANSFER_EVENT_MISMATCH,
    )


async def test_settlements_are_eip1559_transactions_within_the_gas_cap(
    sqlite_url: str, chain: DevChain, open_facilitator: OpenFacilitator, new_payer: Callable[..., str]
) -> None:
    cap = 100_000
    service = await open_facilitator(sqlite_url, gas_limit_cap=cap)
    requirements = make_requirements(chain)

    answers = [await service.settle(sign_payment(new_payer(), requirements), requirements) for _ in range(2)]

    for answer in answers:
        assert answer.success, answer
        sent = chain.rpc.call("eth_getTransactionByHash", [answer.transaction])
        receipt = chain.rpc.call("eth_getTransactionReceipt", [answer.transaction])
        assert (sent["type"], sent["to"], sent["from"]) == (
            "0x2",
            chain.asset.lower(),
            relayer_address(chain).lower(),
        )
        assert int(receipt["gasUsed"], 16) <= int(sent["gas"], 16) <= cap
        assert int(sent["maxPriorityFeePerGas"], 16) <= int(sent["maxFeePerGas"], 16)


@pytest.mark.parametrize("count_foreign", [True, False], ids=["foreign-counted", "foreign-refused"])
async def test_a_released_authorization_someone_else_then_settled_is_recorded_as_their_settlement(
    count_foreign: bool, database_url: str, chain: DevChain, open_facilitator: OpenFacilitator
) -> None:
    """Our transaction reverted and made the authorization public; another party's then paid the payee.
    Theirs counts only where foreign settlements count; otherwise the settle is refused naming it."""
    service, wallet, requirements, payload = await wallet_payment(
        database_url, chain, open_facilitator, count_foreign_settlements=count_foreign
    )
    payee_before = chain.balance_of(PAY_TO)
    reverted = await settle_while_the_wallet_refuses(
        chain, service, wallet, payload, requirements, idempotency_key="reverted-2"
    )
    assert reverted.error_reason == Reason.TRANSACTION_FAILED
    accept_again(chain, wallet)
    submit_directly(chain, payload)
    [theirs] = chain.rpc.call("eth_getBlockByNumber", ["latest", False])["transactions"]
    relayer_before = tx_count(chain, relayer_address(chain))

    settled = await service.settle(payload, requirements, idempotency_key="reverted-2")

    assert tx_count(chain, relayer_address(chain)) == relayer_before
    assert chain.balance_of(PAY_TO) == payee_before + requirements.amount
    [row] = await claim_rows(database_url)
    if count_foreign:
        assert (settled.success, settled.transaction) == (True, theirs)
        assert (row["state"], row["tx_hash"], row["attempt"]) == (ClaimState.SUCCEEDED, theirs, 2)
        return
    assert (settled.success, settled.error_reason) == (False, Reason.INVALID_EXACT_EVM_NONCE_ALREADY_USED)
    assert settled.extensions is not None
    assert settled.extensions["settledElsewhere"]["transaction"] == theirs
    assert row["state"] == ClaimState.RELEASED  # nothing of ours is in flight; it never becomes a success
    again = await service.settle(payload, requirements, idempotency_key="reverted-2")
    assert (again.success, again.error_reason) == (False, Reason.INVALID_EXACT_EVM_NONCE_ALREADY_USED)


@pytest.mark.parametrize("count_foreign", [True, False], ids=["counted", "refused"])
async def test_open_warns_in_one_line_only_while_foreign_settlements_count(
    count_foreign: bool,
    sqlite_url: str,
    open_facilitator: OpenFacilitator,
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="a2a_x402.facilitator"):
        await open_facilitator(sqlite_url, count_foreign_settlements=count_foreign)

    warned = [r.getMessage() for r in caplog.records if "X402_COUNT_FOREIGN_SETTLEMENTS" in r.getMessage()]
    assert warned == ([FOREIGN_SETTLEMENTS_COUNTED] if count_foreign else [])
    assert all("\n" not in line for line in warned)


async def test_open_refuses_a_node_serving_another_chain(
    chain: DevChain, settings_for: Callable[..., Any], sqlite_url: str
) -> None:
    with pytest.raises(
        ChainMismatchError, match=f"serves chain {chain.chain_id}, but X402_NETWORK is eip155:1"
    ):
        await Facilitator.open(settings_for(sqlite_url, network="eip155:1"))


async def test_supported_names_the_network_and_the_relayer(chain: DevChain, facilitator: Facilitator) -> None:
    supported = facilitator.supported()

    # The dev chain has Permit2 and both x402 proxies: `exact` by either method, and `upto`.
    assert [(k.x402_version, k.scheme, k.network) for k in supported.kinds] == [
        (2, "exact", chain.network),
        (2, "upto", chain.network),
        (1, "exact", "base-sepolia"),
    ]
    assert supported.signers == {"eip155:*": (facilitator.relayer_address,)}
    assert supported.extensions == ("payment-identifier", "eip2612GasSponsoring")


# What a call that waits on the calling thread is named, when Python code calls it.
_WAITING_CALLS = {"sleep", "recv", "recv_into", "recvfrom", "send", "sendall", "sendto", "connect", "accept"}
_WAITING_CALLS |= {"select", "poll", "getaddrinfo", "gethostbyname", "gethostbyaddr"}


@contextmanager
def waiting_calls_on_this_thread() -> Iterator[list[str]]:
    """Collect every call made on this thread, while the block runs, that waits (sleeps, blocking socket
    I/O, name lookups), except the event loop's own wait for I/O and the loop's non-blocking socket calls.

    On the event loop's thread each of them stalls every other task for as long as it waits.
    """
    found: list[str] = []

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event != "c_call" or getattr(arg, "__name__", "") not in _WAITING_CALLS:
            return
        owner = getattr(arg, "__self__", None)
        if isinstance(owner, socket.socket) and not owner.getblocking():
            return  # asyncio's transports: the call returns at once
        if frame.f_code.co_filename == selectors.__file__:
            return  # the event loop waiting for I/O, which is what it is for
        where = f"{Path(frame.f_code.co_filename).name}:{frame.f_lineno}"
        found.append(f"{type(owner).__name__}.{getattr(arg, '__name__', '')} at {where}")

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield found
    finally:
        sys.setprofile(previous)


def test_the_watch_for_waiting_calls_sees_those_of_its_thread_only() -> None:
    other = threading.Thread(target=time.sleep, args=(0,))
    with waiting_calls_on_this_thread() as seen:
        time.sleep(0)
        other.start()
        other.join()
    assert len(seen) == 1 and seen[0].startswith("module.sleep at test_service.py")


async def test_settling_keeps_the_event_loop_responsive(
    chain: DevChain, facilitator: Facilitator, new_payer: Callable[..., str]
) -> None:
    requirements = make_requirements(chain)
    payloads = [sign_payment(new_payer(), requirements) for _ in range(3)]
    # One-second blocks: the settlements wait for their receipts, which must not hold the loop.
    chain.rpc.call("evm_setIntervalMining", [1])
    started = time.monotonic()
    with waiting_calls_on_this_thread() as waited:
        answers = await asyncio.gather(*(facilitator.settle(p, requirements) for p in payloads))
    elapsed = time.monotonic() - started

    assert all(a.success for a in answers)
    assert elapsed > 0.2  # the settlements really waited for a block
    assert waited == []  # none of it waited on the event loop's thread


BLOCKING_CALLS = {("time", "sleep"), ("httpx", "Client"), ("requests", "get"), ("requests", "post")}
BLOCKING_IMPORTS = {"requests", "urllib.request", "subprocess"}


def test_facilitator_code_makes_no_blocking_calls() -> None:
    sources = sorted(Path(facilitator_package.__file__).parent.glob("*.py"))
    found = []
    for source in sources:
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                if (node.value.id, node.attr) in BLOCKING_CALLS:
                    found.append(f"{source.name}: {node.value.id}.{node.attr}")
            elif isinstance(node, ast.Import | ast.ImportFrom):
                names = [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                found += [f"{source.name}: import {n}" for n in names if n in BLOCKING_IMPORTS]

    assert len(sources) > 10
    assert found == []

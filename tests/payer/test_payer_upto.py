"""`Payer` against the reference merchant metering its skill (`upto` terms, merged from branch meter): paid
within the policy's caps for what the work used of the maximum, the usage reported; refused before signing,
and the task declined, without a cap per task or once the day's cap is reached across tasks (and, counted in
a file, across payers and a restart)."""

from __future__ import annotations

from pathlib import Path

import pytest
from a2a.types import TaskState
from eth_account import Account

from a2a_x402.devchain import DevChain
from a2a_x402.extension import PaymentUsage, UsageItem
from a2a_x402.payer import AmountOverLimitError, ChainError, NoAcceptableTermsError, Payer, PaymentPolicy
from tests.devchain.permit2_sdk import permit2_payer
from tests.fixtures.merchant import DEFAULT_PAY_TO, MerchantStarter, RunningMerchant
from tests.merchant.payments.test_metered_settlement import MAXIMUM, MeteredExecutor, Report, metered_merchant

from .conftest import TEXT
from .test_payer import task_state

pytestmark = pytest.mark.timeout(120)

REPORTS: tuple[Report, ...] = (("tokens", 1200, 25), ("calls", 3, 1000))
USED = 1200 * 25 + 3 * 1000


@pytest.fixture
def metered(start_merchant: MerchantStarter, sqlite_url: str, tmp_path: Path) -> RunningMerchant:
    return metered_merchant(start_merchant, sqlite_url, tmp_path, MeteredExecutor(REPORTS), grpc_port=None)


def _payer(chain: DevChain) -> str:
    return permit2_payer(chain, chain.asset, 10 * MAXIMUM)


async def test_an_upto_task_is_paid_what_it_used_within_the_caps(
    metered: RunningMerchant, chain: DevChain
) -> None:
    key = _payer(chain)
    payer_address = Account.from_key(key).address
    before = chain.balance_of(payer_address), chain.balance_of(DEFAULT_PAY_TO)
    policy = PaymentPolicy(upto_max_per_task_atomic=MAXIMUM, upto_max_per_day_atomic=MAXIMUM)

    async with await Payer.connect(metered.base_url, key, policy=policy, rpc_urls=chain.rpc_url) as payer:
        result = await payer.pay(TEXT)

    assert result.state == TaskState.TASK_STATE_COMPLETED
    assert result.paid is not None and (result.paid.scheme, result.paid.amount) == ("upto", MAXIMUM)
    assert result.settled == USED
    assert result.usage == PaymentUsage(
        maximum=MAXIMUM,
        settled=USED,
        items=(UsageItem("tokens", 1200, 25, 30_000), UsageItem("calls", 3, 1000, 3_000)),
    )
    assert chain.rpc.call("eth_getTransactionReceipt", [result.transaction])["status"] == "0x1"
    assert (chain.balance_of(payer_address), chain.balance_of(DEFAULT_PAY_TO)) == (
        before[0] - USED,
        before[1] + USED,
    )
    assert policy.upto_spent_today(chain.network, chain.asset) == MAXIMUM  # the maximum counts, not the use


async def test_upto_terms_without_a_cap_per_task_are_declined_before_signing(
    metered: RunningMerchant, chain: DevChain
) -> None:
    async with await Payer.connect(metered.base_url, _payer(chain), rpc_urls=chain.rpc_url) as payer:
        with pytest.raises(NoAcceptableTermsError, match="without a cap per task") as refused:
            await payer.pay(TEXT)

    assert refused.value.signed is False
    assert await task_state(metered.base_url, str(refused.value.task_id)) == "TASK_STATE_CANCELED"


async def test_the_days_cap_is_reached_across_tasks(metered: RunningMerchant, chain: DevChain) -> None:
    key = _payer(chain)
    payer_address = Account.from_key(key).address
    policy = PaymentPolicy(upto_max_per_task_atomic=MAXIMUM, upto_max_per_day_atomic=MAXIMUM + MAXIMUM // 2)

    async with await Payer.connect(metered.base_url, key, policy=policy, rpc_urls=chain.rpc_url) as payer:
        first = await payer.pay(TEXT)
        after_first = chain.balance_of(payer_address)
        with pytest.raises(AmountOverLimitError, match="cap per day") as refused:
            await payer.pay(TEXT)

    assert first.settled == USED
    assert "0.5 USDC (500000 atomic units) authorized today" in str(refused.value)
    assert refused.value.signed is False
    assert chain.balance_of(payer_address) == after_first
    assert await task_state(metered.base_url, str(refused.value.task_id)) == "TASK_STATE_CANCELED"


async def test_an_upto_task_that_used_nothing_completes_without_a_transaction(
    start_merchant: MerchantStarter, sqlite_url: str, tmp_path: Path, chain: DevChain
) -> None:
    idle = metered_merchant(start_merchant, sqlite_url, tmp_path, MeteredExecutor(()), grpc_port=None)
    key = _payer(chain)
    held = chain.balance_of(Account.from_key(key).address)
    policy = PaymentPolicy(upto_max_per_task_atomic=MAXIMUM)

    async with await Payer.connect(idle.base_url, key, policy=policy, rpc_urls=chain.rpc_url) as payer:
        result = await payer.pay(TEXT)

    assert (result.state, result.settled, result.transaction) == (TaskState.TASK_STATE_COMPLETED, 0, None)
    assert result.usage == PaymentUsage(maximum=MAXIMUM, settled=0)
    assert chain.balance_of(Account.from_key(key).address) == held


async def test_a_maximum_never_signed_does_not_count_against_the_day(
    metered: RunningMerchant, chain: DevChain
) -> None:
    policy = PaymentPolicy(upto_max_per_task_atomic=MAXIMUM, upto_max_per_day_atomic=MAXIMUM)

    async with await Payer.connect(metered.base_url, _payer(chain), policy=policy) as payer:
        with pytest.raises(ChainError, match="no RPC URL") as refused:  # the allowance cannot be read
            await payer.pay(TEXT)

    assert refused.value.signed is False
    assert policy.upto_spent_today(chain.network, chain.asset) == 0


async def test_the_days_cap_in_a_file_is_shared_by_payers_and_survives_a_restart(
    metered: RunningMerchant, chain: DevChain, tmp_path: Path
) -> None:
    days = tmp_path / "upto-days.sqlite"
    cap = MAXIMUM + MAXIMUM // 2

    def policy() -> PaymentPolicy:  # each call stands for a new process naming the file
        return PaymentPolicy(
            upto_max_per_task_atomic=MAXIMUM, upto_max_per_day_atomic=cap, upto_days_file=days
        )

    key = _payer(chain)
    first_policy = policy()
    url, rpc = metered.base_url, chain.rpc_url
    async with await Payer.connect(url, key, policy=first_policy, rpc_urls=rpc) as first:
        paid = await first.pay(TEXT)
    async with await Payer.connect(url, key, policy=policy(), rpc_urls=rpc) as second:
        with pytest.raises(AmountOverLimitError, match="cap per day") as refused:
            await second.pay(TEXT)
    restarted = policy()

    assert paid.settled == USED
    assert f"0.5 USDC (500000 atomic units) authorized today, UTC, as counted in {days}" in str(refused.value)
    assert refused.value.signed is False
    assert await task_state(metered.base_url, str(refused.value.task_id)) == "TASK_STATE_CANCELED"
    assert restarted.upto_spent_today(chain.network, chain.asset) == MAXIMUM
    assert first_policy.upto_spent_today(chain.network, chain.asset) == MAXIMUM

"""No gas paid for a lie (issue 25, point 4), on anvil with real contract wallets.

A wallet valid only at gas price 0 passed every simulation (a node runs calls without fees at gas price
0) and reverted every real settlement: verification now simulates with the relayer's fees and refuses it,
nothing claimed or sent. A wallet that reverts on chain for any other reason costs the relayer one
transaction: its payer (and, once enough payers with it reverted, its code) cools off, refused before
anything is claimed or sent, in every replica; the gas is counted, and a key past its hourly budget sends
nothing new, which `/readyz`, `/metrics` and the refusal say.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from eth_abi.abi import encode
from eth_account import Account
from eth_utils.address import to_checksum_address

from a2a_x402.devchain import DevChain, RpcError, TransactionFailedError, encode_call, load_artifact
from a2a_x402.facilitator import Facilitator, FacilitatorSettings, create_app
from a2a_x402.facilitator._reverts import (
    CoolingOffError,
    RevertedSettlement,
    RevertGuard,
    read_spent,
    reverts_table,
)
from a2a_x402.facilitator.wire import PaymentPayload, Reason
from a2a_x402.payer import sign_payment
from a2a_x402.storage import create_engine, write
from tests.fixtures.deadlines import HANG_S, wait_until
from tests.fixtures.facilitator import make_requirements
from tests.fixtures.metrics import promtool_check, sample

from .conftest import OpenFacilitator
from .payments import (
    accept_again,
    claim_rows,
    deploy_gas_burning_wallet,
    relayer_address,
    settle_while_the_wallet_refuses,
    sign_exact,
    tx_count,
)

SIMULATION_FAILED = Reason.INVALID_EXACT_EVM_TRANSACTION_SIMULATION_FAILED
# The wallet's ERC-1271 answer, asked at the relayer's fees as the token will ask it, is "not valid".
BAD_SIGNATURE = Reason.INVALID_EXACT_EVM_PAYLOAD_SIGNATURE


def deploy_gas_price_sensitive_wallet(chain: DevChain) -> tuple[str, str]:
    """Deploy a funded `GasPriceSensitiveWallet` (valid only at `tx.gasprice == 0`): (address, owner key)."""
    owner = Account.create()
    artifact = load_artifact("GasPriceSensitiveWallet")
    init_code = bytes.fromhex(artifact.bytecode[2:]) + encode(["address"], [owner.address])
    receipt = chain.rpc.transact(chain.deployer_key, to=None, data=init_code)
    wallet = to_checksum_address(receipt["contractAddress"])
    chain.mint(wallet, 1_000_000_000)
    return wallet, str(owner.key.to_0x_hex())


def transfer_calldata(payload: PaymentPayload) -> bytes:
    """The `transferWithAuthorization` call that settles `payload`."""
    auth = payload.payload.authorization
    return encode_call(
        "transferWithAuthorization(address,address,uint256,uint256,uint256,bytes32,bytes)",
        [
            auth.from_address,
            auth.to,
            auth.value,
            auth.valid_after,
            auth.valid_before,
            bytes.fromhex(auth.nonce[2:]),
            bytes.fromhex(payload.payload.signature[2:]),
        ],
    )


def relayer_counts(chain: DevChain) -> tuple[int, int]:
    """The relayer's mined and pending transaction counts: both unchanged means nothing was sent."""
    relayer = relayer_address(chain)
    return tx_count(chain, relayer), tx_count(chain, relayer, "pending")


async def test_a_wallet_valid_only_at_gas_price_zero_is_refused_with_nothing_claimed_or_sent(
    database_url: str, chain: DevChain, open_facilitator: OpenFacilitator
) -> None:
    service = await open_facilitator(database_url)
    wallet, owner_key = deploy_gas_price_sensitive_wallet(chain)
    requirements = make_requirements(chain)
    payload = sign_exact(owner_key, requirements, from_address=wallet)
    data = "0x" + transfer_calldata(payload).hex()
    relayer = relayer_address(chain)
    # The lie: simulated without fees (as every simulation was), the transfer goes through...
    call = {"from": relayer, "to": chain.asset, "data": data}
    assert int(chain.rpc.call("eth_estimateGas", [call, "pending"]), 16) > 0
    # ...and sent for real (any sender, paying gas) it reverts, the sender paying for it.
    with pytest.raises(TransactionFailedError):
        chain.rpc.transact(chain.deployer_key, to=chain.asset, data=bytes.fromhex(data[2:]), gas=200_000)
    sent_before, balance_before = relayer_counts(chain), chain.balance_of(wallet)

    verified = await service.verify(payload, requirements)
    settled = await service.settle(payload, requirements, idempotency_key="gas-price-zero")
    replayed = await service.settle(payload, requirements, idempotency_key="gas-price-zero")

    assert (verified.is_valid, verified.invalid_reason) == (False, BAD_SIGNATURE), verified
    assert (settled.success, settled.error_reason, settled.transaction) == (False, BAD_SIGNATURE, "")
    assert replayed == settled
    assert relayer_counts(chain) == sent_before
    assert chain.balance_of(wallet) == balance_before
    assert await claim_rows(database_url) == []


async def test_a_payer_whose_settlement_reverted_is_refused_before_anything_is_claimed_or_sent(
    database_url: str,
    chain: DevChain,
    open_facilitator: OpenFacilitator,
    new_payer: Callable[..., str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    service = await open_facilitator(database_url, receipt_timeout_s=5.0)
    wallet, owner_key = deploy_gas_burning_wallet(chain, cold_reads=1)
    requirements = make_requirements(chain)
    first = sign_exact(owner_key, requirements, from_address=wallet)
    relayer = relayer_address(chain)

    reverted = await settle_while_the_wallet_refuses(chain, service, wallet, first, requirements, "first")
    accept_again(chain, wallet)  # it would pay now: only the cool-off refuses it

    assert (reverted.success, reverted.error_reason) == (False, Reason.TRANSACTION_FAILED)
    receipt = chain.rpc.call("eth_getTransactionReceipt", [reverted.transaction])
    gas_wei = int(receipt["gasUsed"], 16) * int(receipt["effectiveGasPrice"], 16)
    assert service.revert_guard.revert_gas_wei[relayer] == gas_wei > 0
    rows_before, sent_before, balance_before = (
        await claim_rows(database_url),
        relayer_counts(chain),
        (chain.balance_of(wallet)),
    )
    fresh = [sign_exact(owner_key, requirements, from_address=wallet) for _ in range(6)]
    caplog.clear()

    with caplog.at_level(logging.WARNING, logger="a2a_x402.facilitator"):
        verified = await service.verify(fresh[0], requirements)
        settled = await service.settle(fresh[0], requirements, idempotency_key="second")
        retried = await service.settle(first, requirements, idempotency_key="first")
        raced = await asyncio.gather(*(service.settle(p, requirements) for p in fresh[1:]))
    logged = [r for r in caplog.records if r.getMessage().startswith(f"refused: settlements from {wallet}")]
    # A replica sharing the database refuses it too.
    replica = await open_facilitator(database_url)
    elsewhere = await replica.verify(fresh[0], requirements)

    assert (verified.is_valid, verified.invalid_reason) == (False, SIMULATION_FAILED)
    assert f"settlements from {wallet} reverted on chain: refused until " in (verified.invalid_message or "")
    for answer in (settled, retried, *raced):
        assert (answer.success, answer.error_reason, answer.transaction) == (False, SIMULATION_FAILED, "")
    assert (elsewhere.is_valid, elsewhere.invalid_reason) == (False, SIMULATION_FAILED)
    assert await claim_rows(database_url) == rows_before
    assert relayer_counts(chain) == sent_before
    assert chain.balance_of(wallet) == balance_before
    assert service.revert_guard.refusals["payer"] == 3 + len(raced)
    assert len(logged) == 3 + len(raced)  # one line each
    # Another payer is nobody's suspect: it settles.
    assert (await service.settle(sign_payment(new_payer(), requirements), requirements)).success


async def test_a_payer_is_accepted_again_once_its_cool_off_ends(
    sqlite_url: str, chain: DevChain, open_facilitator: OpenFacilitator
) -> None:
    service = await open_facilitator(sqlite_url, receipt_timeout_s=5.0, revert_cooloff_s=1.0)
    wallet, owner_key = deploy_gas_burning_wallet(chain, cold_reads=1)
    requirements = make_requirements(chain)
    first = sign_exact(owner_key, requirements, from_address=wallet)
    reverted = await settle_while_the_wallet_refuses(chain, service, wallet, first, requirements, "first")
    accept_again(chain, wallet)
    assert reverted.error_reason == Reason.TRANSACTION_FAILED
    later = sign_exact(owner_key, requirements, from_address=wallet)
    assert not (await service.verify(later, requirements)).is_valid

    async def valid() -> bool:
        return (await service.verify(later, requirements)).is_valid

    await wait_until(valid, what="the cool-off to end")
    assert (await service.settle(later, requirements)).success


async def test_a_wallet_code_cools_off_once_enough_of_its_payers_reverted(
    sqlite_url: str, chain: DevChain, open_facilitator: OpenFacilitator
) -> None:
    """Wallets deployed anew per attempt share their code; one bad wallet does not lock out its peers."""
    service = await open_facilitator(sqlite_url, receipt_timeout_s=5.0, revert_cooloff_code_payers=2)
    owner_key = Account.create().key.to_0x_hex()
    twins = [deploy_gas_burning_wallet(chain, cold_reads=1, owner_key=owner_key)[0] for _ in range(3)]
    other, other_key = deploy_gas_burning_wallet(chain, cold_reads=2)
    requirements = make_requirements(chain)

    def pays(wallet: str, key: str = owner_key) -> PaymentPayload:
        return sign_exact(key, requirements, from_address=wallet)

    async def reverts(wallet: str) -> None:
        answer = await settle_while_the_wallet_refuses(
            chain, service, wallet, pays(wallet), requirements, wallet
        )
        accept_again(chain, wallet)
        assert answer.error_reason == Reason.TRANSACTION_FAILED

    await reverts(twins[0])
    assert (await service.verify(pays(twins[1]), requirements)).is_valid  # one payer: its peers still pay
    await reverts(twins[1])
    sent_before = relayer_counts(chain)
    refused = await service.settle(pays(twins[2]), requirements, idempotency_key="third-twin")

    assert (refused.success, refused.error_reason) == (False, SIMULATION_FAILED)
    assert "settlements of 2 wallets with the code of" in (refused.error_message or "")
    assert relayer_counts(chain) == sent_before
    assert service.revert_guard.refusals["code"] == 1
    assert [row["payer"] for row in await claim_rows(sqlite_url)] == twins[:2]
    assert (await service.settle(pays(other, other_key), requirements)).success  # other code pays


@asynccontextmanager
async def serving(service: Facilitator, settings: FacilitatorSettings) -> AsyncIterator[httpx.AsyncClient]:
    """The HTTP app around `service`, in this event loop."""
    app = create_app(service, settings=settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            timeout=HANG_S, transport=transport, base_url="http://facilitator"
        ) as client:
            yield client


async def test_a_key_past_its_revert_budget_sends_nothing_new_and_says_so(
    sqlite_url: str,
    chain: DevChain,
    settings_for: Callable[..., FacilitatorSettings],
    new_payer: Callable[..., str],
) -> None:
    settings = settings_for(sqlite_url, receipt_timeout_s=5.0, relayer_revert_budget_wei=10**9)
    service = await Facilitator.open(settings)
    try:
        async with serving(service, settings) as client:
            await budget_spent(chain, service, client, sqlite_url, new_payer)
    finally:
        await service.aclose()


async def budget_spent(
    chain: DevChain,
    service: Facilitator,
    client: httpx.AsyncClient,
    database_url: str,
    new_payer: Callable[..., str],
) -> None:
    relayer = relayer_address(chain)
    assert (await client.get("/readyz")).status_code == 200
    wallet, owner_key = deploy_gas_burning_wallet(chain, cold_reads=1)
    requirements = make_requirements(chain)
    payment = sign_exact(owner_key, requirements, from_address=wallet)
    reverted = await settle_while_the_wallet_refuses(chain, service, wallet, payment, requirements, "spent")
    accept_again(chain, wallet)
    receipt = chain.rpc.call("eth_getTransactionReceipt", [reverted.transaction])
    gas_wei = int(receipt["gasUsed"], 16) * int(receipt["effectiveGasPrice"], 16)
    assert gas_wei >= 10**9  # one revert spends the budget
    honest = sign_payment(new_payer(), requirements)
    rows_before, sent_before = await claim_rows(database_url), relayer_counts(chain)

    verified = await service.verify(honest, requirements)
    settled = await service.settle(honest, requirements, idempotency_key="honest")
    ready = await client.get("/readyz")
    metrics = (await client.get("/metrics")).text

    assert verified.is_valid  # the payment is fine: only sending it is refused
    assert (settled.success, settled.error_reason, settled.transaction) == (
        False,
        Reason.UNEXPECTED_SETTLE_ERROR,
        "",
    )
    assert "X402_RELAYER_REVERT_BUDGET_WEI" in (settled.error_message or "")
    assert await claim_rows(database_url) == rows_before
    assert relayer_counts(chain) == sent_before
    assert [(s.usable, s.reason) for s in service.relayer_states()] == [(False, "revert gas budget spent")]
    assert ready.status_code == 503
    assert ready.json()["failing"] == ["revert budget"]
    assert f"{relayer} spent " in ready.json()["checks"]["revert budget"]["detail"]
    promtool_check(metrics)
    assert sample(metrics, "x402_relayer_revert_gas_wei", relayer=relayer) == gas_wei
    assert sample(metrics, "x402_relayer_revert_gas_window_wei", relayer=relayer) == gas_wei
    assert sample(metrics, "x402_facilitator_revert_refusals", reason="budget") == 1
    assert sample(metrics, "x402_relayer_usable", relayer=relayer) == 0


async def test_the_node_refuses_the_hostile_wallet_only_when_the_call_carries_fees(chain: DevChain) -> None:
    """What the fix relies on: a node's call without fees runs at gas price 0, one with fees does not."""
    wallet, owner_key = deploy_gas_price_sensitive_wallet(chain)
    payload = sign_exact(owner_key, make_requirements(chain), from_address=wallet)
    call = {
        "from": relayer_address(chain),
        "to": chain.asset,
        "data": "0x" + transfer_calldata(payload).hex(),
    }
    block = chain.rpc.call("eth_getBlockByNumber", ["pending", False])
    fees = {"maxFeePerGas": hex(2 * int(block["baseFeePerGas"], 16) + 1), "maxPriorityFeePerGas": "0x1"}

    chain.rpc.call("eth_call", [call, "pending"])
    with pytest.raises(RpcError):
        chain.rpc.call("eth_call", [{**call, **fees, "gas": hex(300_000)}, "pending"])


async def test_a_revert_counts_once_within_its_window_and_on_its_chain_only(database_url: str) -> None:
    relayer, payer, elder, stranger = (Account.create().address for _ in range(4))
    code = "0x" + "c0" * 32
    engine = create_engine(database_url)
    try:
        guard = RevertGuard(engine, chain_id=84532, cooloff_s=600, code_payers=1, budget_wei=100)
        revert = RevertedSettlement("0x" + "01" * 32, relayer, payer, code, 70)
        first, again = await guard.record(revert), await guard.record(revert)
        old = datetime.now(UTC) - timedelta(hours=2)
        row = {
            "chain_id": 84532,
            "relayer": relayer,
            "payer": elder,
            "code_hash": None,
            "reverted_at": old,
        }
        aged = {**row, "tx_hash": "0x" + "02" * 32, "gas_wei": 10**18}
        await write(engine, lambda connection: connection.execute(reverts_table.insert(), aged))
        within = await read_spent(engine, 84532, [relayer])
        spent_before = guard.spent_out(relayer)
        await guard.record(RevertedSettlement("0x" + "03" * 32, relayer, payer, None, 30))

        assert (first, again) == (True, False)  # one receipt seen twice (a settle, then a reconcile pass)
        assert within == {relayer: 70} and guard.revert_gas_wei[relayer] == 100
        assert (spent_before, guard.spent_out(relayer)) == (False, True)
        with pytest.raises(CoolingOffError):
            await guard.check_cooling(payer, None)
        with pytest.raises(CoolingOffError):
            await guard.check_cooling(stranger, code)  # one payer with that code suffices here
        await guard.check_cooling(elder, None)  # reverted before the cool-off began
        other_chain = RevertGuard(engine, chain_id=1, cooloff_s=600, code_payers=1, budget_wei=100)
        await other_chain.check_cooling(payer, code)
        assert await read_spent(engine, 1, [relayer]) == {relayer: 0}
    finally:
        await engine.dispose()

"""The payer's Permit2 payments on the dev chain, verified and settled by our in-process facilitator: the
plain ERC-20 after `approve_permit2`, the EIP-2612 token with no approval at all (the permit rides in the
payment: the payer spends no gas), DevUSDC `upto` settled below its maximum; and the refusals that come
before any signature (no allowance and no EIP-2612, no node, a node of another chain), none showing key
material. The signatures are the x402 Python SDK's for the same inputs."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest
from eth_account import Account
from x402.extensions.eip2612_gas_sponsoring.client import sign_eip2612_permit
from x402.mechanisms.evm import EthAccountSignerWithRPC

from a2a_x402.devchain import PERMIT2_ADDRESS, PERMIT_ASSET_NAME, PERMIT_ASSET_VERSION, DevChain, encode_call
from a2a_x402.facilitator import Facilitator
from a2a_x402.facilitator.wire import ExactPermit2PaymentPayload, PaymentRequirements, UptoPaymentPayload
from a2a_x402.payer import CardAsset, ChainError, Permit2NotApprovedError, Permit2Payment, approve_permit2
from a2a_x402.payer._chain import ChainAccess
from a2a_x402.payer._paying import sign_chosen
from a2a_x402.payer._stages import SignedPayment
from tests.fixtures.deadlines import HANG_S
from tests.fixtures.facilitator import PAY_TO, facilitator_settings_on

AMOUNT = 1_500_000
_MAX = 2**256 - 1

Sign = Callable[..., Awaitable[SignedPayment]]


@pytest.fixture
async def facilitator(chain: DevChain, sqlite_url: str) -> AsyncIterator[Facilitator]:
    service = await Facilitator.open(facilitator_settings_on(chain, sqlite_url))
    try:
        yield service
    finally:
        await service.aclose()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=HANG_S) as client:
        yield client


@pytest.fixture
def sign(chain: DevChain, http: httpx.AsyncClient) -> Sign:
    """`await sign(key, requirements, rpc_urls=chain.rpc_url, card_asset=None)`: the payer's payment."""

    async def run(
        key: str,
        requirements: PaymentRequirements,
        *,
        rpc_urls: str | dict[str, str] | None = chain.rpc_url,
        card_asset: CardAsset | None = None,
    ) -> SignedPayment:
        chains = ChainAccess(http, rpc_urls, timeout_s=HANG_S)
        payment, lease = await sign_chosen(key, requirements, chains=chains, card_asset=card_asset)
        lease.release()  # each payment of these tests stands alone (`test_allowance_leases` shares them)
        return payment

    return run


def _requirements(chain: DevChain, scheme: str, asset: str, **extra: str) -> PaymentRequirements:
    return PaymentRequirements(
        scheme=scheme,
        network=chain.network,
        asset=asset,
        amount=AMOUNT,
        pay_to=PAY_TO,
        max_timeout_seconds=120,
        extra={"assetTransferMethod": "permit2", **extra} if scheme == "exact" else dict(extra),
    )


def _funded(chain: DevChain, asset: str, *, eth: bool = False) -> str:
    key = str(Account.create().key.to_0x_hex())
    address = Account.from_key(key).address
    chain.mint(address, 5 * AMOUNT, asset=asset)
    if eth:
        chain.rpc.call("anvil_setBalance", [address, hex(10**17)])
    return key


def _allowance(chain: DevChain, owner: str, asset: str) -> int:
    data = encode_call("allowance(address,address)", [owner, PERMIT2_ADDRESS])
    return int.from_bytes(chain.rpc.eth_call(asset, data), "big")


def _sent(chain: DevChain, address: str) -> int:
    return int(chain.rpc.call("eth_getTransactionCount", [address, "latest"]), 16)


async def _settles(
    facilitator: Facilitator, payment: SignedPayment, asked: PaymentRequirements, charged: int
) -> str:
    verified = await facilitator.verify(payment, asked)
    assert (verified.is_valid, verified.invalid_reason) == (True, None)
    settled = await facilitator.settle(payment, asked.model_copy(update={"amount": charged}))
    assert (settled.success, settled.error_reason, settled.amount) == (True, None, charged)
    return settled.transaction


async def test_the_plain_erc20_is_paid_by_permit2_once_the_payer_approved_it(
    chain: DevChain, facilitator: Facilitator, http: httpx.AsyncClient, sign: Sign
) -> None:
    key = _funded(chain, chain.plain_asset, eth=True)
    payer = Account.from_key(key).address
    asked = _requirements(chain, "exact", chain.plain_asset)

    with pytest.raises(Permit2NotApprovedError, match="approve Permit2 once") as refused:
        await sign(key, asked)
    approved = await approve_permit2(chain.rpc_url, key, chain.plain_asset, http=http, timeout_s=HANG_S)
    allowed = _allowance(chain, payer, chain.plain_asset)
    again = await approve_permit2(chain.rpc_url, key, chain.plain_asset)
    payment = await sign(key, asked)
    before = (
        chain.balance_of(payer, asset=chain.plain_asset),
        chain.balance_of(PAY_TO, asset=chain.plain_asset),
    )
    await _settles(facilitator, payment, asked, AMOUNT)

    assert (refused.value.code, refused.value.signed) == ("permit2_not_approved", False)
    assert f"0 of {AMOUNT} atomic units of {chain.plain_asset}" in str(refused.value)
    assert (approved.owner, approved.network) == (payer, chain.network)
    assert approved.transaction is not None
    assert chain.rpc.wait_for_receipt(approved.transaction, timeout_s=HANG_S)["status"] == "0x1"
    assert allowed == _MAX
    assert again.transaction is None  # the maximum already: nothing sent
    assert payment.extensions is None
    assert (
        chain.balance_of(payer, asset=chain.plain_asset),
        chain.balance_of(PAY_TO, asset=chain.plain_asset),
    ) == (before[0] - AMOUNT, before[1] + AMOUNT)


@pytest.mark.parametrize("scheme", ["exact", "upto"])
@pytest.mark.parametrize(
    "domain",
    [
        pytest.param("terms", id="domain-in-terms"),
        pytest.param("card", id="domain-in-card"),
        pytest.param("chain", id="domain-from-name"),
    ],
)
async def test_the_eip2612_token_is_paid_without_any_approval_or_gas(
    chain: DevChain, facilitator: Facilitator, sign: Sign, scheme: str, domain: str
) -> None:
    key = _funded(chain, chain.permit_asset)
    payer = Account.from_key(key).address
    named = {"name": PERMIT_ASSET_NAME, "version": PERMIT_ASSET_VERSION}
    extra = named if domain == "terms" else {}
    if scheme == "upto":
        extra = {**extra, "facilitatorAddress": _upto_facilitator(facilitator, chain)}
    asked = _requirements(chain, scheme, chain.permit_asset, **extra)
    card = (
        CardAsset(chain.network, chain.permit_asset, name=PERMIT_ASSET_NAME, version=PERMIT_ASSET_VERSION)
        if domain == "card"
        else None
    )
    charged = AMOUNT if scheme == "exact" else AMOUNT // 3

    payment = await sign(key, asked, card_asset=card)
    await _settles(facilitator, payment, asked, charged)

    info = (payment.extensions or {})["eip2612GasSponsoring"]["info"]
    assert (info["from"], info["spender"], info["amount"]) == (payer, PERMIT2_ADDRESS, str(AMOUNT))
    assert info["deadline"] == str(_permit2(payment).payload.permit2_authorization.deadline)
    assert _sent(chain, payer) == 0  # the payer sent nothing and holds no ETH
    assert chain.balance_of(payer, asset=chain.permit_asset) == 5 * AMOUNT - charged


async def test_devusdc_upto_settles_what_was_used_below_the_maximum(
    chain: DevChain, facilitator: Facilitator, sign: Sign, new_payer: Callable[..., str]
) -> None:
    key = new_payer(5 * AMOUNT)
    chain.approve_permit2(key, chain.asset)
    payer = Account.from_key(key).address
    asked = _requirements(
        chain, "upto", chain.asset, facilitatorAddress=_upto_facilitator(facilitator, chain)
    )
    used = 123_457
    before = chain.balance_of(payer), chain.balance_of(PAY_TO)

    payment = await sign(key, asked)
    transaction = await _settles(facilitator, payment, asked, used)

    assert _permit2(payment).payload.permit2_authorization.permitted.amount == AMOUNT
    assert transaction
    assert (chain.balance_of(payer), chain.balance_of(PAY_TO)) == (before[0] - used, before[1] + used)


async def test_reads_it_cannot_make_refuse_before_signing(chain: DevChain, sign: Sign) -> None:
    key = _funded(chain, chain.permit_asset)
    asked = _requirements(chain, "exact", chain.permit_asset)
    elsewhere = asked.model_copy(update={"network": "eip155:8453"})

    with pytest.raises(ChainError, match=f"no RPC URL for {chain.network}") as none:
        await sign(key, asked, rpc_urls={"eip155:1": chain.rpc_url})
    with pytest.raises(ChainError, match=f"is chain {chain.chain_id}, not 8453") as other:
        await sign(key, elsewhere)
    with pytest.raises(ChainError, match="did not answer eth_chainId") as down:
        await sign(key, asked, rpc_urls="http://127.0.0.1:9")

    assert [e.code for e in (none.value, other.value, down.value)] == ["chain_unavailable"] * 3


async def test_no_key_material_in_any_log_line_or_error(
    chain: DevChain, http: httpx.AsyncClient, sign: Sign, caplog: pytest.LogCaptureFixture
) -> None:
    key = _funded(chain, chain.plain_asset, eth=True)
    asked = _requirements(chain, "exact", chain.plain_asset)
    caplog.set_level(logging.DEBUG)

    with pytest.raises(Permit2NotApprovedError) as refused:
        await sign(key, asked)
    approved = await approve_permit2(chain.rpc_url, key, chain.plain_asset, http=http, timeout_s=HANG_S)
    payment = await sign(key, asked)

    raw = chain.rpc.call("eth_getTransactionByHash", [approved.transaction])
    secrets = {key[2:].lower(), payment.payload.signature[2:].lower(), raw["r"][2:].lower()}
    shown = [record.getMessage().lower() for record in caplog.records] + [str(refused.value).lower()]
    assert [line for line in shown if any(secret in line for secret in secrets)] == []


def _permit2(payment: SignedPayment) -> Permit2Payment:
    assert isinstance(payment, ExactPermit2PaymentPayload | UptoPaymentPayload)
    return payment


def _upto_facilitator(facilitator: Facilitator, chain: DevChain) -> str:
    """The address `/supported` names for `upto` on the chain, as a merchant copies it into its terms."""
    [kind] = [k for k in facilitator.supported().kinds if k.scheme == "upto" and k.network == chain.network]
    return str((kind.extra or {})["facilitatorAddress"])


async def test_the_eip2612_permit_is_the_one_the_sdk_signs(chain: DevChain, sign: Sign) -> None:
    key = _funded(chain, chain.permit_asset)
    asked = _requirements(chain, "exact", chain.permit_asset)
    payment = _permit2(await sign(key, asked))
    ours = (payment.extensions or {})["eip2612GasSponsoring"]["info"]

    theirs = sign_eip2612_permit(
        EthAccountSignerWithRPC(Account.from_key(key), chain.rpc_url),
        chain.permit_asset,
        PERMIT_ASSET_NAME,
        PERMIT_ASSET_VERSION,
        chain.chain_id,
        str(payment.payload.permit2_authorization.deadline),
        str(AMOUNT),
    )

    assert ours == theirs.to_dict()

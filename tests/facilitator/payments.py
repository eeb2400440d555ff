"""Building good and bad EIP-3009 payments on the dev chain, and reading what a settlement left behind."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from eth_abi.abi import decode, encode
from eth_account import Account
from eth_utils.abi import function_signature_to_4byte_selector
from eth_utils.address import to_checksum_address

from a2a_x402.devchain import MULTICALL3_ADDRESS, DevChain, encode_call, load_artifact
from a2a_x402.facilitator import ClaimState, Facilitator
from a2a_x402.facilitator._claims import claims_table
from a2a_x402.facilitator.wire import (
    ExactEvmAuthorization,
    ExactEvmPayload,
    PaymentPayload,
    PaymentRequirements,
    SettleResponse,
)
from a2a_x402.storage import create_engine
from tests.fixtures.deadlines import HANG_S, wait_until
from tests.fixtures.facilitator import PAY_TO

__all__ = [
    "POISON",
    "SECP256K1_N",
    "accept_again",
    "cancel_authorization",
    "claim_rows",
    "deploy_gas_burning_wallet",
    "eth_balance",
    "fund_payers",
    "high_s",
    "insert_claims",
    "left_behind",
    "relayer_address",
    "relayer_nonce",
    "settle_while_the_wallet_refuses",
    "sign_counterfactual",
    "sign_exact",
    "submit_directly",
    "tampered",
    "transfer_logs_of",
    "tx_count",
    "wrap_erc6492",
]

SECP256K1_N = 0xFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFEBAAEDCE6AF48A03BBFD25E8CD0364141
ERC6492_MAGIC = bytes.fromhex("6492" * 16)
_TRANSFER_TOPIC = "0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"

_AUTHORIZATION_FIELDS = [
    {"name": "from", "type": "address"},
    {"name": "to", "type": "address"},
    {"name": "value", "type": "uint256"},
    {"name": "validAfter", "type": "uint256"},
    {"name": "validBefore", "type": "uint256"},
    {"name": "nonce", "type": "bytes32"},
]


def sign_exact(
    key: str,
    requirements: PaymentRequirements,
    *,
    signer_key: str | None = None,
    from_address: str | None = None,
    domain: dict[str, Any] | None = None,
    extensions: dict[str, Any] | None = None,
    **message: Any,
) -> PaymentPayload:
    """A v2 payload for `requirements` from `key`'s address, with any field of the signed message overridden.

    `signer_key` signs instead of `key` (a wrong signer, or a contract wallet's owner) and `from_address`
    replaces the payer; `domain` entries replace those of the token's EIP-712 domain.
    """
    now = int(time.time())
    fields: dict[str, Any] = {
        "from": from_address or Account.from_key(key).address,
        "to": requirements.pay_to,
        "value": requirements.amount,
        "validAfter": now - 60,
        "validBefore": now + requirements.max_timeout_seconds,
        "nonce": os.urandom(32),
    }
    fields.update({_camel(name): value for name, value in message.items()})
    extra = requirements.extra or {}
    typed_domain = {
        "name": extra.get("name", ""),
        "version": extra.get("version", ""),
        "chainId": requirements.chain_id,
        "verifyingContract": requirements.asset,
        **(domain or {}),
    }
    signed = Account.sign_typed_data(
        signer_key or key, typed_domain, {"TransferWithAuthorization": _AUTHORIZATION_FIELDS}, fields
    )
    authorization = ExactEvmAuthorization.model_validate(
        {**fields, "nonce": "0x" + fields["nonce"].hex()}, by_alias=True
    )
    return PaymentPayload(
        x402_version=2,
        payload=ExactEvmPayload(authorization=authorization, signature="0x" + signed.signature.hex()),
        accepted=requirements,
        extensions=extensions,
    )


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def wrap_erc6492(factory: str, factory_calldata: bytes, signature: str) -> str:
    """`signature` (0x hex) in an ERC-6492 wrapper that deploys the signer by calling `factory`."""
    wrapped = encode(["address", "bytes", "bytes"], [factory, factory_calldata, bytes.fromhex(signature[2:])])
    return "0x" + (wrapped + ERC6492_MAGIC).hex()


def sign_counterfactual(
    chain: DevChain,
    requirements: PaymentRequirements,
    *,
    fund: int = 1_000_000_000,
    factory: str | None = None,
    factory_calldata: bytes | None = None,
    signer_key: str | None = None,
    **message: Any,
) -> tuple[PaymentPayload, str]:
    """A payment from a funded, not yet deployed `WalletFactory` wallet, signed by its owner, 6492-wrapped.

    `factory`, `factory_calldata` and `signer_key` replace the wrapper's factory, its call, and the owner's
    key; `message` overrides fields of the signed message as for `sign_exact`. Returns (payload, the
    wallet's address).
    """
    owner = Account.create()
    salt = os.urandom(32)
    wallet = chain.counterfactual_wallet(owner.address, salt)
    chain.mint(wallet, fund)
    signed = sign_exact(signer_key or owner.key.to_0x_hex(), requirements, from_address=wallet, **message)
    calldata = encode_call("createWallet(address,bytes32)", [owner.address, salt])
    signature = wrap_erc6492(
        factory or chain.wallet_factory,
        calldata if factory_calldata is None else factory_calldata,
        signed.payload.signature,
    )
    return tampered(signed, signature=signature), wallet


def tampered(
    payload: PaymentPayload, *, signature: str | None = None, **authorization: Any
) -> PaymentPayload:
    """`payload` with authorization fields (snake_case) or the signature changed after signing."""
    inner = payload.payload
    return payload.model_copy(
        update={
            "payload": inner.model_copy(
                update={
                    "authorization": inner.authorization.model_copy(update=authorization),
                    "signature": signature or inner.signature,
                }
            )
        }
    )


def high_s(signature: str) -> str:
    """The other valid ECDSA signature of the same digest: s replaced by n - s and the parity flipped."""
    raw = bytes.fromhex(signature[2:])
    s = SECP256K1_N - int.from_bytes(raw[32:64], "big")
    v = 55 - raw[64]  # 27 <-> 28
    return "0x" + (raw[:32] + s.to_bytes(32, "big") + bytes([v])).hex()


def cancel_authorization(chain: DevChain, key: str, nonce: str) -> None:
    """Cancel `key`'s EIP-3009 `nonce` on chain (sent by the deployer, so the relayer is untouched)."""
    authorizer = Account.from_key(key).address
    signed = Account.sign_typed_data(
        key,
        chain.eip712_domain(),
        {
            "CancelAuthorization": [
                {"name": "authorizer", "type": "address"},
                {"name": "nonce", "type": "bytes32"},
            ]
        },
        {"authorizer": authorizer, "nonce": bytes.fromhex(nonce[2:])},
    )
    data = encode_call(
        "cancelAuthorization(address,bytes32,bytes)", [authorizer, bytes.fromhex(nonce[2:]), signed.signature]
    )
    chain.rpc.transact(chain.deployer_key, to=chain.asset, data=data)


def deploy_gas_burning_wallet(
    chain: DevChain, cold_reads: int, *, owner_key: str | None = None
) -> tuple[str, str]:
    """Deploy a funded `GasBurningERC1271Wallet` whose signature check reads `cold_reads` cold slots.

    Each read costs 2,100 gas. Wallets of one owner and `cold_reads` have the same code. Returns (wallet
    address, owner key).
    """
    owner = Account.from_key(owner_key) if owner_key is not None else Account.create()
    artifact = load_artifact("GasBurningERC1271Wallet")
    init_code = bytes.fromhex(artifact.bytecode[2:]) + encode(
        ["address", "uint256"], [owner.address, cold_reads]
    )
    receipt = chain.rpc.transact(chain.deployer_key, to=None, data=init_code)
    wallet = to_checksum_address(receipt["contractAddress"])
    chain.mint(wallet, 1_000_000_000)
    return wallet, str(owner.key.to_0x_hex())


def submit_directly(chain: DevChain, payload: PaymentPayload) -> None:
    """Submit `payload`'s authorization from the deployer, outside the facilitator (someone front-running)."""
    auth = payload.payload.authorization
    data = encode_call(
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
    chain.rpc.transact(chain.deployer_key, to=chain.asset, data=data)


def fund_payers(chain: DevChain, count: int, amount_atomic: int) -> list[str]:
    """`count` fresh keys holding `amount_atomic` tokens each (and no ETH), in two transactions: the
    deployer mints the sum to Multicall3, then one `aggregate3` hands it out. Never two of the deployer's
    transactions in the pool at once: ganache parks a later nonce that arrives while it mines a block in
    a queue only the sender's next transaction drains, so a burst of mints could wait forever."""
    keys = [Account.create() for _ in range(count)]
    transfers = [
        (chain.asset, False, encode_call("transfer(address,uint256)", [key.address, amount_atomic]))
        for key in keys
    ]
    aggregate = function_signature_to_4byte_selector("aggregate3((address,bool,bytes)[])") + encode(
        ["(address,bool,bytes)[]"], [transfers]
    )
    mint = encode_call("mint(address,uint256)", [MULTICALL3_ADDRESS, count * amount_atomic])
    for to, data in ((chain.asset, mint), (MULTICALL3_ADDRESS, aggregate)):
        tx_hash = chain.rpc.send_transaction(chain.deployer_key, to=to, data=data)
        receipt = chain.rpc.wait_for_receipt(tx_hash, timeout_s=HANG_S, poll_s=0.05)
        assert int(receipt["status"], 16) == 1, receipt
    return [str(key.key.to_0x_hex()) for key in keys]


def relayer_address(chain: DevChain) -> str:
    """The address that pays gas for the facilitator's settlements."""
    return str(Account.from_key(chain.relayer_key).address)


def tx_count(chain: DevChain, address: str, block: str = "latest") -> int:
    """The account nonce of `address` at `block`."""
    return int(chain.rpc.call("eth_getTransactionCount", [address, block]), 16)


def relayer_nonce(chain: DevChain) -> int:
    """How many transactions the relayer has mined: it moves by one per settlement broadcast."""
    return tx_count(chain, relayer_address(chain))


def eth_balance(chain: DevChain, address: str) -> int:
    """Wei held by `address`."""
    return int(chain.rpc.call("eth_getBalance", [address, "latest"]), 16)


def transfer_logs_of(chain: DevChain, tx_hash: str) -> list[tuple[str, str, str, int]]:
    """(token, from, to, value) of every ERC-20 Transfer in the receipt of `tx_hash`."""
    receipt = chain.rpc.call("eth_getTransactionReceipt", [tx_hash])
    logs = []
    for log in receipt["logs"]:
        if log["topics"][0] == _TRANSFER_TOPIC:
            (value,) = decode(["uint256"], bytes.fromhex(log["data"][2:]))
            sender, recipient = ("0x" + topic[-40:] for topic in log["topics"][1:3])
            logs.append((log["address"].lower(), sender, recipient, int(value)))
    return logs


async def claim_rows(database_url: str) -> list[dict[str, Any]]:
    """Every row of the claim store at `database_url`."""
    engine = create_engine(database_url)
    try:
        async with engine.connect() as connection:
            rows = (await connection.execute(sa.text("SELECT * FROM settlement_claims"))).mappings().all()
    finally:
        await engine.dispose()
    # A raw query hands the JSON column back as text on SQLite (PostgreSQL's driver decodes it).
    return [
        {
            **row,
            "response": json.loads(row["response"]) if isinstance(row["response"], str) else row["response"],
        }
        for row in rows
    ]


# The gas-burning wallet's switch: set, it refuses every signature (its owner rotated keys, say).
_REFUSAL_SLOT, _REFUSE, _ACCEPT = "0x" + "00" * 31 + "01", "0x" + "00" * 31 + "01", "0x" + "00" * 32


async def settle_while_the_wallet_refuses(
    chain: DevChain,
    service: Facilitator,
    wallet: str,
    payload: PaymentPayload,
    requirements: PaymentRequirements,
    idempotency_key: str,
) -> SettleResponse:
    """Settle `wallet`'s `payload`, the wallet refusing every signature once our transaction is in the pool:
    the transfer reverts without using the authorization. Automine stays off; `accept_again` undoes both."""
    chain.rpc.call("evm_setAutomine", [False])
    settling = asyncio.create_task(service.settle(payload, requirements, idempotency_key=idempotency_key))
    relayer = relayer_address(chain)
    await wait_until(
        lambda: tx_count(chain, relayer, "pending") != tx_count(chain, relayer),
        what="our transaction in the pool",
    )
    chain.rpc.call("anvil_setStorageAt", [wallet, _REFUSAL_SLOT, _REFUSE])
    chain.rpc.call("evm_mine")
    return await settling


def accept_again(chain: DevChain, wallet: str) -> None:
    """The wallet accepts its owner's signatures again, and every transaction is mined at once again."""
    chain.rpc.call("anvil_setStorageAt", [wallet, _REFUSAL_SLOT, _ACCEPT])
    chain.rpc.call("evm_setAutomine", [True])


# Not hex: `authorizationState` cannot be encoded for it, whatever the chain says.
POISON = "0xnot-a-nonce"


def left_behind(chain: DevChain, claim_id: str, *, nonce: str | None = None, **values: Any) -> dict[str, Any]:
    """A `settlement_claims` row a process killed between claiming and broadcasting left behind: claimed,
    its lease long expired, for a fresh authorization of a fresh payer (`values` change columns)."""
    now = datetime.now(UTC)
    row: dict[str, Any] = {
        "id": claim_id,
        "chain_id": chain.chain_id,
        "asset": chain.asset,
        "payer": "0x" + secrets.token_hex(20),
        "nonce": nonce or "0x" + secrets.token_hex(32),
        "idempotency_key": None,
        "payload_hash": secrets.token_hex(32),
        "network": chain.network,
        "pay_to": PAY_TO,
        "amount": 1_500_000,
        "valid_before": int(now.timestamp()) + 3600,
        "state": ClaimState.CLAIMED.value,
        "attempt": 1,
        "lease_until": now - timedelta(hours=1),
        "created_at": now - timedelta(hours=1),
        "updated_at": now - timedelta(hours=1),
    }
    return {**row, **values}


async def insert_claims(database_url: str, *rows: dict[str, Any]) -> None:
    """Store `rows` in the claim store at `database_url`, in order."""
    engine = create_engine(database_url)
    try:
        async with engine.begin() as connection:
            for row in rows:
                await connection.execute(claims_table.insert().values(row))
    finally:
        await engine.dispose()

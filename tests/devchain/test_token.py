"""DevUSDC on a real anvil node: EIP-712 domain, EIP-3009 flows and USDC v2.2 revert strings."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

import pytest
from eth_account import Account
from eth_account.datastructures import SignedMessage
from eth_account.messages import encode_typed_data
from web3 import Web3
from web3.contract import Contract
from web3.contract.contract import ContractFunction
from web3.exceptions import ContractLogicError
from web3.logs import DISCARD
from web3.types import TxReceipt

from a2a_x402.devchain import ANVIL_DEV_KEYS, DevChain, load_artifact

# Circle's constants in FiatTokenV2 / EIP3009.sol, and the topics of its two events.
USDC_TYPEHASHES = {
    "TRANSFER_WITH_AUTHORIZATION_TYPEHASH": (
        "7c7c6cdb67a18743f49ec6fa9b35f50d52ed05cbed4cc592e13b44501c1a2267"
    ),
    "RECEIVE_WITH_AUTHORIZATION_TYPEHASH": "d099cc98ef71107a616c4f0f941f04c322d8e254fe26b3c6668db87aae413de8",
    "CANCEL_AUTHORIZATION_TYPEHASH": "158b0a9edf7a828aad02f63cd515c68ef2f50ba807396f6d12842833a1597429",
}
AUTHORIZATION_USED_TOPIC = "98de503528ee59b575ef0c0a2576a82497bfc029a5685b209e9ec333479b10a5"
AUTHORIZATION_CANCELED_TOPIC = "1cdd46ff242716cdaa72d159d339a485b3438398348d68f09d7c8c0a59353d81"
TRANSFER_TOPIC = "ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef"

_AUTHORIZATION_FIELDS = [
    {"name": "from", "type": "address"},
    {"name": "to", "type": "address"},
    {"name": "value", "type": "uint256"},
    {"name": "validAfter", "type": "uint256"},
    {"name": "validBefore", "type": "uint256"},
    {"name": "nonce", "type": "bytes32"},
]
TYPES = {
    "TransferWithAuthorization": _AUTHORIZATION_FIELDS,
    "ReceiveWithAuthorization": _AUTHORIZATION_FIELDS,
    "CancelAuthorization": [{"name": "authorizer", "type": "address"}, {"name": "nonce", "type": "bytes32"}],
}
RELAYER = Account.from_key(ANVIL_DEV_KEYS[1])
# Any account with ETH can be a payee that submits its own receiveWithAuthorization.
PAYEE = Account.from_key(ANVIL_DEV_KEYS[2])


@pytest.fixture(scope="module")
def w3(devchain: DevChain) -> Web3:
    return Web3(Web3.HTTPProvider(devchain.rpc_url))


@pytest.fixture
def token(chain: DevChain, w3: Web3) -> Contract:
    return w3.eth.contract(address=w3.to_checksum_address(chain.asset), abi=load_artifact("DevUSDC").abi)


def address_of(key: str) -> str:
    return str(Account.from_key(key).address)


def sign(key: str, domain: dict[str, Any], primary_type: str, message: dict[str, Any]) -> SignedMessage:
    signed: SignedMessage = Account.sign_typed_data(key, domain, {primary_type: TYPES[primary_type]}, message)
    return signed


def authorization(payer: str, to: str, value: int, **overrides: Any) -> dict[str, Any]:
    """An authorization valid from 1970 to the year 36812, with a random nonce."""
    message = {
        "from": payer,
        "to": to,
        "value": value,
        "validAfter": 0,
        "validBefore": 2**40,
        "nonce": secrets.token_bytes(32),
    }
    return message | overrides


def args(message: dict[str, Any]) -> list[Any]:
    return [message[field["name"]] for field in _AUTHORIZATION_FIELDS]


def vrs(signed: SignedMessage) -> list[Any]:
    return [signed.v, signed.r.to_bytes(32, "big"), signed.s.to_bytes(32, "big")]


def send(w3: Web3, key: str, call: ContractFunction, *, gas: int | None = None) -> TxReceipt:
    """Sign and send ``call`` from ``key``; an explicit ``gas`` skips estimation so reverts get mined."""
    sender = Account.from_key(key)
    params: dict[str, Any] = {"from": sender.address, "nonce": w3.eth.get_transaction_count(sender.address)}
    if gas is not None:
        params["gas"] = gas
    signed = sender.sign_transaction(call.build_transaction(params))  # type: ignore[arg-type]
    tx_hash = w3.eth.send_raw_transaction(signed.raw_transaction)
    return w3.eth.wait_for_transaction_receipt(tx_hash, poll_latency=0.002)


def revert_reason(call: ContractFunction) -> str:
    with pytest.raises(ContractLogicError) as excinfo:
        call.call({"from": RELAYER.address})
    return str(excinfo.value.message).removeprefix("execution reverted: ")


def latest_timestamp(w3: Web3) -> int:
    return int(w3.eth.get_block("latest")["timestamp"])


def test_metadata_and_typehashes_match_usdc(token: Contract) -> None:
    assert (token.functions.name().call(), token.functions.symbol().call()) == ("USDC", "USDC")
    assert token.functions.version().call() == "2"
    assert token.functions.decimals().call() == 6
    for name, expected in USDC_TYPEHASHES.items():
        assert getattr(token.functions, name)().call().hex() == expected


def test_domain_separator_matches_eip712(chain: DevChain, token: Contract) -> None:
    message = authorization(address_of(chain.payer_keys[0]), PAYEE.address, 1)
    types = {"TransferWithAuthorization": _AUTHORIZATION_FIELDS}
    encoded = encode_typed_data(chain.eip712_domain(), types, message)
    assert token.functions.DOMAIN_SEPARATOR().call() == encoded.header


@pytest.mark.parametrize("form", ["bytes", "vrs"])
def test_transfer_with_authorization(
    form: str, chain: DevChain, w3: Web3, token: Contract, new_payer: Callable[..., str]
) -> None:
    payer_key = new_payer(5_000_000)
    payer, payee = address_of(payer_key), Account.create().address
    message = authorization(payer, payee, 1_500_000)
    signed = sign(payer_key, chain.eip712_domain(), "TransferWithAuthorization", message)
    signature = [signed.signature] if form == "bytes" else vrs(signed)

    receipt = send(
        w3, chain.relayer_key, token.functions.transferWithAuthorization(*args(message), *signature)
    )

    assert receipt["status"] == 1
    assert (chain.balance_of(payer), chain.balance_of(payee)) == (3_500_000, 1_500_000)
    assert chain.authorization_state(payer, message["nonce"])
    assert [log["topics"][0].hex() for log in receipt["logs"]] == [AUTHORIZATION_USED_TOPIC, TRANSFER_TOPIC]
    (used,) = token.events.AuthorizationUsed().process_receipt(receipt, errors=DISCARD)
    assert (used["args"]["authorizer"], used["args"]["nonce"]) == (payer, message["nonce"])
    (transfer,) = token.events.Transfer().process_receipt(receipt, errors=DISCARD)
    assert dict(transfer["args"]) == {"from": payer, "to": payee, "value": 1_500_000}


def test_replay_is_refused(chain: DevChain, w3: Web3, token: Contract) -> None:
    payer_key = chain.payer_keys[0]
    payer, payee = address_of(payer_key), Account.create().address
    message = authorization(payer, payee, 1_000)
    signed = sign(payer_key, chain.eip712_domain(), "TransferWithAuthorization", message)
    call = token.functions.transferWithAuthorization(*args(message), signed.signature)
    assert send(w3, chain.relayer_key, call)["status"] == 1

    assert revert_reason(call) == "FiatTokenV2: authorization is used or canceled"
    assert send(w3, chain.relayer_key, call, gas=200_000)["status"] == 0
    assert chain.balance_of(payee) == 1_000


@pytest.mark.parametrize("form", ["bytes", "vrs"])
def test_receive_with_authorization_by_payee(
    form: str, chain: DevChain, w3: Web3, token: Contract, new_payer: Callable[..., str]
) -> None:
    payer_key = new_payer(2_000)
    payer = address_of(payer_key)
    message = authorization(payer, PAYEE.address, 2_000)
    signed = sign(payer_key, chain.eip712_domain(), "ReceiveWithAuthorization", message)
    signature = [signed.signature] if form == "bytes" else vrs(signed)
    payee_before = chain.balance_of(PAYEE.address)

    receipt = send(
        w3, PAYEE.key.to_0x_hex(), token.functions.receiveWithAuthorization(*args(message), *signature)
    )

    assert receipt["status"] == 1
    assert chain.balance_of(payer) == 0
    assert chain.balance_of(PAYEE.address) == payee_before + 2_000
    assert chain.authorization_state(payer, message["nonce"])


def test_receive_with_authorization_refuses_other_callers(chain: DevChain, token: Contract) -> None:
    payer_key = chain.payer_keys[0]
    message = authorization(address_of(payer_key), PAYEE.address, 1)
    signed = sign(payer_key, chain.eip712_domain(), "ReceiveWithAuthorization", message)
    # The relayer is not the payee, so it must not be able to front-run the payee's call.
    call = token.functions.receiveWithAuthorization(*args(message), signed.signature)
    assert revert_reason(call) == "FiatTokenV2: caller must be the payee"


def test_transfer_signature_is_not_a_receive_signature(chain: DevChain, token: Contract) -> None:
    payer_key = chain.payer_keys[0]
    message = authorization(address_of(payer_key), PAYEE.address, 1)
    signed = sign(payer_key, chain.eip712_domain(), "ReceiveWithAuthorization", message)
    call = token.functions.transferWithAuthorization(*args(message), signed.signature)
    assert revert_reason(call) == "FiatTokenV2: invalid signature"


@pytest.mark.parametrize("form", ["bytes", "vrs"])
def test_cancel_authorization(form: str, chain: DevChain, w3: Web3, token: Contract) -> None:
    payer_key = chain.payer_keys[0]
    payer = address_of(payer_key)
    message = authorization(payer, PAYEE.address, 1)
    cancel = {"authorizer": payer, "nonce": message["nonce"]}
    signed = sign(payer_key, chain.eip712_domain(), "CancelAuthorization", cancel)
    signature = [signed.signature] if form == "bytes" else vrs(signed)
    cancel_call = token.functions.cancelAuthorization(payer, message["nonce"], *signature)

    receipt = send(w3, chain.relayer_key, cancel_call)

    assert receipt["status"] == 1
    assert [log["topics"][0].hex() for log in receipt["logs"]] == [AUTHORIZATION_CANCELED_TOPIC]
    (canceled,) = token.events.AuthorizationCanceled().process_receipt(receipt, errors=DISCARD)
    assert (canceled["args"]["authorizer"], canceled["args"]["nonce"]) == (payer, message["nonce"])
    assert chain.authorization_state(payer, message["nonce"])
    transfer = sign(payer_key, chain.eip712_domain(), "TransferWithAuthorization", message)
    transfer_call = token.functions.transferWithAuthorization(*args(message), transfer.signature)
    assert revert_reason(transfer_call) == "FiatTokenV2: authorization is used or canceled"
    assert revert_reason(cancel_call) == "FiatTokenV2: authorization is used or canceled"


def test_cancel_requires_the_authorizer_signature(chain: DevChain, token: Contract) -> None:
    payer = address_of(chain.payer_keys[0])
    cancel = {"authorizer": payer, "nonce": secrets.token_bytes(32)}
    signed = sign(chain.payer_keys[1], chain.eip712_domain(), "CancelAuthorization", cancel)
    call = token.functions.cancelAuthorization(payer, cancel["nonce"], signed.signature)
    assert revert_reason(call) == "FiatTokenV2: invalid signature"


def test_time_window(chain: DevChain, w3: Web3, token: Contract) -> None:
    payer_key = chain.payer_keys[0]
    payer, now = address_of(payer_key), latest_timestamp(w3)

    def call_for(**window: int) -> ContractFunction:
        message = authorization(payer, PAYEE.address, 1, **window)
        signed = sign(payer_key, chain.eip712_domain(), "TransferWithAuthorization", message)
        return token.functions.transferWithAuthorization(*args(message), signed.signature)

    assert revert_reason(call_for(validBefore=now - 1)) == "FiatTokenV2: authorization is expired"
    assert revert_reason(call_for(validAfter=now + 3600)) == "FiatTokenV2: authorization is not yet valid"

    # Both bounds are strict: a block stamped exactly validAfter or validBefore refuses the transfer.
    at = now + 100
    for window, status in [({"validAfter": at}, 0), ({"validBefore": at}, 0), ({"validAfter": at - 1}, 1)]:
        chain.rpc.call("evm_setNextBlockTimestamp", [at])
        receipt = send(w3, chain.relayer_key, call_for(**window), gas=200_000)
        assert (receipt["status"], w3.eth.get_block(receipt["blockNumber"])["timestamp"]) == (status, at)
        at += 1


@pytest.mark.parametrize(
    "domain_change",
    [{"chainId": 8453}, {"name": "USD Coin"}, {"version": "1"}, {"verifyingContract": PAYEE.address}],
    ids=["chain-id", "name", "version", "contract"],
)
def test_wrong_domain_is_an_invalid_signature(
    domain_change: dict[str, Any], chain: DevChain, token: Contract
) -> None:
    payer_key = chain.payer_keys[0]
    message = authorization(address_of(payer_key), PAYEE.address, 1)
    signed = sign(payer_key, chain.eip712_domain() | domain_change, "TransferWithAuthorization", message)
    call = token.functions.transferWithAuthorization(*args(message), signed.signature)
    assert revert_reason(call) == "FiatTokenV2: invalid signature"


@pytest.mark.parametrize("signature", ["other-key", "truncated"])
def test_wrong_signer_is_an_invalid_signature(signature: str, chain: DevChain, token: Contract) -> None:
    message = authorization(address_of(chain.payer_keys[0]), PAYEE.address, 1)
    signed = sign(chain.payer_keys[1], chain.eip712_domain(), "TransferWithAuthorization", message)
    raw = signed.signature if signature == "other-key" else signed.signature[:64]
    call = token.functions.transferWithAuthorization(*args(message), raw)
    assert revert_reason(call) == "FiatTokenV2: invalid signature"


def test_insufficient_balance(chain: DevChain, token: Contract) -> None:
    payer_key = chain.payer_keys[0]
    payer = address_of(payer_key)
    message = authorization(payer, PAYEE.address, chain.balance_of(payer) + 1)
    signed = sign(payer_key, chain.eip712_domain(), "TransferWithAuthorization", message)
    call = token.functions.transferWithAuthorization(*args(message), signed.signature)
    assert revert_reason(call) == "ERC20: transfer amount exceeds balance"


def test_transfer_to_zero_address(chain: DevChain, token: Contract) -> None:
    payer_key = chain.payer_keys[0]
    message = authorization(address_of(payer_key), "0x" + "00" * 20, 1)
    signed = sign(payer_key, chain.eip712_domain(), "TransferWithAuthorization", message)
    call = token.functions.transferWithAuthorization(*args(message), signed.signature)
    assert revert_reason(call) == "ERC20: transfer to the zero address"


def test_erc1271_wallet_pays(chain: DevChain, w3: Web3, token: Contract) -> None:
    wallet, payee = chain.erc1271_wallet, Account.create().address
    wallet_before = chain.balance_of(wallet)
    message = authorization(wallet, payee, 700)
    # The wallet's owner signs; the token asks the wallet contract, not ECDSA, since `from` has code.
    signed = sign(chain.erc1271_wallet_owner_key, chain.eip712_domain(), "TransferWithAuthorization", message)
    call = token.functions.transferWithAuthorization(*args(message), signed.signature)

    assert send(w3, chain.relayer_key, call)["status"] == 1
    assert (chain.balance_of(wallet), chain.balance_of(payee)) == (wallet_before - 700, 700)


def test_erc1271_wallet_refuses_other_signers(chain: DevChain, token: Contract) -> None:
    message = authorization(chain.erc1271_wallet, PAYEE.address, 1)
    signed = sign(chain.payer_keys[0], chain.eip712_domain(), "TransferWithAuthorization", message)
    call = token.functions.transferWithAuthorization(*args(message), signed.signature)
    assert revert_reason(call) == "FiatTokenV2: invalid signature"


def test_only_the_owner_mints(chain: DevChain, token: Contract) -> None:
    with pytest.raises(ContractLogicError) as excinfo:
        token.functions.mint(RELAYER.address, 1).call({"from": RELAYER.address})
    # OpenZeppelin's OwnableUnauthorizedAccount(address).
    assert str(excinfo.value.data).startswith("0x118cdaa7")
    chain.mint(RELAYER.address, 1)
    assert chain.balance_of(RELAYER.address) == 1


@pytest.mark.parametrize("refused", ["payer", "payee"])
@pytest.mark.parametrize("form", ["bytes", "vrs"])
def test_a_blacklisted_party_cannot_pay_or_be_paid(
    form: str, refused: str, chain: DevChain, token: Contract
) -> None:
    payer_key = chain.payer_keys[0]
    message = authorization(address_of(payer_key), PAYEE.address, 1)
    signed = sign(payer_key, chain.eip712_domain(), "TransferWithAuthorization", message)
    signature = [signed.signature] if form == "bytes" else vrs(signed)
    call = token.functions.transferWithAuthorization(*args(message), *signature)
    assert not token.functions.isBlacklisted(message["from"]).call()

    chain.set_blacklisted(message["from"] if refused == "payer" else PAYEE.address, True)

    assert revert_reason(call) == "Blacklistable: account is blacklisted"
    blocked = address_of(payer_key) if refused == "payer" else PAYEE.address
    assert token.functions.isBlacklisted(blocked).call()
    chain.set_blacklisted(blocked, False)
    call.call({"from": RELAYER.address})  # lifted: the same authorization would pay again


def test_a_paused_token_refuses_every_transfer_and_cancel(chain: DevChain, token: Contract) -> None:
    payer_key = chain.payer_keys[0]
    payer = address_of(payer_key)
    message = authorization(payer, PAYEE.address, 1)
    signed = sign(payer_key, chain.eip712_domain(), "TransferWithAuthorization", message)
    cancel = sign(
        payer_key,
        chain.eip712_domain(),
        "CancelAuthorization",
        {"authorizer": payer, "nonce": message["nonce"]},
    )

    chain.set_paused(True)

    assert token.functions.paused().call()
    for call in (
        token.functions.transferWithAuthorization(*args(message), signed.signature),
        token.functions.cancelAuthorization(payer, message["nonce"], cancel.signature),
        token.functions.transfer(PAYEE.address, 1),
    ):
        with pytest.raises(ContractLogicError, match="Pausable: paused"):
            call.call({"from": payer})
    chain.set_paused(False)
    assert not token.functions.paused().call()


def test_only_the_pauser_and_the_blacklister_hold_their_roles(chain: DevChain, token: Contract) -> None:
    deployer = address_of(chain.deployer_key)
    assert (token.functions.pauser().call(), token.functions.blacklister().call()) == (deployer, deployer)
    assert revert_reason(token.functions.pause()) == "Pausable: caller is not the pauser"
    assert revert_reason(token.functions.blacklist(PAYEE.address)) == (
        "Blacklistable: caller is not the blacklister"
    )


def test_the_factory_deploys_a_wallet_at_its_counterfactual_address(
    chain: DevChain, w3: Web3, token: Contract
) -> None:
    owner = Account.create()
    salt = secrets.token_bytes(32)
    wallet = w3.to_checksum_address(chain.counterfactual_wallet(owner.address, salt))
    factory_address = w3.to_checksum_address(chain.wallet_factory)
    factory = w3.eth.contract(address=factory_address, abi=load_artifact("WalletFactory").abi)
    create = factory.functions.createWallet(owner.address, salt)
    assert w3.eth.get_code(wallet) == b""

    assert send(w3, chain.relayer_key, create)["status"] == 1
    assert send(w3, chain.relayer_key, create)["status"] == 1  # a second call is a no-op, not a revert

    deployed = w3.eth.contract(address=wallet, abi=load_artifact("SmartWallet").abi)
    assert deployed.functions.owner().call() == owner.address
    chain.mint(wallet, 700)
    message = authorization(wallet, PAYEE.address, 700)
    signed = sign(owner.key.to_0x_hex(), chain.eip712_domain(), "TransferWithAuthorization", message)
    pay = token.functions.transferWithAuthorization(*args(message), signed.signature)
    assert send(w3, chain.relayer_key, pay)["status"] == 1

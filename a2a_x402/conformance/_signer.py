"""Signing the kit's payments, within what the card allows.

The kit pays with a real key, so it signs only what a careful client would: an asset, network and payTo
the card lists (a payTo of any tenant on that network, for the wrong-payTo check), and never more than the
offered amount or the operator's ``max_amount``. Terms outside that raise ``UnsafeTerms`` and the check
fails without anything signed. Variants (a shorter value, another window, a damaged signature, an
``accepted`` edited after signing) are made here so each check states only what it changes.
"""

from __future__ import annotations

import copy
import os
import time
from dataclasses import dataclass
from typing import Any

from eth_account import Account
from eth_utils.address import is_hex_address, to_checksum_address

from a2a_x402.facilitator.wire import chain_id_from_v1_network

from ._card import Discovery
from ._chain import PERMIT2_ADDRESS

__all__ = ["Guarded", "Signed", "Signer", "UnsafeTerms", "payload_v1", "payload_v2"]

JSON = Any
_TYPES = {
    "TransferWithAuthorization": [
        {"name": "from", "type": "address"},
        {"name": "to", "type": "address"},
        {"name": "value", "type": "uint256"},
        {"name": "validAfter", "type": "uint256"},
        {"name": "validBefore", "type": "uint256"},
        {"name": "nonce", "type": "bytes32"},
    ]
}


class UnsafeTerms(Exception):
    """Terms the kit will not sign for: outside the card, or over the amount allowed."""


@dataclass(frozen=True, slots=True)
class Signed:
    """A signed authorization: its x402 ``payload`` member and what identifies it on chain."""

    authorization: JSON
    signature: str
    payer: str
    nonce: str
    asset: str
    value: int
    pay_to: str
    permit2: bool = False
    """A Permit2 witness transfer (its ``authorization`` is ``permit2Authorization``; the nonce, in 0x hex,
    is Permit2's), not an EIP-3009 authorization."""

    @property
    def nonce_at(self) -> str:
        """Where the nonce is kept on chain: the EIP-3009 token, or Permit2."""
        return PERMIT2_ADDRESS if self.permit2 else self.asset


@dataclass(frozen=True, slots=True)
class Guarded:
    """What the kit may sign for an entry, checked against the card and the caps."""

    chain_id: int
    asset: str
    pay_to: str
    """The recipient, checksummed: the entry's payTo, or another the card lists."""
    value: int
    window_s: int
    """How long the authorization stays valid from now, in seconds."""


def _chain_id(network: str) -> int:
    if network.startswith("eip155:") and network[7:].isdigit():
        return int(network[7:])
    return chain_id_from_v1_network(network)


class Signer:
    """Signs EIP-3009 authorizations with one key, guarded by the card's declaration (and holds the key
    for what else the kit signs: Permit2 witness transfers, its approval of Permit2)."""

    def __init__(self, key: str, discovery: Discovery, *, max_amount: int) -> None:
        self._key = key
        self.address: str = Account.from_key(key).address
        self._discovery = discovery
        self._max_amount = max_amount

    def with_key(self, key: str) -> Signer:
        """The same guards for another key (the unfunded payer)."""
        return Signer(key, self._discovery, max_amount=self._max_amount)

    def guard(
        self,
        entry: JSON,
        *,
        tenant: str,
        network: str,
        amount: int,
        value: int | None = None,
        to: str | None = None,
        caip2: str | None = None,
    ) -> Guarded:
        """What the kit may sign for ``entry``: its chain, asset, recipient, value and validity window.

        Raises:
            UnsafeTerms: the entry is outside the card, or the value is over the offered amount or the cap.
        """
        pay_to, asset = entry.get("payTo"), entry.get("asset")
        if not (
            isinstance(pay_to, str)
            and is_hex_address(pay_to)
            and isinstance(asset, str)
            and is_hex_address(asset)
        ):
            raise UnsafeTerms("the entry's payTo or asset is not an address")
        caip2 = caip2 or network
        refusal = self._discovery.allows(caip2, asset, pay_to, tenant)
        if refusal:
            raise UnsafeTerms(f"the kit does not sign terms the card does not allow: {refusal}")
        recipient = to_checksum_address(to or pay_to)
        if recipient not in self._discovery.listed_pay_tos(caip2):
            raise UnsafeTerms(f"the kit does not sign to {recipient}: the card does not list it")
        value = amount if value is None else value
        if value > amount or value > self._max_amount or value <= 0:
            raise UnsafeTerms(
                f"the kit does not sign for {value}: over the offered {amount} or the cap {self._max_amount}"
            )
        try:
            chain_id = _chain_id(network)
            timeout = int(entry.get("maxTimeoutSeconds", 300))
        except (ValueError, TypeError) as error:
            raise UnsafeTerms(f"the entry's network or maxTimeoutSeconds is unusable: {error}") from None
        # Bounded both ways: a window too short to settle in, or one the payer cannot take back for hours.
        return Guarded(chain_id, to_checksum_address(asset), recipient, value, min(max(timeout, 30), 3600))

    def sign_typed(self, domain: JSON, types: JSON, message: JSON) -> bytes:
        """The payer's EIP-712 signature of ``message`` (for a signer beside this one: Permit2's)."""
        return bytes(Account.sign_typed_data(self._key, domain, types, message).signature)

    def sign_transaction(self, transaction: JSON) -> str:
        """The payer's signed ``transaction``, 0x hex, ready for ``eth_sendRawTransaction``."""
        return "0x" + bytes(Account.sign_transaction(transaction, self._key).raw_transaction).hex()

    def sign(
        self,
        entry: JSON,
        *,
        tenant: str,
        network: str,
        amount: int,
        value: int | None = None,
        to: str | None = None,
        valid_after: int | None = None,
        valid_before: int | None = None,
        damage: bool = False,
        caip2: str | None = None,
    ) -> Signed:
        """Sign an EIP-3009 authorization for ``entry`` (``network`` is its network as written, ``caip2``
        the CAIP-2 form of it).

        Raises:
            UnsafeTerms: the entry is outside the card, or the value is over the offered amount or the cap.
        """
        extra = entry.get("extra")
        if (
            not isinstance(extra, dict)
            or not isinstance(extra.get("name"), str)
            or not isinstance(extra.get("version"), str)
        ):
            raise UnsafeTerms(
                "the entry does not name the token's EIP-712 domain (extra.name, extra.version)"
            )
        guarded = self.guard(
            entry, tenant=tenant, network=network, amount=amount, value=value, to=to, caip2=caip2
        )
        now = int(time.time())
        nonce_bytes = os.urandom(32)
        message: dict[str, Any] = {
            "from": self.address,
            "to": guarded.pay_to,
            "value": guarded.value,
            "validAfter": now - 60 if valid_after is None else valid_after,
            "validBefore": now + guarded.window_s if valid_before is None else valid_before,
            "nonce": nonce_bytes,
        }
        domain = {
            "name": extra["name"],
            "version": extra["version"],
            "chainId": guarded.chain_id,
            "verifyingContract": guarded.asset,
        }
        signature = bytearray(self.sign_typed(domain, _TYPES, message))
        if damage:
            signature[10] ^= 0xFF
        nonce = "0x" + nonce_bytes.hex()
        authorization = {
            "from": self.address,
            "to": guarded.pay_to,
            "value": str(guarded.value),
            "validAfter": str(message["validAfter"]),
            "validBefore": str(message["validBefore"]),
            "nonce": nonce,
        }
        return Signed(
            authorization,
            "0x" + signature.hex(),
            self.address,
            nonce,
            guarded.asset,
            guarded.value,
            guarded.pay_to,
        )


def payload_v2(entry: JSON, signed: Signed, *, accepted_changes: JSON = None) -> JSON:
    """The x402 v2 ``PaymentPayload``: ``accepted`` is the offered entry member for member (then changed)."""
    accepted = copy.deepcopy(entry)
    accepted.update(accepted_changes or {})
    form = "permit2Authorization" if signed.permit2 else "authorization"
    return {
        "x402Version": 2,
        "accepted": accepted,
        "payload": {"signature": signed.signature, form: signed.authorization},
    }


def payload_v1(entry: JSON, signed: Signed) -> JSON:
    """The x402 v1 ``PaymentPayload`` for a v1 entry."""
    return {
        "x402Version": 1,
        "scheme": entry.get("scheme"),
        "network": entry.get("network"),
        "payload": {"signature": signed.signature, "authorization": signed.authorization},
    }

"""The facilitator core: verify and settle exact-scheme EIP-3009 payments on one EVM chain, exactly once.

This is the one implementation behind both the HTTP service and the merchant's in-process use. Its
answers are x402 v2 `VerifyResponse` / `SettleResponse` documents; a payment that fails a check is an
answer (`isValid: false`, `success: false`), never an exception.

Settling, in order: checks without chain access; an existing claim for the authorization or the
idempotency key short-circuits to its answer; chain checks in one RPC batch; the durable claim; the
broadcast; a bounded wait for the receipt at the configured depth. A settlement still unconfirmed at the
deadline is answered `settlement_pending` with its transaction hash; a later settle with the same
idempotency key, or a status call, finishes it.
"""

from __future__ import annotations

import hashlib
import logging
import re
import time
from typing import Any, Self

import orjson
from sqlalchemy.ext.asyncio import AsyncEngine

from storage import create_engine, ensure_schema_current

from ._claims import Claim, ClaimKey, ClaimState, ClaimStore
from ._config import FacilitatorSettings
from ._errors import (
    ChainError,
    ChainMismatchError,
    IdempotencyConflictError,
    InvalidIdempotencyKeyError,
    PaymentInvalidError,
    RpcError,
)
from ._receipts import ReceiptWatcher
from ._relayer import Relayer
from ._rpc import RpcCall, RpcClient
from ._token import Authorization, decode_bool, encode_authorization_state, transfer_logs
from ._verify import Terms, VerifiedPayment, Verifier
from .wire import (
    PaymentPayload,
    PaymentRequirements,
    Reason,
    SettleResponse,
    SupportedKind,
    SupportedResponse,
    VerifyResponse,
    v1_network_from_chain_id,
)

__all__ = ["Facilitator"]

logger = logging.getLogger(__name__)

_PAYMENT_IDENTIFIER = re.compile(r"^[A-Za-z0-9_-]{16,128}$")
_IDEMPOTENCY_KEY = re.compile(r"^[\x21-\x7e]{1,255}$")


class Facilitator:
    """Verifies and settles payments on the chain of its RPC node. Safe for concurrent use."""

    def __init__(
        self,
        *,
        rpc: RpcClient,
        claims: ClaimStore,
        relayer: Relayer,
        network: str,
        confirmations: int = 1,
        receipt_timeout_s: float = 20.0,
        validity_margin_s: int = 6,
        gas_limit_cap: int = 300_000,
        receipt_poll_s: float = 0.003,
    ):
        self.network = network
        self.chain_id = int(network.split(":", 1)[1])
        self._rpc = rpc
        self._claims = claims
        self._relayer = relayer
        self._confirmations = confirmations
        self._receipt_timeout_s = receipt_timeout_s
        self._gas_limit_cap = gas_limit_cap
        self._verifier = Verifier(rpc, chain_id=self.chain_id, relayer=relayer.address, validity_margin_s=validity_margin_s)
        self._watcher = ReceiptWatcher(rpc, poll_interval_s=receipt_poll_s)
        self._owned_engine: AsyncEngine | None = None

    @classmethod
    async def open(cls, settings: FacilitatorSettings, *, engine: AsyncEngine | None = None) -> Self:
        """Connect to the node and the claim store; refuse to start on a wrong chain or an old schema.

        Raises:
            ChainMismatchError: the node's eth_chainId is not the configured network's.
            storage.SchemaOutdatedError: the claim store was not migrated.
        """
        await ensure_schema_current(settings.database_url, "facilitator")
        rpc = RpcClient(settings.rpc_url, timeout_s=settings.rpc_timeout_s)
        try:
            node_chain_id = int(await rpc.call("eth_chainId"), 16)
            if node_chain_id != settings.chain_id:
                raise ChainMismatchError(
                    f"the RPC node serves chain {node_chain_id}, but X402_NETWORK is {settings.network}"
                )
            relayer = Relayer(rpc, settings.relayer_private_key(), settings.chain_id)
        except BaseException:
            await rpc.aclose()
            raise
        owned = engine is None
        engine = engine or create_engine(settings.database_url)
        facilitator = cls(
            rpc=rpc,
            claims=ClaimStore(engine, lease_s=settings.claim_lease_s),
            relayer=relayer,
            network=settings.network,
            confirmations=settings.confirmations,
            receipt_timeout_s=settings.receipt_timeout_s,
            validity_margin_s=settings.validity_margin_s,
            gas_limit_cap=settings.gas_limit_cap,
            receipt_poll_s=settings.receipt_poll_s,
        )
        facilitator._owned_engine = engine if owned else None
        return facilitator

    async def aclose(self) -> None:
        """Stop background work and close connections this facilitator opened."""
        await self._watcher.aclose()
        await self._rpc.aclose()
        if self._owned_engine is not None:
            await self._owned_engine.dispose()

    @property
    def relayer_address(self) -> str:
        """The account that pays gas for settlements."""
        return self._relayer.address

    async def head_block(self) -> int:
        """The node's latest block number (a liveness probe)."""
        return int(await self._rpc.call("eth_blockNumber"), 16)

    def supported(self) -> SupportedResponse:
        """The kinds this facilitator verifies and settles, and its signer."""
        kinds = [SupportedKind(x402_version=2, scheme="exact", network=self.network)]
        try:
            kinds.append(SupportedKind(x402_version=1, scheme="exact", network=v1_network_from_chain_id(self.chain_id)))
        except ValueError:
            pass  # a chain without a legacy v1 name is offered to v2 clients only
        return SupportedResponse(
            kinds=tuple(kinds),
            extensions=("payment-identifier",),
            signers={"eip155:*": (self._relayer.address,)},
        )

    async def verify(self, payload: PaymentPayload, requirements: PaymentRequirements) -> VerifyResponse:
        """Check `payload` against `requirements` without changing anything anywhere."""
        payer = payload.payload.authorization.from_address
        try:
            authorization, terms = self._read(payload, requirements)
            eoa = self._verifier.check_offline(authorization, terms)
            await self._verifier.check_onchain(authorization, terms, eoa_signature=eoa)
        except PaymentInvalidError as exc:
            return VerifyResponse(is_valid=False, invalid_reason=exc.reason, invalid_message=exc.message, payer=payer)
        except ChainError as exc:
            logger.warning("verify could not reach the chain: %s", exc)
            return VerifyResponse(
                is_valid=False,
                invalid_reason=Reason.UNEXPECTED_VERIFY_ERROR,
                invalid_message="the chain could not be reached; try again",
                payer=payer,
            )
        return VerifyResponse(is_valid=True, payer=payer)

    async def settle(
        self,
        payload: PaymentPayload,
        requirements: PaymentRequirements,
        *,
        idempotency_key: str | None = None,
        timeout_s: float | None = None,
    ) -> SettleResponse:
        """Settle `payload` on chain at most once; see the module docstring for the sequence.

        `idempotency_key` (or the payload's `payment-identifier` extension id) makes retries safe: the same
        key gets the first answer again, the transaction hash included.

        Raises:
            IdempotencyConflictError: the key was first used for a different payment.
            InvalidIdempotencyKeyError: the key is not 1 to 255 printable ASCII characters.
        """
        deadline = time.monotonic() + min(timeout_s or self._receipt_timeout_s, self._receipt_timeout_s)
        key_text = _idempotency_key(idempotency_key, payload)
        payer = payload.payload.authorization.from_address
        try:
            authorization, terms = self._read(payload, requirements)
            eoa = self._verifier.check_offline(authorization, terms)
        except PaymentInvalidError as exc:
            return self._failure(exc.reason, exc.message, payer)
        key = ClaimKey(self.chain_id, terms.asset, authorization.from_, "0x" + authorization.nonce.hex())
        payload_hash = _payload_hash(payload, requirements)
        existing = await self._existing_claim(key, key_text)
        if existing is not None:
            return await self._answer_existing(existing, key, key_text, payload_hash, authorization, terms, eoa, deadline)
        try:
            verified = await self._verifier.check_onchain(authorization, terms, eoa_signature=eoa)
        except PaymentInvalidError as exc:
            return self._failure(exc.reason, exc.message, payer)
        except ChainError as exc:
            logger.warning("settle could not reach the chain: %s", exc)
            return self._failure(Reason.UNEXPECTED_SETTLE_ERROR, "the chain could not be reached; try again", payer)
        claim, created = await self._claims.claim(
            key,
            idempotency_key=key_text,
            payload_hash=payload_hash,
            network=self.network,
            pay_to=terms.pay_to,
            amount=terms.amount,
            valid_before=authorization.valid_before,
        )
        if not created:
            return await self._answer_existing(claim, key, key_text, payload_hash, authorization, terms, eoa, deadline)
        return await self._broadcast(claim, verified, deadline)

    async def settlement_status(
        self, payload: PaymentPayload, requirements: PaymentRequirements, *, timeout_s: float = 0.0
    ) -> SettleResponse | None:
        """The settlement answer for this authorization, finishing a pending one; None if never claimed."""
        try:
            authorization, terms = self._read(payload, requirements)
        except PaymentInvalidError:
            return None
        claim = await self._claims.by_key(ClaimKey(self.chain_id, terms.asset, authorization.from_, "0x" + authorization.nonce.hex()))
        if claim is None:
            return None
        if claim.state is ClaimState.BROADCAST:
            return await self._await_outcome(claim, claim.tx_hash or "", time.monotonic() + timeout_s)
        if claim.response is not None:
            return SettleResponse.from_wire(claim.response)
        return self._pending(claim)

    # -- claims ---------------------------------------------------------------------------------------

    async def _existing_claim(self, key: ClaimKey, key_text: str | None) -> Claim | None:
        claim = await self._claims.by_key(key)
        if claim is None and key_text is not None:
            claim = await self._claims.by_idempotency_key(key_text)
        return claim

    async def _answer_existing(
        self,
        claim: Claim,
        key: ClaimKey,
        key_text: str | None,
        payload_hash: str,
        authorization: Authorization,
        terms: Terms,
        eoa: bool,
        deadline: float,
    ) -> SettleResponse:
        same_key = key_text is not None and claim.idempotency_key == key_text
        if same_key and (claim.key != key or claim.payload_hash != payload_hash):
            raise IdempotencyConflictError("this idempotency key was first used for a different payment")
        if claim.key != key:
            raise IdempotencyConflictError("this idempotency key was first used for a different authorization")
        abandoned = claim.state is ClaimState.CLAIMED and claim.lease_expired and not await self._used_on_chain(claim)
        if claim.state is ClaimState.RELEASED or abandoned:
            return await self._retry(claim, key_text, payload_hash, authorization, terms, eoa, deadline)
        if not same_key:
            return self._duplicate(claim)
        if claim.state is ClaimState.BROADCAST:
            return await self._await_outcome(claim, claim.tx_hash or "", deadline)
        if claim.response is None:
            answered = await self._claims.wait_for_response(claim.id, max(deadline - time.monotonic(), 0.0))
            if answered is None:
                return self._pending(claim)
            claim = answered
            if claim.state is ClaimState.RELEASED and claim.response is None:
                return self._pending(claim)
        return SettleResponse.from_wire(claim.response or {})

    async def _retry(
        self,
        claim: Claim,
        key_text: str | None,
        payload_hash: str,
        authorization: Authorization,
        terms: Terms,
        eoa: bool,
        deadline: float,
    ) -> SettleResponse:
        """Settle an authorization whose earlier claim ended before any broadcast."""
        try:
            verified = await self._verifier.check_onchain(authorization, terms, eoa_signature=eoa)
        except PaymentInvalidError as exc:
            return self._failure(exc.reason, exc.message, authorization.from_)
        except ChainError:
            return self._failure(Reason.UNEXPECTED_SETTLE_ERROR, "the chain could not be reached; try again", authorization.from_)
        taken = await self._claims.take_over(claim, idempotency_key=key_text, payload_hash=payload_hash)
        if taken is None:
            current = await self._claims.get(claim.id)
            return self._duplicate(current or claim)
        return await self._broadcast(taken, verified, deadline)

    async def _used_on_chain(self, claim: Claim) -> bool:
        """Whether the authorization of a silent claim is already used (its owner may have broadcast it)."""
        try:
            used = await self._rpc.call(
                "eth_call",
                {"to": claim.asset, "data": encode_authorization_state(claim.payer, bytes.fromhex(claim.nonce[2:]))},
                "pending",
            )
        except ChainError:
            return True
        return decode_bool(used)

    # -- chain ----------------------------------------------------------------------------------------

    async def _broadcast(self, claim: Claim, verified: VerifiedPayment, deadline: float) -> SettleResponse:
        payer = verified.authorization.from_
        gas = min(self._gas_limit_cap, verified.gas_estimate * 5 // 4 + 10_000)
        if verified.gas_estimate > self._gas_limit_cap:
            response = self._failure(
                Reason.INVALID_EXACT_EVM_TRANSACTION_SIMULATION_FAILED, "the transfer needs more gas than allowed", payer
            )
            await self._claims.record_response(claim.id, response.to_json_dict(), state=ClaimState.RELEASED)
            return response
        try:
            sent = await self._relayer.send(claim.asset, verified.calldata, gas)
        except ChainError as exc:
            logger.warning("broadcast of claim %s failed: %s", claim.id, exc)
            response = self._failure(
                Reason.TRANSACTION_FAILED if isinstance(exc, RpcError) else Reason.UNEXPECTED_SETTLE_ERROR,
                "the settlement transaction could not be submitted; nothing was charged",
                payer,
            )
            await self._claims.record_response(claim.id, response.to_json_dict(), state=ClaimState.RELEASED)
            return response
        logger.info("claim %s broadcast as %s (relayer nonce %d)", claim.id, sent.tx_hash, sent.nonce)
        await self._claims.mark_broadcast(
            claim.id, relayer=sent.sender, relayer_nonce=sent.nonce, tx_hash=sent.tx_hash, raw_tx=sent.raw
        )
        return await self._await_outcome(claim, sent.tx_hash, deadline)

    async def _await_outcome(self, claim: Claim, tx_hash: str, deadline: float) -> SettleResponse:
        receipt = await self._watcher.wait(
            tx_hash, confirmations=self._confirmations, timeout_s=max(deadline - time.monotonic(), 0.0)
        )
        if receipt is None:
            response = self._pending(claim, tx_hash)
            await self._claims.record_response(claim.id, response.to_json_dict())
            return response
        changes: dict[str, Any] = {"block_number": receipt.block_number, "block_hash": receipt.block_hash}
        if receipt.status != 1:
            response = self._failure(
                Reason.TRANSACTION_FAILED, "the settlement transaction reverted", claim.payer, transaction=tx_hash
            )
            changes.update(state=ClaimState.FAILED, error_reason=Reason.TRANSACTION_FAILED.value)
        elif not any(
            log.token == claim.asset and log.from_ == claim.payer and log.to == claim.pay_to and log.value == claim.amount
            for log in transfer_logs(receipt.raw)
        ):
            response = self._failure(
                Reason.INVALID_EXACT_EVM_TRANSFER_EVENT_MISMATCH,
                "the transaction did not transfer the authorized amount",
                claim.payer,
                transaction=tx_hash,
            )
            changes.update(state=ClaimState.FAILED, error_reason=Reason.INVALID_EXACT_EVM_TRANSFER_EVENT_MISMATCH.value)
        else:
            response = SettleResponse(
                success=True,
                payer=claim.payer,
                transaction=tx_hash,
                network=self.network,
                amount=claim.amount,
                extensions={"settlement": {"blockNumber": receipt.block_number, "confirmations": self._confirmations}},
            )
            changes.update(state=ClaimState.SUCCEEDED)
            logger.info("claim %s settled in block %d", claim.id, receipt.block_number)
        await self._claims.record_response(claim.id, response.to_json_dict(), **changes)
        return response

    # -- answers --------------------------------------------------------------------------------------

    def _failure(self, reason: str, message: str, payer: str, *, transaction: str = "") -> SettleResponse:
        return SettleResponse(
            success=False, error_reason=reason, error_message=message, payer=payer, transaction=transaction, network=self.network
        )

    def _pending(self, claim: Claim, tx_hash: str | None = None) -> SettleResponse:
        return self._failure(
            Reason.SETTLEMENT_PENDING,
            "the settlement is broadcast but not yet confirmed; ask again with the same idempotency key",
            claim.payer,
            transaction=tx_hash or claim.tx_hash or "",
        )

    def _duplicate(self, claim: Claim) -> SettleResponse:
        response = self._failure(
            Reason.DUPLICATE_SETTLEMENT, "this authorization was already presented for settlement", claim.payer
        )
        original = {"state": claim.state.value, "transaction": claim.tx_hash or ""}
        return response.model_copy(update={"extensions": {"originalSettlement": original}})

    # -- reading the request --------------------------------------------------------------------------

    def _read(self, payload: PaymentPayload, requirements: PaymentRequirements) -> tuple[Authorization, Terms]:
        """The authorization and terms of a request, after the checks that need neither chain nor clock."""
        if requirements.scheme != "exact" or payload.accepted.scheme != "exact":
            raise PaymentInvalidError(Reason.UNSUPPORTED_SCHEME, "only the exact scheme is supported")
        if requirements.network != self.network:
            raise PaymentInvalidError(Reason.INVALID_NETWORK, f"this facilitator settles on {self.network} only")
        if payload.accepted.network != requirements.network:
            raise PaymentInvalidError(Reason.NETWORK_MISMATCH, "the payment was made for another network")
        if payload.accepted != requirements:
            raise PaymentInvalidError(
                Reason.INVALID_EXACT_EVM_ACCEPTED_MISMATCH, "the accepted terms differ from the requirements"
            )
        return self._read_unchecked(payload, requirements)

    def _read_unchecked(
        self, payload: PaymentPayload, requirements: PaymentRequirements
    ) -> tuple[Authorization, Terms]:
        extra = requirements.extra or {}
        name, version = extra.get("name"), extra.get("version")
        if not isinstance(name, str) or not isinstance(version, str):
            raise PaymentInvalidError(Reason.MISSING_EIP712_DOMAIN, "requirements.extra needs the token's name and version")
        wire = payload.payload.authorization
        authorization = Authorization(
            from_=wire.from_address,
            to=wire.to,
            value=wire.value,
            valid_after=wire.valid_after,
            valid_before=wire.valid_before,
            nonce=bytes.fromhex(wire.nonce[2:]),
            signature=bytes.fromhex(payload.payload.signature[2:]),
        )
        terms = Terms(
            network=requirements.network,
            chain_id=requirements.chain_id,
            asset=requirements.asset,
            pay_to=requirements.pay_to,
            amount=requirements.amount,
            token_name=name,
            token_version=version,
        )
        return authorization, terms


def _payload_hash(payload: PaymentPayload, requirements: PaymentRequirements) -> str:
    document = {"payload": payload.to_json_dict(), "requirements": requirements.to_json_dict()}
    return hashlib.sha256(orjson.dumps(document, option=orjson.OPT_SORT_KEYS)).hexdigest()


def _idempotency_key(explicit: str | None, payload: PaymentPayload) -> str | None:
    """The caller's idempotency key, else the x402 `payment-identifier` extension's id, else None."""
    if explicit is not None:
        if not _IDEMPOTENCY_KEY.match(explicit):
            raise InvalidIdempotencyKeyError("an idempotency key is 1 to 255 printable ASCII characters")
        return explicit
    info = ((payload.extensions or {}).get("payment-identifier") or {}).get("info")
    identifier = info.get("id") if isinstance(info, dict) else None
    if isinstance(identifier, str) and _PAYMENT_IDENTIFIER.match(identifier):
        return "payment-identifier:" + identifier
    return None

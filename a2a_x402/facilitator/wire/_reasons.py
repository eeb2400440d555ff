"""The x402 reason codes this project emits in `invalidReason` / `errorReason`.

One vocabulary: every code is either in the x402 v2 specification's error registry (§9) or a constant
of the x402 Python SDK 2.25 (which we follow where the three SDKs spell a code differently), so that
clients built on either recognise it; a few Permit2 checks the Python SDK names only with a literal, or
does not make, take the constant of the TypeScript SDK (`@x402/evm` 2.27), which any literal matches.
Nothing is coined here: where we know more than a code can say (which field differs, which transaction
settled it first), the answer says it in `invalidMessage` / `errorMessage` or under `extensions`. Every
member's name is its value upper-cased, so a code seen in a log can be found in the source by grepping
either spelling.

Parsing (raised as `WireError.reason`, answered as `isValid: false` / `success: false`):

    invalid_payload                    the payment payload (or a facilitator body) is malformed
    invalid_payment_requirements       the payment requirements are malformed
    invalid_x402_version               x402Version is missing, not an integer, unknown, or inconsistent
    invalid_network                    a network that is not eip155:<chainId> or has no v1 name

Verification, cheapest checks first:

    unsupported_scheme                 the scheme is not "exact"
    network_mismatch                   payload network differs from the requirements' network
    missing_eip712_domain              requirements.extra lacks the EIP-712 `name` / `version`
    invalid_exact_evm_payload_recipient_mismatch
                                       authorization.to (or accepted.payTo) is not requirements.payTo
    invalid_exact_evm_payload_authorization_value_mismatch
                                       authorization.value (or accepted.amount) is not exactly
                                       requirements.amount
    invalid_exact_evm_payload_authorization_valid_before
                                       validBefore has passed (or is too close to now)
    invalid_exact_evm_payload_authorization_valid_after
                                       validAfter is still in the future
    invalid_exact_evm_payload_signature
                                       the signature does not recover to authorization.from
    invalid_exact_evm_payload_undeployed_smart_wallet
                                       a non-EOA signature for an address without code, not ERC-6492
                                       wrapped (or the chain has no Multicall3 to deploy it with)
    eip6492_factory_not_allowed        an ERC-6492 signature of a wallet without code names a factory
                                       this facilitator does not deploy through (X402_ERC6492_FACTORIES)
    smart_wallet_deployment_failed     an ERC-6492 factory call reverts or deploys no wallet at `from`
    asset_not_deployed_contract        the asset address has no bytecode
    invalid_exact_evm_nonce_already_used
                                       the token reports the authorization nonce as used
    invalid_exact_evm_insufficient_balance
                                       the payer's balance is below the value
    invalid_exact_evm_token_name_mismatch / invalid_exact_evm_token_version_mismatch
                                       extra.name / extra.version differ from the token's domain
    invalid_exact_evm_eip3009_not_supported
                                       the token does not implement EIP-3009
    invalid_exact_evm_transaction_simulation_failed
                                       the simulated transfer reverted for another reason

Verification of a Permit2 witness transfer (`exact` by Permit2, and `upto`), in the SDKs' spellings:

    invalid_permit2_spender            the spender signed is not the x402 proxy of the scheme
    invalid_permit2_recipient_mismatch witness.to is not requirements.payTo
    upto_facilitator_mismatch          witness.facilitator is not an address this facilitator settles from
    permit2_token_mismatch             permitted.token is not requirements.asset
    permit2_amount_mismatch            permitted.amount is not the required amount (`upto`: the maximum)
    invalid_upto_evm_payload_settlement_exceeds_amount
                                       an `upto` settlement asks for more than the payer permitted
    permit2_deadline_expired           the deadline has passed (or is too close to now)
    permit2_not_yet_valid              witness.validAfter is still in the future
    permit2_invalid_owner              `from` is the zero address
    permit2_invalid_destination        witness.to is the zero address
    invalid_permit2_signature          the signature does not recover to `from`
    permit2_proxy_not_deployed         Permit2 or the scheme's x402 proxy has no code on this chain (TS)
    permit2_invalid_nonce              the Permit2 nonce is already used (or invalidated) (TS)
    permit2_allowance_required         the payer has not approved Permit2 for the amount on the token
    permit2_insufficient_balance       an `upto` payer's balance is below the maximum (`exact`:
                                       invalid_exact_evm_insufficient_balance, as the Python SDK says)
    permit2_2612_amount_mismatch       the EIP-2612 approval sent along is not for the permitted amount (TS)
    invalid_eip2612_extension_format / eip2612_from_mismatch / eip2612_asset_mismatch /
    eip2612_spender_not_permit2 / eip2612_deadline_expired
                                       the `eip2612GasSponsoring` extension's approval of Permit2 is
                                       malformed, of another owner or token, not for Permit2, or expiring (TS)
    permit2_simulation_failed          the simulated `exact` settlement reverted for another reason (TS)
    invalid_upto_evm_transaction_failed
                                       the simulated `upto` settlement reverted for another reason

Settlement:

    transaction_failed                 the transfer transaction reverted or could not be sent
    invalid_exact_evm_transfer_event_mismatch
                                       the receipt lacks the expected ERC-20 Transfer event
    settlement_pending                 broadcast, but not yet confirmed (not terminal; carries the hash,
                                       or none while the chain cannot tell whether the send went out)
    duplicate_settlement               this authorization was already settled under other requirements

Catch-alls for faults of the service itself: unexpected_verify_error, unexpected_settle_error.

`invalid_payload` also covers a payload whose `accepted` differs from the requirements in a field that
has no code of its own (asset, maxTimeoutSeconds, extra), and an idempotency key reused for another
payment; the message names the field or the key's first use.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["Reason"]


class Reason(StrEnum):
    """An x402 reason code; the value is the exact wire string."""

    INVALID_PAYLOAD = "invalid_payload"
    INVALID_PAYMENT_REQUIREMENTS = "invalid_payment_requirements"
    INVALID_X402_VERSION = "invalid_x402_version"
    INVALID_NETWORK = "invalid_network"

    UNSUPPORTED_SCHEME = "unsupported_scheme"
    NETWORK_MISMATCH = "network_mismatch"
    MISSING_EIP712_DOMAIN = "missing_eip712_domain"
    INVALID_EXACT_EVM_PAYLOAD_RECIPIENT_MISMATCH = "invalid_exact_evm_payload_recipient_mismatch"
    INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALUE_MISMATCH = (
        "invalid_exact_evm_payload_authorization_value_mismatch"
    )
    INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALID_BEFORE = (
        "invalid_exact_evm_payload_authorization_valid_before"
    )
    INVALID_EXACT_EVM_PAYLOAD_AUTHORIZATION_VALID_AFTER = (
        "invalid_exact_evm_payload_authorization_valid_after"
    )
    INVALID_EXACT_EVM_PAYLOAD_SIGNATURE = "invalid_exact_evm_payload_signature"
    INVALID_EXACT_EVM_PAYLOAD_UNDEPLOYED_SMART_WALLET = "invalid_exact_evm_payload_undeployed_smart_wallet"
    EIP6492_FACTORY_NOT_ALLOWED = "eip6492_factory_not_allowed"
    SMART_WALLET_DEPLOYMENT_FAILED = "smart_wallet_deployment_failed"
    ASSET_NOT_DEPLOYED_CONTRACT = "asset_not_deployed_contract"
    INVALID_EXACT_EVM_NONCE_ALREADY_USED = "invalid_exact_evm_nonce_already_used"
    INVALID_EXACT_EVM_INSUFFICIENT_BALANCE = "invalid_exact_evm_insufficient_balance"
    # "token" in these names is an ERC-20 token, not a credential (ruff's S105 guesses otherwise).
    INVALID_EXACT_EVM_TOKEN_NAME_MISMATCH = "invalid_exact_evm_token_name_mismatch"  # noqa: S105
    INVALID_EXACT_EVM_TOKEN_VERSION_MISMATCH = "invalid_exact_evm_token_version_mismatch"  # noqa: S105
    INVALID_EXACT_EVM_EIP3009_NOT_SUPPORTED = "invalid_exact_evm_eip3009_not_supported"
    INVALID_EXACT_EVM_TRANSACTION_SIMULATION_FAILED = "invalid_exact_evm_transaction_simulation_failed"

    INVALID_PERMIT2_SPENDER = "invalid_permit2_spender"
    INVALID_PERMIT2_RECIPIENT_MISMATCH = "invalid_permit2_recipient_mismatch"
    UPTO_FACILITATOR_MISMATCH = "upto_facilitator_mismatch"
    # "token" as above: the ERC-20 token.
    PERMIT2_TOKEN_MISMATCH = "permit2_token_mismatch"  # noqa: S105
    PERMIT2_AMOUNT_MISMATCH = "permit2_amount_mismatch"
    INVALID_UPTO_EVM_PAYLOAD_SETTLEMENT_EXCEEDS_AMOUNT = "invalid_upto_evm_payload_settlement_exceeds_amount"
    PERMIT2_DEADLINE_EXPIRED = "permit2_deadline_expired"
    PERMIT2_NOT_YET_VALID = "permit2_not_yet_valid"
    PERMIT2_INVALID_OWNER = "permit2_invalid_owner"
    PERMIT2_INVALID_DESTINATION = "permit2_invalid_destination"
    INVALID_PERMIT2_SIGNATURE = "invalid_permit2_signature"
    PERMIT2_PROXY_NOT_DEPLOYED = "permit2_proxy_not_deployed"
    PERMIT2_INVALID_NONCE = "permit2_invalid_nonce"
    PERMIT2_ALLOWANCE_REQUIRED = "permit2_allowance_required"
    PERMIT2_INSUFFICIENT_BALANCE = "permit2_insufficient_balance"
    PERMIT2_2612_AMOUNT_MISMATCH = "permit2_2612_amount_mismatch"
    INVALID_EIP2612_EXTENSION_FORMAT = "invalid_eip2612_extension_format"
    EIP2612_FROM_MISMATCH = "eip2612_from_mismatch"
    EIP2612_ASSET_MISMATCH = "eip2612_asset_mismatch"
    EIP2612_SPENDER_NOT_PERMIT2 = "eip2612_spender_not_permit2"
    EIP2612_DEADLINE_EXPIRED = "eip2612_deadline_expired"
    PERMIT2_SIMULATION_FAILED = "permit2_simulation_failed"
    INVALID_UPTO_EVM_TRANSACTION_FAILED = "invalid_upto_evm_transaction_failed"

    TRANSACTION_FAILED = "transaction_failed"
    INVALID_EXACT_EVM_TRANSFER_EVENT_MISMATCH = "invalid_exact_evm_transfer_event_mismatch"
    SETTLEMENT_PENDING = "settlement_pending"
    DUPLICATE_SETTLEMENT = "duplicate_settlement"

    UNEXPECTED_VERIFY_ERROR = "unexpected_verify_error"
    UNEXPECTED_SETTLE_ERROR = "unexpected_settle_error"

// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ReentrancyGuard} from "@openzeppelin/contracts/utils/ReentrancyGuard.sol";
import {IERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/IERC20Permit.sol";

import {ISignatureTransfer} from "./DevPermit2.sol";

/// @title DevPermit2ProxyBase
/// @notice What the x402 Permit2 proxies share: they are the spender a payer names in a Permit2 witness
/// permit, and they only ever pay the address the payer signed as witness, so whoever relays a settlement
/// cannot redirect the money. Same errors, events and EIP-2612 path as x402's `x402BasePermit2Proxy`.
/// @dev Guarded by OpenZeppelin's storage-slot ReentrancyGuard rather than x402's transient one, so the code
/// runs on a Shanghai node. Its slot may start at zero (as after the runtime code is copied to the canonical
/// address without storage): only the value "entered" blocks a call.
abstract contract DevPermit2ProxyBase is ReentrancyGuard {
    /// @notice The Permit2 contract this proxy spends through.
    ISignatureTransfer public immutable PERMIT2;

    /// @notice A `settle` paid.
    event Settled();
    /// @notice A `settleWithPermit` paid.
    event SettledWithPermit();
    /// @notice The token's EIP-2612 `permit` reverted with a reason; the settlement went on regardless.
    event EIP2612PermitFailedWithReason(address indexed token, address indexed owner, string reason);
    /// @notice The token's EIP-2612 `permit` panicked; the settlement went on regardless.
    event EIP2612PermitFailedWithPanic(address indexed token, address indexed owner, uint256 errorCode);
    /// @notice The token's EIP-2612 `permit` reverted with a custom error or nothing; the settlement went on.
    event EIP2612PermitFailedWithData(address indexed token, address indexed owner, bytes data);

    error InvalidPermit2Address();
    error InvalidDestination();
    error PaymentTooEarly();
    error InvalidOwner();
    error InvalidAmount();
    error Permit2612AmountMismatch();

    /// @notice A payer's EIP-2612 approval of Permit2, relayed with the settlement.
    struct EIP2612Permit {
        uint256 value;
        uint256 deadline;
        bytes32 r;
        bytes32 s;
        uint8 v;
    }

    constructor(address permit2) {
        if (permit2 == address(0)) revert InvalidPermit2Address();
        PERMIT2 = ISignatureTransfer(permit2);
    }

    /// @dev Pays `amount` of the permit to `to`; Permit2 checks the deadline, the amount against the permit,
    /// the nonce and the signature over the permit and `witnessHash`.
    function _pay(
        ISignatureTransfer.PermitTransferFrom calldata permit,
        uint256 amount,
        address owner,
        address to,
        uint256 validAfter,
        bytes32 witnessHash,
        string memory witnessTypeString,
        bytes calldata signature
    ) internal {
        if (amount == 0) revert InvalidAmount();
        if (owner == address(0)) revert InvalidOwner();
        if (to == address(0)) revert InvalidDestination();
        if (block.timestamp < validAfter) revert PaymentTooEarly();
        PERMIT2.permitWitnessTransferFrom(
            permit,
            ISignatureTransfer.SignatureTransferDetails({to: to, requestedAmount: amount}),
            owner,
            witnessHash,
            witnessTypeString,
            signature
        );
    }

    /// @dev Submits the payer's EIP-2612 approval of Permit2. Its failure is logged, not raised: someone may
    /// have submitted the same permit first, or the payer may have approved Permit2 already; the settlement
    /// that follows fails on its own if there is no allowance.
    function _approvePermit2(address token, address owner, EIP2612Permit calldata permit2612, uint256 permitted)
        internal
    {
        if (permit2612.value != permitted) revert Permit2612AmountMismatch();
        try IERC20Permit(token).permit(
            owner, address(PERMIT2), permit2612.value, permit2612.deadline, permit2612.v, permit2612.r, permit2612.s
        ) {} catch Error(string memory reason) {
            emit EIP2612PermitFailedWithReason(token, owner, reason);
        } catch Panic(uint256 errorCode) {
            emit EIP2612PermitFailedWithPanic(token, owner, errorCode);
        } catch (bytes memory data) {
            emit EIP2612PermitFailedWithData(token, owner, data);
        }
    }
}

// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ISignatureTransfer} from "./DevPermit2.sol";
import {DevPermit2ProxyBase} from "./DevPermit2ProxyBase.sol";

/// @title DevUptoPermit2Proxy
/// @notice Development stand-in for x402's `x402UptoPermit2Proxy`, which the dev chain puts at its canonical
/// address 0x4020A4f3b7b90ccA423B9fabCc0CE57C6C240002: the spender of x402 `upto` payments. The payer signs a
/// Permit2 witness permit for at most an amount; the facilitator the payer named in the witness, and no one
/// else, settles any nonzero amount up to it, once, to the payee the payer named. Same functions, witness
/// type, errors and events as the canonical contract.
contract DevUptoPermit2Proxy is DevPermit2ProxyBase {
    /// @notice The witness the payer signs with the permit: whom to pay, who may settle, and from when.
    struct Witness {
        address to;
        address facilitator;
        uint256 validAfter;
    }

    /// @notice The witness part of the type string Permit2 completes ("...uint256 deadline," + this).
    string public constant WITNESS_TYPE_STRING =
        "Witness witness)TokenPermissions(address token,uint256 amount)"
        "Witness(address to,address facilitator,uint256 validAfter)";
    /// @notice The EIP-712 type hash of `Witness`.
    bytes32 public constant WITNESS_TYPEHASH = keccak256("Witness(address to,address facilitator,uint256 validAfter)");

    /// @notice The caller is not the facilitator the payer signed.
    error UnauthorizedFacilitator();
    /// @notice The amount to settle is above the permitted maximum.
    error AmountExceedsPermitted();

    constructor(address permit2) DevPermit2ProxyBase(permit2) {}

    /// @notice Pay `amount` (at most `permit.permitted.amount`) from `owner` to `witness.to`, for a payer who
    /// approved Permit2; only `witness.facilitator` may call.
    function settle(
        ISignatureTransfer.PermitTransferFrom calldata permit,
        uint256 amount,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) external nonReentrant {
        _authorize(permit, amount, witness);
        _settle(permit, amount, owner, witness, signature);
        emit Settled();
    }

    /// @notice As `settle`, first submitting the payer's EIP-2612 approval of Permit2 for the permitted
    /// maximum.
    function settleWithPermit(
        EIP2612Permit calldata permit2612,
        ISignatureTransfer.PermitTransferFrom calldata permit,
        uint256 amount,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) external nonReentrant {
        _authorize(permit, amount, witness);
        _approvePermit2(permit.permitted.token, owner, permit2612, permit.permitted.amount);
        _settle(permit, amount, owner, witness, signature);
        emit SettledWithPermit();
    }

    function _authorize(ISignatureTransfer.PermitTransferFrom calldata permit, uint256 amount, Witness calldata witness)
        private
        view
    {
        if (msg.sender != witness.facilitator) revert UnauthorizedFacilitator();
        if (amount > permit.permitted.amount) revert AmountExceedsPermitted();
    }

    function _settle(
        ISignatureTransfer.PermitTransferFrom calldata permit,
        uint256 amount,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) private {
        bytes32 witnessHash =
            keccak256(abi.encode(WITNESS_TYPEHASH, witness.to, witness.facilitator, witness.validAfter));
        _pay(permit, amount, owner, witness.to, witness.validAfter, witnessHash, WITNESS_TYPE_STRING, signature);
    }
}

// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {ISignatureTransfer} from "./DevPermit2.sol";
import {DevPermit2ProxyBase} from "./DevPermit2ProxyBase.sol";

/// @title DevExactPermit2Proxy
/// @notice Development stand-in for x402's `x402ExactPermit2Proxy`, which the dev chain puts at its canonical
/// address 0x402085c248EeA27D92E8b30b2C58ed07f9E20001: the spender of x402 `exact` payments made through
/// Permit2 (`assetTransferMethod: "permit2"`). Anyone may relay a settlement; it always moves the whole
/// permitted amount, and only to the payee the payer signed as witness, once `validAfter` has passed.
/// Same functions, witness type, errors and events as the canonical contract.
contract DevExactPermit2Proxy is DevPermit2ProxyBase {
    /// @notice The witness the payer signs with the permit: whom to pay, and from when.
    struct Witness {
        address to;
        uint256 validAfter;
    }

    /// @notice The witness part of the type string Permit2 completes ("...uint256 deadline," + this).
    string public constant WITNESS_TYPE_STRING =
        "Witness witness)TokenPermissions(address token,uint256 amount)Witness(address to,uint256 validAfter)";
    /// @notice The EIP-712 type hash of `Witness`.
    bytes32 public constant WITNESS_TYPEHASH = keccak256("Witness(address to,uint256 validAfter)");

    constructor(address permit2) DevPermit2ProxyBase(permit2) {}

    /// @notice Pay `permit.permitted.amount` from `owner` to `witness.to`, for a payer who approved Permit2.
    function settle(
        ISignatureTransfer.PermitTransferFrom calldata permit,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) external nonReentrant {
        _settle(permit, owner, witness, signature);
        emit Settled();
    }

    /// @notice As `settle`, first submitting the payer's EIP-2612 approval of Permit2 for the permitted amount.
    function settleWithPermit(
        EIP2612Permit calldata permit2612,
        ISignatureTransfer.PermitTransferFrom calldata permit,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) external nonReentrant {
        _approvePermit2(permit.permitted.token, owner, permit2612, permit.permitted.amount);
        _settle(permit, owner, witness, signature);
        emit SettledWithPermit();
    }

    function _settle(
        ISignatureTransfer.PermitTransferFrom calldata permit,
        address owner,
        Witness calldata witness,
        bytes calldata signature
    ) private {
        bytes32 witnessHash = keccak256(abi.encode(WITNESS_TYPEHASH, witness.to, witness.validAfter));
        _pay(
            permit,
            permit.permitted.amount,
            owner,
            witness.to,
            witness.validAfter,
            witnessHash,
            WITNESS_TYPE_STRING,
            signature
        );
    }
}

// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC1271} from "@openzeppelin/contracts/interfaces/IERC1271.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";

/// @title GasPriceSensitiveWallet
/// @notice A hostile contract wallet for tests: it accepts its owner's signature only when the
/// transaction's gas price is zero, which is what a node's `eth_call` and `eth_estimateGas` run with
/// when no fee is given. Every simulation without fees passes, and every real transaction (which pays
/// gas) reverts: a facilitator that simulates without the fees it will send with pays for a revert.
contract GasPriceSensitiveWallet is IERC1271 {
    address public immutable owner;

    constructor(address owner_) {
        owner = owner_;
    }

    /// @dev ERC-1271 asks for a non-magic return, not a revert, when the signature is wrong.
    function isValidSignature(bytes32 hash, bytes memory signature) external view returns (bytes4) {
        if (tx.gasprice != 0) {
            return 0xffffffff;
        }
        (address recovered, ECDSA.RecoverError err,) = ECDSA.tryRecover(hash, signature);
        if (err == ECDSA.RecoverError.NoError && recovered == owner) {
            return IERC1271.isValidSignature.selector;
        }
        return 0xffffffff;
    }
}

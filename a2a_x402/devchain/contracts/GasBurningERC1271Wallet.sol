// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC1271} from "@openzeppelin/contracts/interfaces/IERC1271.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";

/// @title GasBurningERC1271Wallet
/// @notice Contract wallet for tests whose signature check costs a chosen amount of gas, as real smart
/// accounts' checks do (modules, guards, multisig thresholds). It accepts its owner's 65-byte ECDSA
/// signature of the digest, optionally followed by extra bytes (wallets often append scheme data), so a
/// token must use its `bytes signature` overload for such signatures.
contract GasBurningERC1271Wallet is IERC1271 {
    address public immutable owner;
    /// @notice How many untouched storage slots each check reads, at 2,100 gas apiece (EIP-2929).
    uint256 public immutable coldReads;

    constructor(address owner_, uint256 coldReads_) {
        owner = owner_;
        coldReads = coldReads_;
    }

    /// @dev ERC-1271 asks for a non-magic return, not a revert, when the signature is wrong.
    function isValidSignature(bytes32 hash, bytes calldata signature) external view returns (bytes4) {
        uint256 sum;
        for (uint256 slot = 1; slot <= coldReads; ++slot) {
            assembly {
                sum := add(sum, sload(slot))
            }
        }
        // Every slot read is empty; testing the sum keeps the optimizer from dropping the reads.
        if (sum != 0 || signature.length < 65) {
            return 0xffffffff;
        }
        (address recovered, ECDSA.RecoverError err,) = ECDSA.tryRecover(hash, signature[:65]);
        if (err == ECDSA.RecoverError.NoError && recovered == owner) {
            return IERC1271.isValidSignature.selector;
        }
        return 0xffffffff;
    }
}

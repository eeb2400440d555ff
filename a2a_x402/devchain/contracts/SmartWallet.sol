// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC1271} from "@openzeppelin/contracts/interfaces/IERC1271.sol";
import {Clones} from "@openzeppelin/contracts/proxy/Clones.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";

/// @title SmartWallet
/// @notice ERC-1271 wallet deployed by `WalletFactory` as a minimal clone whose immutable argument is its
/// owner: deploying one costs little, as real smart accounts' proxies do, so deployment and payment fit
/// in one transaction. It accepts the owner's ECDSA signature of the digest.
contract SmartWallet is IERC1271 {
    /// @notice The owner, read from the clone's own code (no storage, so nothing can change it).
    function owner() public view returns (address) {
        return abi.decode(Clones.fetchCloneArgs(address(this)), (address));
    }

    /// @dev ERC-1271 asks for a non-magic return, not a revert, when the signature is wrong.
    function isValidSignature(bytes32 hash, bytes memory signature) external view returns (bytes4) {
        (address recovered, ECDSA.RecoverError err,) = ECDSA.tryRecover(hash, signature);
        if (err == ECDSA.RecoverError.NoError && recovered == owner()) {
            return IERC1271.isValidSignature.selector;
        }
        return 0xffffffff;
    }
}

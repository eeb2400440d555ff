// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Create2} from "@openzeppelin/contracts/utils/Create2.sol";
import {MockERC1271Wallet} from "./MockERC1271Wallet.sol";

/// @title WalletFactory
/// @notice Minimal smart-wallet factory for ERC-6492 tests: it deploys a `MockERC1271Wallet` for an owner
/// with CREATE2, so the wallet's address is known (and can be paid and can sign) before it exists.
contract WalletFactory {
    event WalletCreated(address indexed wallet, address indexed owner, bytes32 salt);

    /// @notice Deploy the wallet of (`owner`, `salt`) unless it exists, and return its address.
    /// @dev Idempotent, as counterfactual-wallet factories are: whoever deploys the wallet first (the
    /// payer, a front-runner, a facilitator), a later deployment call still succeeds.
    function createWallet(address owner, bytes32 salt) external returns (address wallet) {
        wallet = walletAddress(owner, salt);
        if (wallet.code.length == 0) {
            new MockERC1271Wallet{salt: salt}(owner);
            emit WalletCreated(wallet, owner, salt);
        }
    }

    /// @notice The address `createWallet(owner, salt)` deploys to.
    function walletAddress(address owner, bytes32 salt) public view returns (address) {
        bytes memory initCode = abi.encodePacked(type(MockERC1271Wallet).creationCode, abi.encode(owner));
        return Create2.computeAddress(salt, keccak256(initCode));
    }
}

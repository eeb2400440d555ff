// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Clones} from "@openzeppelin/contracts/proxy/Clones.sol";
import {SmartWallet} from "./SmartWallet.sol";

/// @title WalletFactory
/// @notice Minimal smart-wallet factory for ERC-6492 tests: it deploys an owner's `SmartWallet` with
/// CREATE2, so the wallet's address is known (and can be paid, and can sign) before the wallet exists.
contract WalletFactory {
    /// @notice The `SmartWallet` every wallet is a clone of.
    address public immutable implementation;

    event WalletCreated(address indexed wallet, address indexed owner, bytes32 salt);

    constructor() {
        implementation = address(new SmartWallet());
    }

    /// @notice Deploy the wallet of (`owner`, `salt`) unless it exists, and return its address.
    /// @dev Idempotent, as counterfactual-wallet factories are: whoever deploys the wallet first (the
    /// payer, a front-runner, a facilitator), a later deployment call still succeeds.
    function createWallet(address owner, bytes32 salt) external returns (address wallet) {
        wallet = walletAddress(owner, salt);
        if (wallet.code.length == 0) {
            Clones.cloneDeterministicWithImmutableArgs(implementation, abi.encode(owner), salt);
            emit WalletCreated(wallet, owner, salt);
        }
    }

    /// @notice The address `createWallet(owner, salt)` deploys to.
    function walletAddress(address owner, bytes32 salt) public view returns (address) {
        return Clones.predictDeterministicAddressWithImmutableArgs(implementation, abi.encode(owner), salt);
    }
}

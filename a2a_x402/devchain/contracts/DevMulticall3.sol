// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

/// @title DevMulticall3
/// @notice The `aggregate3` entry point of Multicall3, written for the dev chain, which has no Multicall3
/// at its canonical address 0xcA11bde05977b3631167028862bE2a173976CA11 as public chains do. The dev chain
/// puts this runtime code there, so code that batches calls through Multicall3 runs unchanged on both.
contract DevMulticall3 {
    struct Call3 {
        address target;
        bool allowFailure;
        bytes callData;
    }

    struct Result {
        bool success;
        bytes returnData;
    }

    /// @notice Make each call in order; a failed call reverts the whole batch unless it allows failure.
    function aggregate3(Call3[] calldata calls) external payable returns (Result[] memory returnData) {
        returnData = new Result[](calls.length);
        for (uint256 i = 0; i < calls.length; ++i) {
            (bool success, bytes memory data) = calls[i].target.call(calls[i].callData);
            require(success || calls[i].allowFailure, "Multicall3: call failed");
            returnData[i] = Result(success, data);
        }
    }
}

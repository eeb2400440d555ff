// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";
import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";
import {IERC20Permit} from "@openzeppelin/contracts/token/ERC20/extensions/IERC20Permit.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {Nonces} from "@openzeppelin/contracts/utils/Nonces.sol";

import {PortableEIP712} from "./DevUSDC.sol";

/// @title DevPermitToken
/// @notice An ERC-20 with EIP-2612 `permit` and no EIP-3009, for the dev chain: its holder can approve Permit2
/// by signature, which a relayer submits (x402's `settleWithPermit`). OpenZeppelin's ERC20 and Nonces, with
/// the `permit` of OpenZeppelin's ERC20Permit (same typehash, errors and nonces) over DevUSDC's
/// PortableEIP712: ERC20Permit's own EIP712 pulls in MCOPY, which a Shanghai node lacks.
contract DevPermitToken is ERC20, Ownable, PortableEIP712, IERC20Permit, Nonces {
    bytes32 private constant _PERMIT_TYPEHASH =
        keccak256("Permit(address owner,address spender,uint256 value,uint256 nonce,uint256 deadline)");

    uint8 private immutable _decimals;

    error ERC2612ExpiredSignature(uint256 deadline);
    error ERC2612InvalidSigner(address signer, address owner);

    constructor(string memory name_, string memory symbol_, string memory version_, uint8 decimals_)
        ERC20(name_, symbol_)
        Ownable(msg.sender)
        PortableEIP712(name_, version_)
    {
        _decimals = decimals_;
    }

    function decimals() public view override returns (uint8) {
        return _decimals;
    }

    /// @notice Create `amount` tokens for `to`.
    function mint(address to, uint256 amount) external onlyOwner {
        _mint(to, amount);
    }

    /// @notice Set `spender`'s allowance over `owner`'s tokens to `value`, by `owner`'s signature.
    function permit(address owner, address spender, uint256 value, uint256 deadline, uint8 v, bytes32 r, bytes32 s)
        external
    {
        if (block.timestamp > deadline) revert ERC2612ExpiredSignature(deadline);
        bytes32 structHash = keccak256(abi.encode(_PERMIT_TYPEHASH, owner, spender, value, _useNonce(owner), deadline));
        address signer = ECDSA.recover(_hashTypedDataV4(structHash), v, r, s);
        if (signer != owner) revert ERC2612InvalidSigner(signer, owner);
        _approve(owner, spender, value);
    }

    /// @notice The next nonce `owner`'s permit must be signed with.
    function nonces(address owner) public view override(IERC20Permit, Nonces) returns (uint256) {
        return super.nonces(owner);
    }

    /// @notice The EIP-712 domain separator permits are signed in.
    function DOMAIN_SEPARATOR() external view returns (bytes32) {
        return _domainSeparatorV4();
    }
}

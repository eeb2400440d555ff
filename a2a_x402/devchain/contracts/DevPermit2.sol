// SPDX-License-Identifier: Apache-2.0
pragma solidity ^0.8.24;

import {IERC1271} from "@openzeppelin/contracts/interfaces/IERC1271.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

/// @notice The signature-transfer half of Uniswap's Permit2 as callers see it: its structs, errors, event
/// and functions have the same names, fields and selectors, so an ABI or a signer made for Permit2 works
/// against DevPermit2 unchanged.
interface ISignatureTransfer {
    struct TokenPermissions {
        address token;
        uint256 amount;
    }

    struct PermitTransferFrom {
        TokenPermissions permitted;
        uint256 nonce;
        uint256 deadline;
    }

    struct SignatureTransferDetails {
        address to;
        uint256 requestedAmount;
    }

    error InvalidAmount(uint256 maxAmount);
    error SignatureExpired(uint256 signatureDeadline);
    error InvalidNonce();
    error InvalidSignatureLength();
    error InvalidSignature();
    error InvalidSigner();
    error InvalidContractSignature();

    event UnorderedNonceInvalidation(address indexed owner, uint256 word, uint256 mask);

    function DOMAIN_SEPARATOR() external view returns (bytes32);

    function nonceBitmap(address owner, uint256 wordPos) external view returns (uint256);

    function invalidateUnorderedNonces(uint256 wordPos, uint256 mask) external;

    function permitTransferFrom(
        PermitTransferFrom calldata permit,
        SignatureTransferDetails calldata transferDetails,
        address owner,
        bytes calldata signature
    ) external;

    function permitWitnessTransferFrom(
        PermitTransferFrom calldata permit,
        SignatureTransferDetails calldata transferDetails,
        address owner,
        bytes32 witness,
        string calldata witnessTypeString,
        bytes calldata signature
    ) external;
}

/// @title DevPermit2
/// @notice Development stand-in for Permit2's SignatureTransfer, which the dev chain puts at Permit2's
/// canonical address 0x000000000022D473030F116dDEE9F6B43aC78BA3. A payer approves this contract once per
/// token, then signs EIP-712 permits (domain: name "Permit2", chain id, this address; no version) that let
/// one spender, the caller, move at most the permitted amount once before a deadline. Nonces are unordered:
/// each is one bit of a per-owner bitmap, spent in any order. The witness form binds extra signed data the
/// spender checks (the x402 proxies bind the payee). The AllowanceTransfer half of Permit2 is left out.
/// @dev Built from Permit2's published interface and behaviour, with the same checks in the same order:
/// deadline, amount, nonce, signature, transfer. There are no immutables, so the runtime code works at any
/// address it is put at.
contract DevPermit2 is ISignatureTransfer {
    bytes32 private constant _DOMAIN_TYPEHASH =
        keccak256("EIP712Domain(string name,uint256 chainId,address verifyingContract)");
    bytes32 private constant _HASHED_NAME = keccak256("Permit2");
    bytes32 private constant _TOKEN_PERMISSIONS_TYPEHASH = keccak256("TokenPermissions(address token,uint256 amount)");
    bytes32 private constant _PERMIT_TRANSFER_FROM_TYPEHASH = keccak256(
        "PermitTransferFrom(TokenPermissions permitted,address spender,uint256 nonce,uint256 deadline)"
        "TokenPermissions(address token,uint256 amount)"
    );
    /// @dev The spender's witness type string completes this prefix, e.g. "Witness witness)TokenPermissions(...)...".
    string private constant _WITNESS_TYPEHASH_PREFIX =
        "PermitWitnessTransferFrom(TokenPermissions permitted,address spender,uint256 nonce,uint256 deadline,";

    /// @notice Spent nonces: bit `nonce & 0xff` of word `nonce >> 8` of the owner's bitmap.
    mapping(address owner => mapping(uint256 wordPos => uint256 bits)) public nonceBitmap;

    /// @notice The EIP-712 domain separator, computed for the current chain and address.
    function DOMAIN_SEPARATOR() public view returns (bytes32) {
        return keccak256(abi.encode(_DOMAIN_TYPEHASH, _HASHED_NAME, block.chainid, address(this)));
    }

    /// @notice Spend the caller's nonces whose bits are set in `mask` in word `wordPos`, so no permit
    /// signed with them can be used.
    function invalidateUnorderedNonces(uint256 wordPos, uint256 mask) external {
        nonceBitmap[msg.sender][wordPos] |= mask;
        emit UnorderedNonceInvalidation(msg.sender, wordPos, mask);
    }

    /// @notice Move `transferDetails.requestedAmount` of the permitted token from `owner` to
    /// `transferDetails.to`, authorized by the owner's signature naming the caller as spender.
    function permitTransferFrom(
        PermitTransferFrom calldata permit,
        SignatureTransferDetails calldata transferDetails,
        address owner,
        bytes calldata signature
    ) external {
        bytes32 structHash = keccak256(
            abi.encode(
                _PERMIT_TRANSFER_FROM_TYPEHASH,
                _hashPermissions(permit.permitted),
                msg.sender,
                permit.nonce,
                permit.deadline
            )
        );
        _transferFrom(permit, transferDetails, owner, structHash, signature);
    }

    /// @notice As `permitTransferFrom`, with `witness` (the hash of the spender's struct, typed by
    /// `witnessTypeString`) part of what the owner signed.
    function permitWitnessTransferFrom(
        PermitTransferFrom calldata permit,
        SignatureTransferDetails calldata transferDetails,
        address owner,
        bytes32 witness,
        string calldata witnessTypeString,
        bytes calldata signature
    ) external {
        bytes32 structHash = _witnessStructHash(permit, witness, witnessTypeString);
        _transferFrom(permit, transferDetails, owner, structHash, signature);
    }

    function _witnessStructHash(PermitTransferFrom calldata permit, bytes32 witness, string calldata witnessTypeString)
        private
        view
        returns (bytes32)
    {
        bytes32 typeHash = keccak256(abi.encodePacked(_WITNESS_TYPEHASH_PREFIX, witnessTypeString));
        return keccak256(
            abi.encode(typeHash, _hashPermissions(permit.permitted), msg.sender, permit.nonce, permit.deadline, witness)
        );
    }

    function _hashPermissions(TokenPermissions calldata permitted) private pure returns (bytes32) {
        return keccak256(abi.encode(_TOKEN_PERMISSIONS_TYPEHASH, permitted.token, permitted.amount));
    }

    function _transferFrom(
        PermitTransferFrom calldata permit,
        SignatureTransferDetails calldata transferDetails,
        address owner,
        bytes32 structHash,
        bytes calldata signature
    ) private {
        if (block.timestamp > permit.deadline) revert SignatureExpired(permit.deadline);
        if (transferDetails.requestedAmount > permit.permitted.amount) revert InvalidAmount(permit.permitted.amount);
        _useNonce(owner, permit.nonce);
        _verify(signature, keccak256(abi.encodePacked(hex"1901", DOMAIN_SEPARATOR(), structHash)), owner);
        _pull(permit.permitted.token, owner, transferDetails.to, transferDetails.requestedAmount);
    }

    function _useNonce(address owner, uint256 nonce) private {
        uint256 bit = 1 << (nonce & 0xff);
        uint256 bits = nonceBitmap[owner][nonce >> 8] ^= bit;
        if (bits & bit == 0) revert InvalidNonce();
    }

    /// @dev An owner without code signs with ECDSA, in 65 bytes or EIP-2098's 64; like Permit2 (and unlike
    /// OpenZeppelin's ECDSA) any `s` is accepted. An owner with code is asked through ERC-1271.
    function _verify(bytes calldata signature, bytes32 digest, address owner) private view {
        if (owner.code.length > 0) {
            if (IERC1271(owner).isValidSignature(digest, signature) != IERC1271.isValidSignature.selector) {
                revert InvalidContractSignature();
            }
            return;
        }
        if (signature.length != 65 && signature.length != 64) revert InvalidSignatureLength();
        bytes32 r = bytes32(signature[0:32]);
        bytes32 s = bytes32(signature[32:64]);
        uint8 v;
        if (signature.length == 65) {
            v = uint8(signature[64]);
        } else {
            // EIP-2098: the top bit of the second word is v - 27, the rest is s.
            v = uint8(uint256(s >> 255)) + 27;
            s &= bytes32(type(uint256).max >> 1);
        }
        address signer = ecrecover(digest, v, r, s);
        if (signer == address(0)) revert InvalidSignature();
        if (signer != owner) revert InvalidSigner();
    }

    /// @dev Solmate's safeTransferFrom, as Permit2 uses it: a token answering nothing, or true, succeeded;
    /// any revert or false becomes "TRANSFER_FROM_FAILED". Like it, this does not ask whether `token` has code.
    function _pull(address token, address from, address to, uint256 amount) private {
        (bool ok, bytes memory answer) = token.call(abi.encodeCall(IERC20.transferFrom, (from, to, amount)));
        require(
            ok && (answer.length == 0 || (answer.length >= 32 && abi.decode(answer, (uint256)) == 1)),
            "TRANSFER_FROM_FAILED"
        );
    }
}

"""Errors raised by the Agent Card package, each with a stable ``code``.

The code is what callers map to HTTP, JSON-RPC or log fields; the message is for humans and may change.

* AgentCardError                      agentcard_error
  + CardParseError                    card_parse_error          -- not UTF-8 JSON, or not a JSON object
    - CardTooLargeError               card_too_large            -- refused by size before parsing
    - DuplicateKeyError               card_duplicate_key        -- the same member twice in one object
  + CanonicalizationError             card_not_canonicalizable  -- no canonical form (type, number, depth)
  + SigningError                      signing_failed            -- no key, or an algorithm we do not sign with
  + KeyLoadError                      key_load_failed           -- unreadable PEM / JWK / JWKS / env value
  + KeyStoreError                     key_store_error           -- unknown kid, last active key, bad file
  + SignatureError                    signature_invalid         -- one signature did not verify
    - SignatureMalformedError         signature_malformed       -- bad base64url, header JSON or members
    - AlgorithmNotAllowedError        signature_alg_not_allowed -- `none`, HMAC, or outside the allow-list
    - KeyNotFoundError                signature_key_not_found   -- no key with that `kid`
    - KeyUnusableError                signature_key_unusable
      . KeyExpiredError               signature_key_expired     -- JWK `exp` has passed
      . KeyNotYetValidError           signature_key_not_yet_valid -- JWK `nbf` is in the future
      . KeyRevokedError               signature_key_revoked     -- kid or thumbprint in the revocation set
      . KeyMismatchError              signature_key_mismatch    -- key type/curve/`alg`/`use` disagrees
    - SignatureMismatchError          signature_mismatch        -- the bytes do not match the signature
  + JwksError                         jwks_error
    - JkuNotAllowedError              jwks_url_not_allowed      -- not HTTPS, or not the card's origin
    - JwksFetchError                  jwks_fetch_failed         -- network error or non-200 answer
      . JwksTimeoutError              jwks_timeout
    - JwksInvalidError                jwks_invalid              -- too large, not JSON, not a JWK Set
  + CardVerificationError             card_verification_failed  -- raised under policy `require`
    - CardUnsignedError               card_unsigned
"""

from __future__ import annotations

from ._result import VerificationResult

__all__ = [
    "AgentCardError",
    "AlgorithmNotAllowedError",
    "CanonicalizationError",
    "CardParseError",
    "CardTooLargeError",
    "CardUnsignedError",
    "CardVerificationError",
    "DuplicateKeyError",
    "JkuNotAllowedError",
    "JwksError",
    "JwksFetchError",
    "JwksInvalidError",
    "JwksTimeoutError",
    "KeyExpiredError",
    "KeyLoadError",
    "KeyMismatchError",
    "KeyNotFoundError",
    "KeyNotYetValidError",
    "KeyRevokedError",
    "KeyStoreError",
    "KeyUnusableError",
    "SignatureError",
    "SignatureMalformedError",
    "SignatureMismatchError",
    "SigningError",
]


class AgentCardError(Exception):
    """Root of the Agent Card errors."""

    code = "agentcard_error"


class CardParseError(AgentCardError, ValueError):
    """The card bytes are not a UTF-8 JSON object."""

    code = "card_parse_error"


class CardTooLargeError(CardParseError):
    """The card (or JWK Set) is larger than the configured limit; it was not parsed."""

    code = "card_too_large"


class DuplicateKeyError(CardParseError):
    """A JSON object repeats a member name, which different parsers resolve differently."""

    code = "card_duplicate_key"


class CanonicalizationError(AgentCardError, ValueError):
    """The card has no canonical form: a known field has the wrong JSON type, a number is not an exact
    IEEE 754 double, text is not valid Unicode, or nesting is too deep."""

    code = "card_not_canonicalizable"


class SigningError(AgentCardError):
    """A card could not be signed (no keys, or a key whose algorithm we do not sign with)."""

    code = "signing_failed"


class KeyLoadError(AgentCardError, ValueError):
    """A key file, JWK, JWK Set or environment value could not be turned into a usable key."""

    code = "key_load_failed"


class KeyStoreError(AgentCardError):
    """The key directory was asked for something it cannot do (unknown kid, retiring the last key)."""

    code = "key_store_error"


class SignatureError(AgentCardError):
    """One signature on a card did not verify. Subclasses say why."""

    code = "signature_invalid"


class SignatureMalformedError(SignatureError):
    """The signature object or its protected header is not well formed."""

    code = "signature_malformed"


class AlgorithmNotAllowedError(SignatureError):
    """The protected header names an algorithm outside the allow-list (e.g. ``none``, ``HS256``)."""

    code = "signature_alg_not_allowed"


class KeyNotFoundError(SignatureError):
    """Neither the trusted keys nor the ``jku`` JWK Set hold a key with the header's ``kid``."""

    code = "signature_key_not_found"


class KeyUnusableError(SignatureError):
    """A key was found but must not be used for this signature."""

    code = "signature_key_unusable"


class KeyExpiredError(KeyUnusableError):
    """The key's JWK ``exp`` is in the past."""

    code = "signature_key_expired"


class KeyNotYetValidError(KeyUnusableError):
    """The key's JWK ``nbf`` is in the future."""

    code = "signature_key_not_yet_valid"


class KeyRevokedError(KeyUnusableError):
    """The key's kid or RFC 7638 thumbprint is in the verifier's revocation set."""

    code = "signature_key_revoked"


class KeyMismatchError(KeyUnusableError):
    """The key does not fit the header: wrong type or curve, another JWK ``alg``, or not for signing."""

    code = "signature_key_mismatch"


class SignatureMismatchError(SignatureError):
    """The signature does not match the canonical card bytes and protected header."""

    code = "signature_mismatch"


class JwksError(AgentCardError):
    """The JWK Set named by ``jku`` could not be used."""

    code = "jwks_error"


class JkuNotAllowedError(JwksError):
    """The ``jku`` is not HTTPS (outside development mode) or not on an origin the card is bound to."""

    code = "jwks_url_not_allowed"


class JwksFetchError(JwksError):
    """The JWK Set could not be fetched: network error, redirect or non-200 status."""

    code = "jwks_fetch_failed"


class JwksTimeoutError(JwksFetchError):
    """The JWK Set did not arrive in full within the timeout."""

    code = "jwks_timeout"


class JwksInvalidError(JwksError):
    """The ``jku`` answered something that is not a usable JWK Set (too large, not JSON, wrong shape)."""

    code = "jwks_invalid"


class CardVerificationError(AgentCardError):
    """Under policy ``require``: the card carries no signature that verifies. ``result`` has the details."""

    code = "card_verification_failed"

    def __init__(self, result: VerificationResult) -> None:
        self.result = result
        super().__init__(result.reason)


class CardUnsignedError(CardVerificationError):
    """Under policy ``require``: the card has no signatures at all."""

    code = "card_unsigned"

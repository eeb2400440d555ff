"""Signed A2A Agent Cards: canonicalization (A2A §8.4.1 + RFC 8785), JWS signing, keys, JWKS, verification.

Used by both sides and importing neither: the merchant signs the card it serves and publishes its JWK Set;
the payer verifies a counterpart's card. The modules' docstrings carry the usage and the decisions:

* ``canonicalize_card``          -- what a signature covers (``_canonical``)
* ``sign_card``                  -- detached JWS per key (``_jws``)
* ``read_card``, ``CardReading`` -- what each SDK's verifier reads of a card (``_readings``)
* ``KeyStore`` and key loaders   -- generate / rotate / retire, PEM / JWK / env (``_keys``)
* ``JwksCache``                  -- fetching ``jku`` JWK Sets (``_jwks``); ``check_jku`` its URL rule,
  ``fetch_key_set`` one bounded fetch of a JWK Set, ``origin_of`` a URL's origin
* ``CardVerifier``               -- policy and per-signature result (``_verify``)
* ``parse_card_json``            -- size-limited, duplicate-rejecting JSON parsing (``_parse``)
* errors with stable codes       -- (``_errors``)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import lazy_loader

# Each name is imported from its module on first use (PEP 562), so that a command (or a package)
# importing one of them does not start the others' dependencies.
if TYPE_CHECKING:
    from ._canonical import canonicalize_card
    from ._errors import (
        AgentCardError,
        AlgorithmNotAllowedError,
        CanonicalizationError,
        CardParseError,
        CardTooLargeError,
        CardUnsignedError,
        CardVerificationError,
        DuplicateKeyError,
        JkuNotAllowedError,
        JwksError,
        JwksFetchError,
        JwksInvalidError,
        JwksTimeoutError,
        KeyExpiredError,
        KeyLoadError,
        KeyMismatchError,
        KeyNotFoundError,
        KeyNotYetValidError,
        KeyRevokedError,
        KeyStoreError,
        KeyUnusableError,
        SignatureError,
        SignatureMalformedError,
        SignatureMismatchError,
        SigningError,
    )
    from ._jwks import JWKS_PATH, JwksCache, check_jku, fetch_key_set, jwks_url, origin_of
    from ._jws import JOSE_TYPE, sign_card
    from ._keys import (
        DEFAULT_KEYS_ENV,
        SIGNING_ALGORITHMS,
        VERIFICATION_ALGORITHMS,
        SigningKey,
        VerificationKey,
        generate_signing_key,
        load_signing_key,
        load_signing_keys_from_env,
        parse_jwks,
    )
    from ._keystore import KeyRecord, KeyStatus, KeyStore
    from ._parse import MAX_CARD_BYTES, MAX_NESTING, parse_card_json
    from ._readings import READING_HEADER, CardReading, read_card
    from ._result import OTHER_READING, CardStatus, SignatureCheck, SignaturePolicy, VerificationResult
    from ._verify import CardVerifier

__all__ = [
    "AgentCardError",
    "AlgorithmNotAllowedError",
    "CanonicalizationError",
    "CardParseError",
    "CardReading",
    "CardStatus",
    "CardTooLargeError",
    "CardUnsignedError",
    "CardVerificationError",
    "CardVerifier",
    "DEFAULT_KEYS_ENV",
    "DuplicateKeyError",
    "JOSE_TYPE",
    "JWKS_PATH",
    "JkuNotAllowedError",
    "JwksCache",
    "JwksError",
    "JwksFetchError",
    "JwksInvalidError",
    "JwksTimeoutError",
    "KeyExpiredError",
    "KeyLoadError",
    "KeyMismatchError",
    "KeyNotFoundError",
    "KeyNotYetValidError",
    "KeyRecord",
    "KeyRevokedError",
    "KeyStatus",
    "KeyStore",
    "KeyStoreError",
    "KeyUnusableError",
    "MAX_CARD_BYTES",
    "MAX_NESTING",
    "OTHER_READING",
    "READING_HEADER",
    "SIGNING_ALGORITHMS",
    "SignatureCheck",
    "SignatureError",
    "SignatureMalformedError",
    "SignatureMismatchError",
    "SignaturePolicy",
    "SigningError",
    "SigningKey",
    "VERIFICATION_ALGORITHMS",
    "VerificationKey",
    "VerificationResult",
    "canonicalize_card",
    "check_jku",
    "fetch_key_set",
    "generate_signing_key",
    "jwks_url",
    "load_signing_key",
    "load_signing_keys_from_env",
    "origin_of",
    "parse_card_json",
    "parse_jwks",
    "read_card",
    "sign_card",
]

_EXPORTS = {
    "_canonical": ("canonicalize_card",),
    "_errors": (
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
    ),
    "_jwks": ("JWKS_PATH", "JwksCache", "check_jku", "fetch_key_set", "jwks_url", "origin_of"),
    "_jws": ("JOSE_TYPE", "sign_card"),
    "_keys": (
        "DEFAULT_KEYS_ENV",
        "SIGNING_ALGORITHMS",
        "VERIFICATION_ALGORITHMS",
        "SigningKey",
        "VerificationKey",
        "generate_signing_key",
        "load_signing_key",
        "load_signing_keys_from_env",
        "parse_jwks",
    ),
    "_keystore": ("KeyRecord", "KeyStatus", "KeyStore"),
    "_parse": ("MAX_CARD_BYTES", "MAX_NESTING", "parse_card_json"),
    "_readings": ("READING_HEADER", "CardReading", "read_card"),
    "_result": ("OTHER_READING", "CardStatus", "SignatureCheck", "SignaturePolicy", "VerificationResult"),
    "_verify": ("CardVerifier",),
}
if not TYPE_CHECKING:  # type checkers read the imports above, and so still refuse a name not exported
    __getattr__, __dir__, _ = lazy_loader.attach(__name__, submod_attrs=_EXPORTS)

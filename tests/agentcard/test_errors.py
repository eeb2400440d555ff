from __future__ import annotations

import inspect
from typing import cast

import pytest

from a2a_x402 import agentcard
from a2a_x402.agentcard import (
    AgentCardError,
    CardStatus,
    CardUnsignedError,
    CardVerificationError,
    JwksError,
    KeyUnusableError,
    SignatureError,
    VerificationResult,
)

EXCEPTIONS = [
    member
    for _, member in inspect.getmembers(agentcard, inspect.isclass)
    if issubclass(member, Exception) and member.__module__.startswith("a2a_x402.agentcard")
]
ERRORS = cast(list[type[AgentCardError]], EXCEPTIONS)  # test_one_root checks the cast

# The codes are a contract with callers (HTTP/JSON-RPC mappings, logs, dashboards): changing one is a break.
STABLE_CODES = {
    "AgentCardError": "agentcard_error",
    "AlgorithmNotAllowedError": "signature_alg_not_allowed",
    "CanonicalizationError": "card_not_canonicalizable",
    "CardParseError": "card_parse_error",
    "CardTooLargeError": "card_too_large",
    "CardUnsignedError": "card_unsigned",
    "CardVerificationError": "card_verification_failed",
    "DuplicateKeyError": "card_duplicate_key",
    "JkuNotAllowedError": "jwks_url_not_allowed",
    "JwksError": "jwks_error",
    "JwksFetchError": "jwks_fetch_failed",
    "JwksInvalidError": "jwks_invalid",
    "JwksTimeoutError": "jwks_timeout",
    "KeyExpiredError": "signature_key_expired",
    "KeyLoadError": "key_load_failed",
    "KeyMismatchError": "signature_key_mismatch",
    "KeyNotFoundError": "signature_key_not_found",
    "KeyNotYetValidError": "signature_key_not_yet_valid",
    "KeyRevokedError": "signature_key_revoked",
    "KeyStoreError": "key_store_error",
    "KeyUnusableError": "signature_key_unusable",
    "SignatureError": "signature_invalid",
    "SignatureMalformedError": "signature_malformed",
    "SignatureMismatchError": "signature_mismatch",
    "SigningError": "signing_failed",
}


def test_every_error_has_its_stable_code() -> None:
    assert {error.__name__: error.code for error in ERRORS} == STABLE_CODES


def test_codes_are_unique() -> None:
    assert len({error.code for error in ERRORS}) == len(ERRORS)


def test_one_root() -> None:
    assert EXCEPTIONS and all(issubclass(error, AgentCardError) for error in EXCEPTIONS)


@pytest.mark.parametrize("error", ERRORS, ids=lambda error: error.__name__)
def test_every_error_is_an_agent_card_error_drawn_in_the_module_docstring(
    error: type[AgentCardError],
) -> None:
    assert error.__name__ in agentcard._errors.__doc__
    assert error.code in agentcard._errors.__doc__


def test_families() -> None:
    assert issubclass(agentcard.KeyExpiredError, KeyUnusableError)
    assert issubclass(KeyUnusableError, SignatureError)
    assert issubclass(agentcard.JwksTimeoutError, agentcard.JwksFetchError)
    assert issubclass(agentcard.JkuNotAllowedError, JwksError)
    assert issubclass(CardUnsignedError, CardVerificationError)
    for value_error in (agentcard.CardParseError, agentcard.CanonicalizationError, agentcard.KeyLoadError):
        assert issubclass(value_error, ValueError)


def test_verification_error_carries_the_result() -> None:
    result = VerificationResult(CardStatus.UNSIGNED, None, "card_unsigned", "the card has no signatures")
    error = CardUnsignedError(result)
    assert error.result is result and str(error) == "the card has no signatures"

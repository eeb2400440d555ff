"""What checking a card's signatures found: one result per card, one check per signature; and what the caller
makes of it (`SignaturePolicy`, apart from the verifier so that a command's options can name it cheaply)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["OTHER_READING", "CardStatus", "SignatureCheck", "SignaturePolicy", "VerificationResult"]

OTHER_READING = "signature_other_reading"
"""``SignatureCheck.code`` of a signature over another verifier's reading of the card (not checked)."""


class SignaturePolicy(StrEnum):
    """What a failed or missing card signature does to the caller."""

    REQUIRE = "require"
    WARN = "warn"
    OFF = "off"


class CardStatus(StrEnum):
    """Outcome of checking a card."""

    VERIFIED = "verified"
    UNSIGNED = "unsigned"
    FAILED = "failed"
    SKIPPED = "skipped"


@dataclass(frozen=True, slots=True)
class SignatureCheck:
    """What happened to one entry of ``signatures``.

    Attributes:
        index: Position in ``signatures``.
        kid, alg, jku: From the protected header, when it could be read.
        code: ``None`` if this signature verified, else the stable code of the error that stopped it
            (``OTHER_READING`` for a signature over another verifier's reading, which is not checked).
        reason: Human-readable detail.
        reading: The protected header's ``cardReading``: ``None`` for a signature over our reading.
    """

    index: int
    kid: str | None
    alg: str | None
    jku: str | None
    code: str | None
    reason: str
    reading: str | None = None

    @property
    def verified(self) -> bool:
        """Whether this signature verified."""
        return self.code is None


@dataclass(frozen=True, slots=True)
class VerificationResult:
    """Outcome of ``CardVerifier.verify``.

    Attributes:
        status: verified, unsigned, failed, or skipped (policy ``off``).
        kid: Kid of the first signature that verified, if any.
        code: ``None`` when verified or skipped; otherwise ``card_unsigned``, ``card_not_canonicalizable``,
            ``signature_malformed`` (the ``signatures`` member itself is unusable) or
            ``card_verification_failed`` (no signature verified; see ``checks``).
        reason: Human-readable summary.
        checks: One entry per signature over our reading (or whose header could not be read), in card order.
        others: The signatures naming another verifier's reading (e.g. ``a2a-sdk-0.3``), left unchecked:
            they cover what that SDK reads of the card, not all of it, so they neither verify the card nor
            count as failures.
    """

    status: CardStatus
    kid: str | None
    code: str | None
    reason: str
    checks: tuple[SignatureCheck, ...] = ()
    others: tuple[SignatureCheck, ...] = ()

    @property
    def verified(self) -> bool:
        """Whether at least one signature verified."""
        return self.status is CardStatus.VERIFIED

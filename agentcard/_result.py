"""What checking a card's signatures found: one result per card, one check per signature."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["CardStatus", "SignatureCheck", "VerificationResult"]


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
        code: ``None`` if this signature verified, else the stable code of the error that stopped it.
        reason: Human-readable detail.
    """

    index: int
    kid: str | None
    alg: str | None
    jku: str | None
    code: str | None
    reason: str

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
        checks: One entry per signature, in card order.
    """

    status: CardStatus
    kid: str | None
    code: str | None
    reason: str
    checks: tuple[SignatureCheck, ...] = ()

    @property
    def verified(self) -> bool:
        """Whether at least one signature verified."""
        return self.status is CardStatus.VERIFIED

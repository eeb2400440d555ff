"""Verifying a counterpart's signed Agent Card (A2A §8.4.3) under a policy.

Usage (payer side)::

    async with httpx.AsyncClient() as client:
        verifier = CardVerifier(jwks=JwksCache(client), policy=SignaturePolicy.WARN)
        body = (await client.get(card_url)).content
        result = await verifier.verify(parse_card_json(body), card_url=card_url)
        if result.verified: ...

The §8.4.3 steps, in order: canonicalize the card once (steps 3-5: drop default-valued fields, exclude
``signatures``, JCS; see ``canonicalize_card``), then for each signature (step 1) decode its header, find
the key (step 2) and check the signature (step 6). Every signature is checked, so the result explains each
one; a signature whose protected header names another verifier's reading (``cardReading``, see
``_readings``) is set aside unchecked, in ``others``: it covers what an SDK reads of the card, not the JSON
received, so it can neither verify the card here nor make it fail. The card is accepted when at least one
verifies with a key that is neither expired (JWK ``exp``), not
yet valid (JWK ``nbf``) nor revoked (kid or RFC 7638 thumbprint in ``revoked``).

Where keys come from: a trusted key with the header's kid wins; otherwise the key is fetched from the
header's ``jku`` through the ``JwksCache`` (HTTPS only, unless its development flag allows localhost).
Anyone can sign a card with their own key and point ``jku`` at their own JWK Set, so a ``jku`` is accepted
only on the origin of ``card_url`` (where the card was fetched) or on one of the ``jku_origins`` the caller
configured. Nothing inside the card widens that: its ``supportedInterfaces`` are covered by the very
signature being checked, so an attacker who signs with their own key can list their own origin there.

Policies: ``require`` raises ``CardUnsignedError`` / ``CardVerificationError`` (the result is attached);
``warn`` (default) logs the reason at WARNING and returns the result; ``off`` checks nothing and returns a
``skipped`` result. Bad input never raises anything else: each problem becomes a reason with a stable code.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from a2a.types import AgentCard

from ._canonical import canonicalize_card, card_to_json
from ._errors import (
    AgentCardError,
    CanonicalizationError,
    CardUnsignedError,
    CardVerificationError,
    JkuNotAllowedError,
    KeyExpiredError,
    KeyNotFoundError,
    KeyNotYetValidError,
    KeyRevokedError,
    SignatureMalformedError,
)
from ._jwks import JwksCache, Origin, origin_of
from ._jws import ProtectedHeader, decode_signature, verify_signature
from ._keys import VERIFICATION_ALGORITHMS, VerificationKey
from ._result import OTHER_READING, CardStatus, SignatureCheck, SignaturePolicy, VerificationResult

__all__ = ["CardVerifier"]

logger = logging.getLogger(__name__)


class CardVerifier:
    """Checks counterpart Agent Cards; see the module docstring for the rules.

    Args:
        jwks: Cache used to fetch keys named by ``jku``; without it only ``trusted_keys`` are used.
        trusted_keys: Keys trusted regardless of ``jku`` (e.g. ``parse_jwks(pinned).values()``).
        jku_origins: Origins (``https://keys.example``) whose ``jku`` is accepted for any card, besides the
            origin of the ``card_url`` given to ``verify``.
        revoked: Kids and RFC 7638 thumbprints that must not verify anything.
        policy: ``warn`` (default), ``require`` or ``off``.
        algorithms: Accepted ``alg`` values; a subset of ``VERIFICATION_ALGORITHMS`` (never ``none`` or HMAC).
        max_signatures: Cards with more signatures fail without any being checked (each may cost a fetch).
        clock: Current UTC time, injectable for tests.

    Raises:
        ValueError: ``algorithms`` names an algorithm outside ``VERIFICATION_ALGORITHMS``, or an entry of
            ``jku_origins`` is not an absolute http(s) URL.
    """

    def __init__(
        self,
        *,
        jwks: JwksCache | None = None,
        trusted_keys: Iterable[VerificationKey] = (),
        jku_origins: Iterable[str] = (),
        revoked: Collection[str] = (),
        policy: SignaturePolicy = SignaturePolicy.WARN,
        algorithms: Collection[str] = VERIFICATION_ALGORITHMS,
        max_signatures: int = 8,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        unsupported = sorted(set(algorithms) - set(VERIFICATION_ALGORITHMS))
        if unsupported:
            raise ValueError(f"unsupported verification algorithm(s): {', '.join(unsupported)}")
        origins = {url: origin_of(url) for url in jku_origins}
        malformed = sorted(url for url, origin in origins.items() if origin is None)
        if malformed:
            raise ValueError(f"jku origins must be absolute http(s) URLs: {', '.join(malformed)}")
        self._jwks = jwks
        self._jku_origins = frozenset(origin for origin in origins.values() if origin is not None)
        self._trusted = {key.kid: key for key in trusted_keys}
        self._revoked = frozenset(revoked)
        self.policy = policy
        self._algorithms = frozenset(algorithms)
        self._max_signatures = max_signatures
        self._clock = clock

    async def verify(
        self, card: AgentCard | Mapping[str, Any], *, card_url: str | None = None
    ) -> VerificationResult:
        """Check ``card``'s signatures and apply the policy.

        Args:
            card: The card JSON as received (ideally from ``parse_card_json``), or a protobuf ``AgentCard``.
                Verify the JSON when you have it: a proto drops members it does not know, which the signer
                may have signed.
            card_url: Where the card was fetched; a ``jku`` on that origin is accepted. Without it only
                ``trusted_keys`` and the configured ``jku_origins`` can verify the card.

        Returns:
            The result; under ``warn`` a card that is not verified has been logged.

        Raises:
            CardUnsignedError: policy ``require`` and the card has no signatures.
            CardVerificationError: policy ``require`` and no signature verified.
        """
        if self.policy is SignaturePolicy.OFF:
            return VerificationResult(CardStatus.SKIPPED, None, None, "signature policy is off")
        result = await self._check(card, card_url)
        if result.verified:
            logger.debug("agent card verified: url=%s kid=%s", card_url, result.kid)
            return result
        if self.policy is SignaturePolicy.REQUIRE:
            if result.status is CardStatus.UNSIGNED:
                raise CardUnsignedError(result)
            raise CardVerificationError(result)
        logger.warning(
            "agent card not verified: url=%s status=%s code=%s reason=%s",
            card_url,
            result.status,
            result.code,
            result.reason,
        )
        return result

    async def _check(self, card: AgentCard | Mapping[str, Any], card_url: str | None) -> VerificationResult:
        try:
            card_json = card_to_json(card)
            signatures = card_json.get("signatures")
            if signatures is None or signatures == []:
                return VerificationResult(
                    CardStatus.UNSIGNED, None, CardUnsignedError.code, "the card has no signatures"
                )
            if not isinstance(signatures, list):
                return _failed(SignatureMalformedError.code, '"signatures" must be a JSON array')
            if len(signatures) > self._max_signatures:
                return _failed(
                    SignatureMalformedError.code,
                    f"{len(signatures)} signatures, more than the {self._max_signatures} checked",
                )
            payload = canonicalize_card(card_json)
        except CanonicalizationError as exc:
            return _failed(exc.code, str(exc))
        origins = self._jku_origins | _origin_set(card_url)
        every = [
            await self._check_one(index, entry, payload, origins) for index, entry in enumerate(signatures)
        ]
        checks = tuple(check for check in every if check.code != OTHER_READING)
        others = tuple(check for check in every if check.code == OTHER_READING)
        good = next((check for check in checks if check.verified), None)
        if good is not None:
            return VerificationResult(
                CardStatus.VERIFIED, good.kid, None, f"verified with key {good.kid!r}", checks, others
            )
        summary = "; ".join(f"#{check.index} {check.code}: {check.reason}" for check in checks)
        if not checks:
            readings = ", ".join(sorted({str(check.reading) for check in others}))
            summary = f"every signature covers another verifier's reading of the card ({readings}), none ours"
        return _failed(CardVerificationError.code, f"no signature verified: {summary}", checks, others)

    async def _check_one(
        self, index: int, entry: Any, payload: bytes, origins: frozenset[Origin]
    ) -> SignatureCheck:
        try:
            header, protected, signature = decode_signature(entry, self._algorithms)
        except AgentCardError as exc:
            return SignatureCheck(index, None, None, None, exc.code, str(exc))
        if header.reading is not None:
            reason = f"covers the {header.reading!r} reading of the card, not the served JSON; not checked"
            return SignatureCheck(
                index, header.kid, header.alg, header.jku, OTHER_READING, reason, header.reading
            )
        try:
            key = await self._find_key(header, origins)
            self._check_usable(key)
            verify_signature(payload, protected, signature, header.alg, key)
        except AgentCardError as exc:
            return SignatureCheck(index, header.kid, header.alg, header.jku, exc.code, str(exc))
        return SignatureCheck(index, header.kid, header.alg, header.jku, None, "verified")

    async def _find_key(self, header: ProtectedHeader, origins: frozenset[Origin]) -> VerificationKey:
        trusted = self._trusted.get(header.kid)
        if trusted is not None:
            return trusted
        if header.jku is None:
            raise KeyNotFoundError(f"no trusted key {header.kid!r} and the header names no jku")
        if self._jwks is None:
            raise KeyNotFoundError(f"no trusted key {header.kid!r} and fetching jku is not configured")
        self._jwks.check_url(header.jku)
        if origin_of(header.jku) not in origins:
            raise JkuNotAllowedError(
                f"jku {header.jku!r} is not on the origin the card was fetched from "
                "nor on a configured jku origin"
            )
        return await self._jwks.get_key(header.jku, header.kid)

    def _check_usable(self, key: VerificationKey) -> None:
        if key.kid in self._revoked or key.thumbprint in self._revoked:
            raise KeyRevokedError(f"key {key.kid!r} is revoked")
        now = self._clock()
        if key.expires_at is not None and now >= key.expires_at:
            raise KeyExpiredError(f"key {key.kid!r} expired at {key.expires_at.isoformat()}")
        if key.not_before is not None and now < key.not_before:
            raise KeyNotYetValidError(f"key {key.kid!r} is not valid before {key.not_before.isoformat()}")


def _failed(
    code: str, reason: str, checks: tuple[SignatureCheck, ...] = (), others: tuple[SignatureCheck, ...] = ()
) -> VerificationResult:
    return VerificationResult(CardStatus.FAILED, None, code, reason, checks, others)


def _origin_set(card_url: str | None) -> frozenset[Origin]:
    """The origin the card was fetched from, as a set (empty when unknown or not http(s))."""
    origin = origin_of(card_url) if card_url is not None else None
    return frozenset() if origin is None else frozenset({origin})
